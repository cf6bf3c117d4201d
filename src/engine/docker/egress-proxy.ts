import { randomBytes } from 'node:crypto';
import { chmod, chown, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';
import { parseEgressHosts } from '../../policy/egress-hosts.js';
import type { Logger } from '../../util/logger.js';
import type { EgressRequest, SessionIdentity } from '../sandbox-engine.js';
import {
  containerName,
  LABEL_CLASS,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PID,
  LABEL_SERVER,
  LABEL_SESSION,
} from '../sandbox-labels.js';
import { type EgressAttachment } from './container-spec.js';
import { IMAGES_DIR, SERVER_SUITE, type ImageBuilder } from './image-builder.js';
import { EGRESS_PROXY_IMAGE, parseSquidLogLine, squidConfig } from '../squid-config.js';
import { assertNoVolumes, imageVolumePaths, volumeMasks } from '../image-volumes.js';
import { removeContainer } from './remove-container.js';
import { egressSocketFile, GATE_EGRESS_TOKEN_ENV, SANDBOX_EGRESS_DIR } from '../gate-variables.js';
import { SANDBOX_GATE_PATH } from './gate.js';
import { makeSocketFolder } from '../../util/unix-socket.js';

/**
 * The egress of one sandbox class with hosts by name (profile `network: { allow, backend }`):
 * hintbox's egress proxy (Squid, in a hardened container of its own on the outbound network)
 * that lets through only the class's `host:port` entries. The class's sandboxes have no network
 * at all: each one's gate relays its 127.0.0.1:3128 to the proxy's Unix socket, in a host folder
 * bound into both (see native/hintbox-gate.c), and the same gate, first process of the proxy
 * container, relays what proves itself with the class's token to Squid, which listens on the
 * proxy container's loopback only. No engine network joins a sandbox to anything, so an engine
 * whose networks reach the host (Podman's) cannot open a way there. Each request the proxy
 * decides is reported (its access log, followed).
 */

/** Labels a proxy container and a class network; their class label is `egress-<class>`. */
export const LABEL_EGRESS = 'hintbox.egress';
const READY = /Accepting HTTP Socket connections/;
/** Host folders of egress proxy sockets are named so: a sweep finds those of killed runs. */
export const EGRESS_DIR_PREFIX = 'hintbox-eg-';
/** Squid's user in Debian's package (the image's USER proxy), who runs the proxy container. */
export const PROXY_UID = 13;

/** Builds (or keeps) the proxy's image: Debian's Squid on the server suite's base. */
export function ensureEgressProxyImage(builder: ImageBuilder): Promise<void> {
  return builder.buildOn(SERVER_SUITE, EGRESS_PROXY_IMAGE, path.join(IMAGES_DIR, 'egress-proxy'));
}

export interface EgressOptions {
  docker: Docker;
  session: SessionIdentity;
  server: string;
  sandboxId: string;
  hosts: readonly string[];
  /** The engine networks the proxy reaches out on (HINTBOX_EGRESS_NETWORK; default `bridge`). */
  outbound: readonly string[];
  /** The DNS servers the proxy resolves listed names with (HINTBOX_EGRESS_DNS); empty: the engine's. */
  dns: readonly string[];
  log: Logger;
  /** Host path of the gate binary (the proxy container's first process, its relay). */
  gateBinary: string;
  /** The group of the class's sandboxes: the only one (besides the proxy) that may reach the socket's folder. */
  sandboxGid: number;
  /** Where the socket folder is made (default: see makeSocketFolder). */
  baseDir?: string;
  /** Each request the proxy allowed or denied. */
  onRequest: (request: EgressRequest) => void;
  /** The proxy's log ended while it was in use (it died, or the engine dropped the stream): it was removed. */
  onLost?: () => void;
  /** Whether its session is being removed (then a proxy's end is expected, not lost). */
  closing?: () => boolean;
  /**
   * Which start of the class's egress this is (1 the first): a lost proxy's network may still
   * hold the class's running sandbox, so a new one takes another name.
   */
  generation?: number;
  startTimeoutMs: number;
}

export interface StartedEgress extends EgressAttachment {
  remove(): Promise<void>;
}

/** Makes the class's socket folder and starts its proxy; on failure nothing is left. */
export async function startEgress(options: EgressOptions): Promise<StartedEgress> {
  const { docker, session, server, sandboxId, log } = options;
  const labels = {
    [LABEL_SESSION]: session.sessionId,
    [LABEL_SERVER]: server,
    [LABEL_CLASS]: `egress-${sandboxId}`,
    [LABEL_EGRESS]: '1',
    [LABEL_OWNER_HOST]: session.ownerHost,
    [LABEL_OWNER_PID]: String(session.ownerPid),
  };
  const generation = options.generation ?? 1;
  const name = `${containerName(session, server, sandboxId)}-egress${generation > 1 ? `-${generation}` : ''}`;
  let hostDir: string | undefined;
  let proxy: Docker.Container | undefined;
  let state: 'starting' | 'up' | 'removed' = 'starting';
  const remove = async (): Promise<void> => {
    state = 'removed';
    if (proxy) await removeContainer(proxy);
    if (hostDir) await rm(hostDir, { recursive: true, force: true });
  };
  try {
    const outbound = await Promise.all(
      options.outbound.map((id) =>
        docker
          .getNetwork(id)
          .inspect()
          .then((info) => info as NetworkInfo & { Name: string })
          .catch((error: Error) => {
            throw new Error(`the egress network ${id} (HINTBOX_EGRESS_NETWORK): ${error.message}`);
          }),
      ),
    );
    const socketFile = egressSocketFile();
    hostDir = (await makeSocketFolder(EGRESS_DIR_PREFIX, socketFile, options.baseDir)).dir;
    await shareSocketFolder(hostDir, options.sandboxGid);
    const token = randomBytes(32).toString('hex');
    const config = squidConfig({
      hosts: parseEgressHosts(options.hosts),
      // Only the relay connects, from the proxy container's own loopback.
      clients: ['127.0.0.1/32'],
      hostAddresses: [...outbound.flatMap(gatewaysOf), ...hostAddresses()],
      listen: 'loopback',
    });
    // The proxy's image is hintbox's own, but its VOLUMEs are masked as a sandbox's are.
    const tmp = { '/tmp': 'rw,nosuid,nodev,noexec,size=16m' };
    const masks = volumeMasks({
      imageVolumes: imageVolumePaths((await docker.getImage(EGRESS_PROXY_IMAGE).inspect()).Config.Volumes),
      binds: [SANDBOX_GATE_PATH, SANDBOX_EGRESS_DIR],
      tmpfs: Object.keys(tmp),
      options: tmp['/tmp'],
      what: `the egress proxy of sandbox ${sandboxId}`,
    });
    const bind = (source: string, target: string, readOnly: boolean): Docker.MountSettings => ({
      Type: 'bind',
      Source: source,
      Target: target,
      ReadOnly: readOnly,
      BindOptions: { Propagation: 'rprivate' },
    });
    proxy = await docker.createContainer({
      name,
      Image: EGRESS_PROXY_IMAGE,
      // The gate listens on the socket, runs Squid (on loopback) and relays to it what proves itself.
      Entrypoint: [SANDBOX_GATE_PATH, '--egress-proxy', `${SANDBOX_EGRESS_DIR}/${socketFile}`, START_SQUID],
      Cmd: [],
      User: `${PROXY_UID}:${PROXY_UID}`,
      Env: [`HINTBOX_SQUID_CONF=${config}`, `${GATE_EGRESS_TOKEN_ENV}=${token}`, 'GLIBC_TUNABLES='],
      Labels: labels,
      AttachStdout: true,
      AttachStderr: true,
      Healthcheck: { Test: ['NONE'] },
      HostConfig: {
        NetworkMode: outbound[0]?.Name ?? 'bridge',
        // On engine networks of a user's own, Docker's resolver in the container asks these.
        ...(options.dns.length > 0 ? { Dns: [...options.dns] } : {}),
        Mounts: [bind(options.gateBinary, SANDBOX_GATE_PATH, true), bind(hostDir, SANDBOX_EGRESS_DIR, false)],
        ReadonlyRootfs: true,
        CapDrop: ['ALL'],
        CapAdd: [],
        SecurityOpt: ['no-new-privileges:true'],
        Privileged: false,
        Init: false,
        Tmpfs: { ...tmp, ...masks },
        PidsLimit: 64,
        Memory: 128 * 1024 ** 2,
        MemorySwap: 128 * 1024 ** 2,
        NanoCpus: 500_000_000,
        RestartPolicy: { Name: 'no' },
        LogConfig: { Type: 'json-file', Config: { 'max-size': '1m', 'max-file': '2' } },
      },
    });
    assertNoVolumes((await proxy.inspect()).Mounts, `the egress proxy of sandbox ${sandboxId}`);
    for (const extra of outbound.slice(1)) await docker.getNetwork(extra.Name).connect({ Container: proxy.id });
    // Fail closed: a proxy whose refusals hintbox can no longer see is not left to serve.
    const ready = followLog(proxy, options, log, () => {
      if (state !== 'up' || options.closing?.()) return;
      log.error(`the egress proxy of sandbox ${sandboxId} stopped reporting: removing it (no network until a new one)`);
      void remove().catch((error: Error) => log.warn(`could not remove the egress proxy ${name}: ${error.message}`));
      options.onLost?.();
    });
    await proxy.start();
    await ready;
    await lockSocketFolder(hostDir, options.sandboxGid);
    state = 'up';
    log.info(`egress proxy for ${sandboxId} up: ${options.hosts.join(', ')}`);
    return { hostDir, token, socketFile, remove };
  } catch (error) {
    await remove();
    throw new Error(`could not start the egress proxy of sandbox ${sandboxId}: ${(error as Error).message}`);
  }
}

/** The image's script that writes the configuration and runs Squid (images/egress-proxy/start-squid.sh). */
const START_SQUID = '/usr/local/bin/start-squid';

/**
 * Closes the socket's folder to everyone but the proxy and the class's sandboxes. As root: the
 * proxy's user owns it (it makes the socket there), the sandboxes' group may only pass through
 * (0710), others get EACCES. Otherwise hintbox cannot give the folder away: it is open for the
 * proxy to make its socket and for anyone to pass through (01733; no listing, nothing of
 * another's removed), and the token of each connection is what keeps others out of the proxy.
 */
async function shareSocketFolder(dir: string, sandboxGid: number): Promise<void> {
  if (process.getuid?.() === 0) {
    await chown(dir, PROXY_UID, sandboxGid);
    await chmod(dir, 0o710);
  } else {
    await chmod(dir, 0o1733);
  }
}

/**
 * Once the proxy listens (its gate binds the socket before it starts Squid, and Squid is up), its
 * folder needs no more writes: a bound listening socket accepts without any right on its folder.
 * As root the folder goes back to root (root:sandbox group, 0710), so that no process of the
 * proxy's uid on the host (13, "proxy" on Debian) can replace the socket; otherwise it is closed to
 * writes (0711), so that nobody can plant or replace a file there.
 */
async function lockSocketFolder(dir: string, sandboxGid: number): Promise<void> {
  if (process.getuid?.() === 0) {
    await chown(dir, 0, sandboxGid);
    await chmod(dir, 0o710);
  } else {
    await chmod(dir, 0o711);
  }
}

/**
 * Follows the proxy's output: its access log (stdout) becomes `onRequest` calls, its own log
 * (stderr) goes to the debug log. Resolves once Squid accepts connections; rejects when it ends first.
 */
function followLog(container: Docker.Container, options: EgressOptions, log: Logger, onEnd: () => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`Squid did not come up within ${options.startTimeoutMs} ms`)),
      options.startTimeoutMs,
    );
    const stderrTail: string[] = [];
    container.attach({ stream: true, stdout: true, stderr: true }, (error, stream) => {
      if (error || !stream) {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error('no output stream from the egress proxy'));
        return;
      }
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      options.docker.modem.demuxStream(stream, stdout, stderr);
      lines(stdout, (line) => {
        const request = parseSquidLogLine(line);
        if (request) options.onRequest(request);
      });
      lines(stderr, (line) => {
        log.debug(`squid: ${line}`);
        stderrTail.push(line);
        if (stderrTail.length > 10) stderrTail.shift();
        if (READY.test(line)) {
          clearTimeout(timer);
          resolve();
        }
      });
      stream.on('end', () => {
        clearTimeout(timer);
        reject(new Error(`Squid ended: ${stderrTail.join(' / ')}`));
        onEnd();
      });
    });
  });
}

function lines(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let buffered = '';
  stream.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    for (const part of parts) if (part.trim()) onLine(part.trim());
    if (buffered.length > 64 * 1024) buffered = '';
  });
}

interface NetworkInfo {
  IPAM?: { Config?: { Subnet?: string; Gateway?: string }[] };
}

/** The gateway of each subnet: as the engine says, else (a subnet given without one) the engine's choice, its first address. */
function gatewaysOf(network: NetworkInfo): string[] {
  return (network.IPAM?.Config ?? []).flatMap((c) => {
    if (c.Gateway) return [c.Gateway.replace(/\/\d+$/, '')];
    const v4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(c.Subnet ?? '');
    if (!v4) return [];
    const base = v4.slice(1, 5).reduce((n, octet) => n * 256 + Number(octet), 0);
    const first = (base & ~(2 ** (32 - Number(v4[5])) - 1)) + 1;
    return [[24, 16, 8, 0].map((shift) => (first >>> shift) & 255).join('.')];
  });
}

/** This machine's own addresses (the engine's host, when hintbox runs on it): never reachable by name. */
function hostAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flatMap((list) => list ?? [])
    .map((a) => a.address.replace(/%.*$/, ''));
}
