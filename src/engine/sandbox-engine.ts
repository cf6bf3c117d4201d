import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';
import type { SplitTransport } from '../mcp/split-transport.js';
import type { UpstreamEra } from '../protocol/upstream-era.js';
import type { SandboxGrant } from '../policy/plan-sandboxes.js';
import type { Profile } from '../profile/load-profile.js';
import { sandboxUser } from '../profile/profile-schema.js';
import type { Logger } from '../util/logger.js';
import { HintboxError } from '../util/hintbox-error.js';
import type { SessionIdentity } from '../util/session-identity.js';

/**
 * The sandbox engine port: what hintbox needs of whatever runs its sandboxes. The session, the
 * preview and the CLI use only this; the Docker engine (`engine/docker/`) is the only code that
 * knows Docker, the Kubernetes engine (`engine/kubernetes/`) the only code that knows a cluster.
 * Each honours the same contract (docs/engines.md), or says where it cannot:
 *
 * - every mount of the grant at its target, read-only where the grant says so — all the way
 *   down (or the engine says it cannot: `recursiveReadOnly`);
 * - a network only when the grant has one (`none`: no interface but loopback);
 * - the server runs as the spec's user (never root), without capabilities, without a way to
 *   gain privileges, on a read-only root with small private tmpfs at /tmp and its home, within
 *   the profile's limits (cpus, memory, pids);
 * - the server's stdio is hintbox's only channel to it, and **nothing of the image runs until
 *   `release`** (a held sandbox's server waits at hintbox's gate);
 * - `freeze` stops every process of the sandbox until `thaw` (the kernel's cgroup freezer where
 *   hintbox can write it, cgroup-freezer.ts; else the gate's stop, gate-control.ts, which serves
 *   any engine whose sandboxes start with the gate), or fails, and the sandbox is then removed
 *   rather than left running between calls;
 * - every sandbox is labelled with its session and owner, so that `sweepOrphans` finds those of
 *   a dead hintbox and `removeSession` a session's.
 */

export type { SessionIdentity };

/** One sandbox, engine-neutral: what it runs and what it is granted. */
export interface SandboxSpec {
  session: SessionIdentity;
  profile: Pick<Profile, 'name' | 'server' | 'env' | 'limits'> & Partial<Pick<Profile, 'mounts'>>;
  /** The class (`ro-offline`, …): names the sandbox and labels it. */
  sandboxId: string;
  grant: SandboxGrant;
  /** The server's program and arguments (`PreparedImage.command`). */
  command: readonly string[];
  /** The image's id as prepared at start: every sandbox of a session runs exactly it. */
  imageId?: string;
  /**
   * The user the sandbox runs as when the profile's `server.user` names none: the session's
   * (`defaultSandboxUser`: hintbox's own, or as root the owner of the read-write mounts). Root
   * here counts as none: 10001:10001.
   */
  defaultUser?: { uid: number; gid: number };
  /**
   * The sandbox's way to its database: the host folder of its socket relay (seen read-only at
   * SANDBOX_PG_SOCKET_DIR) and the PG* / DATABASE_URL variables of its own role.
   */
  database?: { socketDir: string; env: Record<string, string> };
  /** The nth start of this class in the session (a restart): it gets a name of its own. */
  generation?: number;
  /** A throwaway dry run of one call (the preview): told apart, and never any network. */
  preview?: boolean;
  /** What hintbox's MCP client declares to the server at `initialize` (sampling, elicitation, roots). Default none. */
  clientCapabilities?: ClientCapabilities;
  /** With `network: egress`: told of each request its egress proxy allowed or denied. */
  onEgress?: (request: EgressRequest) => void;
}

/** A request a sandbox made through its egress proxy, and what the proxy decided. */
export interface EgressRequest {
  allowed: boolean;
  /** `CONNECT` (a tunnel, e.g. HTTPS), `GET`, … */
  method: string;
  /** As the sandbox named it: a host name or an address. */
  host: string;
  port: number;
  /** When the proxy took the request and when it was done with it (ms since the epoch), if it says. */
  startedAt?: number;
  endedAt?: number;
}

