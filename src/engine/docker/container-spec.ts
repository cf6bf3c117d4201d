import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import { parseSize } from '../../profile/profile-schema.js';
import { sandboxUserIds, type SandboxSpec, type SessionIdentity } from '../sandbox-engine.js';
import { SANDBOX_PG_SOCKET_DIR } from '../../database/socket-relay.js';
import { mountValues, substituteSandboxValues } from '../../profile/sandbox-values.js';
import {
  EGRESS_RELAY_URL,
  egressRelayEnv,
  GATE_SOCKET_ENV,
  GATE_TOKEN_ENV,
  GATE_TUNABLES_ENV,
  SANDBOX_EGRESS_DIR,
  SANDBOX_IO_DIR,
} from '../gate-variables.js';
import { SANDBOX_GATE_PATH } from './gate.js';
import { volumeMasks } from '../image-volumes.js';
import {
  containerName,
  LABEL_CLASS,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PID,
  LABEL_PREVIEW,
  LABEL_SERVER,
  LABEL_SESSION,
} from '../sandbox-labels.js';
import { commandWithValues, proxyEnv, SANDBOX_HOME, SANDBOX_TMP } from '../sandbox-process.js';
import type { EngineKind } from './docker-connection.js';

/** Kept here too for the database's role comments (owner host and pid): see the engine port. */
export type { SessionIdentity };

/**
 * Pure translation of a planned sandbox into Docker's container-create options.
 * Every sandbox, whatever its class, gets the same hardening; only mounts and network differ.
 */

/**
 * Docker's own log of a sandbox (its stderr; hintbox reads it through the attach stream, not
 * from this log): json-file, rotated, so that a server flooding stderr cannot fill the host's
 * disk. At most SANDBOX_LOG_FILES × SANDBOX_LOG_FILE_SIZE on disk.
 */
export const SANDBOX_LOG_FILE_SIZE = '1m';
export const SANDBOX_LOG_FILES = 2;

export interface EngineFeatures {
  /** Engine API ≥ 1.44: bind mounts can be made read-only recursively. */
  recursiveReadOnly: boolean;
  /** Which engine creates the container (default Docker): Podman spells a tmpfs's owner otherwise. */
  kind?: EngineKind;
}

/**
 * A tmpfs owned by the sandbox user: Docker takes `uid=`/`gid=`; Podman refuses them (HTTP 500
 * `unknown mount option "uid=…"`) and takes `U` (owned by the container's user) instead. Pure.
 */
export function tmpfsOwner(kind: EngineKind | undefined, uid: number, gid: number): string {
  return kind === 'podman' ? 'U' : `uid=${uid},gid=${gid}`;
}

/** A sandbox's spec as the Docker engine creates it: with its gate and what the engine can do. */
export interface ContainerSpecInput extends SandboxSpec {
  engine: EngineFeatures;
  /** The sandbox gate: its binary on the host and this sandbox's socket (see gate.ts). */
  gate: GateMounts;
  /** With `network: egress`: its class's egress proxy, reached through the gate's relay (see egress-proxy.ts). */
  egress?: EgressAttachment;
  /**
   * With `network: bridge`: the hintbox process's open network (see open-network.ts), never the
   * engine's default bridge, where sandboxes of other processes would meet (and, without
   * `enable_icc=false`, those of its own sessions and servers).
   */
  openNetwork?: string;
  /** The image's `VOLUME` paths (inspected by the adapter): each gets a bounded tmpfs (see image-volumes.ts). */
  imageVolumes: readonly string[];
}

/**
 * The way out of a sandbox with egress: no network at all, and the folder of its class's proxy
 * socket, bound read-only; the gate relays the sandbox's 127.0.0.1:3128 to that socket.
 */
export interface EgressAttachment {
  /** Host folder of the proxy's socket (bound at SANDBOX_EGRESS_DIR). */
  hostDir: string;
  /** The class's egress token: the gate sends it first on each relayed connection. */
  token: string;
  /** The socket's file name in that folder (random: the folder is not listable). */
  socketFile: string;
}