/** A sandbox whose server runs, with an initialized MCP client on its stdio. */
export interface StartedSandbox extends AsyncDisposable {
  readonly id: string;
  /** The engine's id of it (a container id). */
  readonly containerId: string;
  /** The server's era, found at its start (`server/discover` answered with 2026-07-28: `2026`). */
  readonly era?: UpstreamEra;
  readonly client: Client;
  /** The same connection, for hintbox's relay: forwarded calls skip the SDK client. */
  readonly forwarded: SplitTransport;
  /** Resolves when the server's stdio closes (it died or was removed). */
  readonly closed: Promise<void>;
  /** The last lines the server wrote to stderr. */
  stderrTail(): string;
  /** Removes the sandbox (idempotent). */
  remove(): Promise<void>;
  /**
   * Freezes every process of the sandbox. `cancel`: a freezer that can undoes a freeze still
   * under way when it aborts, and resolves to `'cancelled'` (the cgroup freezer; the gate cannot).
   */
  freeze(cancel?: AbortSignal): Promise<void | 'cancelled'>;
  /** Lets the frozen processes run again. */
  thaw(): Promise<void>;
  /**
   * Resolves, with why, if its gate killed it because it ran while frozen (woken by a signal
   * not from hintbox); never otherwise.
   */
  readonly woken?: Promise<string>;
}

/** A sandbox that is up, whose server waits at hintbox's gate: nothing of the image has run. */
export interface HeldSandbox {
  readonly id: string;
  readonly containerId: string;
  /** Lets the server run and makes the MCP handshake; on failure the sandbox is removed. */
  release(): Promise<StartedSandbox>;
  /** Removes the sandbox; its server never ran (idempotent). */
  remove(): Promise<void>;
}

export interface HoldOptions {
  log: Logger;
  /** Milliseconds to wait for the sandbox to come up, and again for the server's `initialize` answer. */
  startTimeoutMs: number;
}

/** The server's image, ready to run. */
export interface PreparedImage {
  /** Its content id: sandboxes are created from it, so a tag moved meanwhile changes nothing. */
  id: string;
  /** What a sandbox runs: the profile's command, else the image's (see `serverCommand`). */
  command: string[];
}

/** A sandbox as listed by the engine (for the demo and for people). */
export interface SandboxInfo {
  /** The class (`ro-offline`, …). */
  sandboxClass: string;
  network: string;
  mounts: { target: string; readOnly: boolean }[];
  user: string;
  capabilitiesDropped: string[];
}

export interface SandboxEngine {
  /** Where the engine is, for messages: `Docker at unix:///var/run/docker.sock, API 1.41`. */
  readonly description: string;
  /**
   * Read-only mounts stay read-only below nested mount points. When false, sessions refuse
   * read-only sources that have mount points below them.
   */
  readonly recursiveReadOnly: boolean;
  /** Builds the profile's image if needed (`rebuild`: even when it looks current) and resolves what it runs. */
  prepareImage(
    profile: Pick<Profile, 'server' | 'file'> & Partial<Pick<Profile, 'network'>>,
    options?: { rebuild?: boolean },
  ): Promise<PreparedImage>;
  /** Creates and starts a sandbox whose server is held at the gate; on failure nothing is left. */
  hold(spec: SandboxSpec, options: HoldOptions): Promise<HeldSandbox>;
  /** Removes every sandbox of a session (and what serves them: egress proxies, their networks); returns how many there were. */
  removeSession(sessionId: string): Promise<number>;
  /**
   * At the process's end, after its sessions were removed: removes what the engine kept for all
   * of them (the open sandboxes' network, with any sandbox still on it). Later sandboxes that
   * would need it are refused. Idempotent.
   */
  close(): Promise<void>;
  /** Removes the sandboxes of sessions whose hintbox process is gone (on this host); returns their ids. */
  sweepOrphans(log: Logger): Promise<string[]>;
  /** The sandboxes a hintbox process owns, running or not. */
  sandboxesOf(ownerPid: number): Promise<SandboxInfo[]>;
  /**
   * Before anything starts: checks that the engine will find each host path hintbox binds into
   * sandboxes where hintbox sees it (hintbox in a container of the engine it drives: the same
   * path mounted at the same place), and throws a UsageError naming each it would not.
   */
  checkBindSources(sources: readonly BindSource[]): Promise<void>;
}

/** A host path hintbox binds into sandboxes, and what it is (for messages). */
export interface BindSource {
  path: string;
  /** "hintbox's state folder", "liar's mount /data", … */
  what: string;
}

export class SandboxStartError extends HintboxError {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxStartError';
  }
}

/** The numeric uid and gid a sandbox of this profile runs as (never 0). */
export function sandboxUserIds(
  profile: Pick<Profile, 'server'>,
  defaultUser?: { uid: number; gid: number },
): { uid: number; gid: number } {
  const user = sandboxUser(profile.server.user, defaultUser?.uid, defaultUser?.gid);
  const [uid, gid = uid] = user.split(':') as [string, string?];
  return { uid: Number(uid), gid: Number(gid) };
}