export interface GateMounts {
  /** Host path of the static gate binary. */
  binary: string;
  /** Host folder of the sandbox's gate socket. */
  hostDir: string;
  /** The socket's path inside the sandbox. */
  sandboxPath: string;
  /** What the gate sends first to prove it is the gate. */
  token: string;
}

/** A restart's container (generation > 0) and a preview's get names of their own. */
function nameOf(input: ContainerSpecInput): string {
  const base = containerName(input.session, input.profile.name, input.sandboxId);
  if (input.preview) return `${base}-preview-${randomBytes(3).toString('hex')}`;
  return input.generation ? `${base}-${input.generation}` : base;
}

export function buildContainerSpec(input: ContainerSpecInput): Docker.ContainerCreateOptions {
  const { session, profile, sandboxId, engine } = input;
  // A dry run never reaches the outside world, whatever its grant says.
  const grant = input.preview ? { ...input.grant, network: 'none' as const } : input.grant;
  const { uid, gid } = sandboxUserIds(profile, input.defaultUser);
  if (grant.network === 'egress' && !input.egress) {
    throw new Error(`sandbox ${sandboxId}: its egress proxy is not ready (no network without it)`);
  }
  if (grant.network === 'bridge' && !input.openNetwork) {
    throw new Error(`sandbox ${sandboxId}: its open network is not ready (no network without it)`);
  }
  // Egress is no network: the proxy is reached through the gate (a Unix socket), not an engine network.
  const networkMode = grant.network === 'bridge' ? (input.openNetwork as string) : 'none';
  const egress = grant.network === 'egress' ? input.egress : undefined;
  const tmpfsSize = parseSize(profile.limits.tmpfs);
  const memory = parseSize(profile.limits.memory);

  const mounts: Docker.MountConfig = grant.mounts.map((m) => ({
    Type: 'bind',
    Source: m.source,
    Target: m.target,
    ReadOnly: m.readOnly,
    // Without the recursive option (API < 1.44), nested mount points under a read-only source
    // stay writable; the runtime refuses such sources before creating the container.
    BindOptions: {
      Propagation: 'rprivate',
      ...(m.readOnly && engine.recursiveReadOnly ? { ReadOnlyForceRecursive: true } : {}),
    },
  }));
  // The gate and its socket's folder: read-only, so nothing can be planted beside them.
  mounts.push(
    {
      Type: 'bind',
      Source: input.gate.binary,
      Target: SANDBOX_GATE_PATH,
      ReadOnly: true,
      BindOptions: { Propagation: 'rprivate' },
    },
    {
      Type: 'bind',
      Source: input.gate.hostDir,
      Target: SANDBOX_IO_DIR,
      ReadOnly: true,
      BindOptions: { Propagation: 'rprivate' },
    },
  );
  if (egress) {
    mounts.push({
      Type: 'bind',
      Source: egress.hostDir,
      Target: SANDBOX_EGRESS_DIR,
      ReadOnly: true,
      BindOptions: { Propagation: 'rprivate' },
    });
  }
  if (input.database) {
    // Read-only: connecting to a Unix socket needs no write access, and nothing can be planted.
    mounts.push({
      Type: 'bind',
      Source: input.database.socketDir,
      Target: SANDBOX_PG_SOCKET_DIR,
      ReadOnly: true,
      BindOptions: { Propagation: 'rprivate' },
    });
  }

  // `${sandbox:NAME}` in the profile's args and env: this sandbox's own values (sandbox-values.ts).
  const values = { ...mountValues(profile.mounts), ...input.database?.env };
  const profileEnv = Object.fromEntries(
    Object.entries(profile.env).map(([k, v]) => [k, substituteSandboxValues(v, values, `env.${k}`)]),
  );
  const env = Object.entries({
    ...profileEnv,
    ...input.database?.env,
    ...(egress ? proxyEnv(EGRESS_RELAY_URL) : {}),
    HOME: SANDBOX_HOME,
    TMPDIR: SANDBOX_TMP,
    [GATE_SOCKET_ENV]: input.gate.sandboxPath,
    [GATE_TOKEN_ENV]: input.gate.token,
    // Always set (empty without egress): the image's ENV may not turn the relay on.
    ...egressRelayEnv(egress),
    // Read by the static gate's libc before the release: the image's ENV may not tune it. The
    // gate gives the server the profile's own value instead, or none.
    GLIBC_TUNABLES: '',
    [GATE_TUNABLES_ENV]: profileEnv.GLIBC_TUNABLES === undefined ? '' : `=${profileEnv.GLIBC_TUNABLES}`,
  }).map(([k, v]) => `${k}=${v}`);

  const owner = tmpfsOwner(engine.kind, uid, gid);
  const tmpfs = {
    [SANDBOX_TMP]: `rw,nosuid,nodev,noexec,size=${tmpfsSize},mode=1777`,
    [SANDBOX_HOME]: `rw,nosuid,nodev,noexec,size=${tmpfsSize},${owner},mode=0700`,
  };
  // The image's VOLUMEs: Docker would make each an unbounded, disk-backed folder (in read-only
  // classes too); each is a tmpfs of the same bound instead, whose pages count against the
  // sandbox's memory.
  const masks = volumeMasks({
    imageVolumes: input.imageVolumes,
    binds: mounts.map((m) => m.Target),
    tmpfs: Object.keys(tmpfs),
    options: `rw,nosuid,nodev,noexec,size=${tmpfsSize},${owner},mode=0755`,
    what: `sandbox ${sandboxId}`,
  });

  return {
    name: nameOf(input),
    // By id, as resolved once at start: a tag moved meanwhile cannot swap the image under the
    // command and plan that were read from this one.
    Image: input.imageId ?? profile.server.image,
    // The gate runs first and executes the server once hintbox releases it. An empty Cmd with
    // an Entrypoint given: Docker adds nothing of the image's.
    Entrypoint: [SANDBOX_GATE_PATH, ...commandWithValues(input.command, profile.server.args, values)],
    Cmd: [],
    User: `${uid}:${gid}`,
    WorkingDir: profile.server.workdir ?? SANDBOX_HOME,
    Env: env,
    Labels: {
      [LABEL_SESSION]: session.sessionId,
      [LABEL_SERVER]: profile.name,
      [LABEL_CLASS]: input.preview ? `preview-${sandboxId}` : sandboxId,
      ...(input.preview ? { [LABEL_PREVIEW]: '1' } : {}),
      [LABEL_OWNER_HOST]: session.ownerHost,
      [LABEL_OWNER_PID]: String(session.ownerPid),
    },
    // MCP goes over the gate's socket; Docker carries only what the server writes to stderr.
    AttachStdin: false,
    AttachStdout: true,
    AttachStderr: true,
    OpenStdin: false,
    StdinOnce: false,
    Tty: false,
    // The image's HEALTHCHECK would be run by Docker inside the sandbox, before the release too.
    Healthcheck: { Test: ['NONE'] },
    NetworkDisabled: networkMode === 'none',
    HostConfig: {
      NetworkMode: networkMode,
      Mounts: mounts,
      Binds: [],
      Tmpfs: { ...tmpfs, ...masks },
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      CapAdd: [],
      SecurityOpt: ['no-new-privileges:true'],
      Privileged: false,
      // The gate is the first process (PID 1): it freezes the sandbox, and the server cannot signal it.
      Init: false,
      PidsLimit: profile.limits.pids,
      Memory: memory,
      MemorySwap: memory,
      NanoCpus: Math.round(profile.limits.cpus * 1e9),
      IpcMode: 'private',
      PidMode: '',
      UsernsMode: '',
      // The owner removes containers itself (so a dead sandbox's logs can still be read).
      AutoRemove: false,
      RestartPolicy: { Name: 'no' },
      // Whatever the engine's default driver: a bounded local file.
      LogConfig: {
        Type: 'json-file',
        Config: { 'max-size': SANDBOX_LOG_FILE_SIZE, 'max-file': String(SANDBOX_LOG_FILES), compress: 'false' },
      },
    },
  };
}
