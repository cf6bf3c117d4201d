import type { AuditLog } from '../audit/audit-record.js';
import type { HintboxConsole } from '../console/console-server.js';
import type { SandboxEngine } from '../engine/sandbox-engine.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import type { Gateway } from '../gateway/gateway.js';
import type { HintboxSession } from '../session/hintbox-session.js';
import type { GatewaySettings } from '../session/session-options.js';
import { knownTools, openSession, opensCold } from '../session/session-setup.js';
import { ConcurrencyLimit } from '../util/concurrency-limit.js';
import type { Logger } from '../util/logger.js';
import { newSessionId } from '../util/session-identity.js';
import type { Access } from './authenticator.js';
import type { ClientSession } from './mcp-http-server.js';
import { COMBINED, combinedSession, membersOf } from './combined-endpoint.js';
import type { ServedProfile } from './profile-folder.js';
import { readinessOf, type ServerState } from './server-readiness.js';
import { discoverOnce, verifiedState } from './lock-verification.js';

/**
 * The servers of `hintbox serve` and their clients' sessions. A server whose profile says
 * `clients: shared` (the default) runs one hintbox session — one set of sandboxes, one trust,
 * one database role per sandbox — from the start of serve until it stops, and each client gets
 * a gateway over it (its own guard, caller and confirmations). With `clients: separate` each
 * client gets a session of its own, removed when it leaves, as `hintbox run` would start one.
 */

/** What a reload changed, by server name. */
export interface Reloaded {
  added: string[];
  changed: string[];
  removed: string[];
  unchanged: string[];
}

export interface ServedServersOptions {
  served: ReadonlyMap<string, ServedProfile>;
  engine: SandboxEngine;
  /** The audit log (serve's, metered). */
  audit: Required<AuditLog>;
  log: Logger;
  /** hintbox's console (`serve --console`): every gateway's confirmations, every session's definitions. */
  console?: HintboxConsole;
}

export class ServedServers {
  /** How each session's definitions leave the console when it is removed. */
  private readonly offConsole = new Map<HintboxSession, () => void>();
  private readonly states = new Map<string, ServerState>();
  /** The running sessions of shared servers (a failed one is opened again by the next client). */
  private readonly shared = new Map<string, Promise<HintboxSession>>();
  /** Every session opened (shared or a client's), so that closing serve removes each. */
  private readonly sessions = new Set<HintboxSession>();
  /** Removals under way (a client that left): `close` waits for them, so nothing outlives serve. */
  private readonly removing = new Set<Promise<void>>();
  private closed = false;
  /** Aborted by `close`: a separate server's verification at start stops (and removes what it made). */
  private readonly stopping = new AbortController();
  /** Separate servers' verifications at start under way: `close` waits for them. */
  private readonly verifications = new Set<Promise<void>>();
  /**
   * Servers prepared at once at start and reload: a few per core, so that each start (a server
   * booting in its sandbox) ends within its timeout however many servers the folder has.
   */
  private readonly starts = new ConcurrencyLimit(Math.max(4, 2 * availableParallelism()));
  /** The servers served now (a reload replaces them). */
  private served: Map<string, ServedProfile>;
  /** Each server's profile and lock file as they were when it was (re)loaded. */
  private readonly fingerprints = new Map<string, string>();

  constructor(private readonly options: ServedServersOptions) {
    this.served = new Map(options.served);
    for (const [name, entry] of this.served) {
      this.states.set(name, 'starting');
      this.fingerprints.set(name, fingerprintOf(entry));
    }
  }

  /** The names of the servers served now. */
  get names(): string[] {
    return [...this.served.keys()];
  }

  /**
   * Prepares every server in the background, a few at a time: a shared one's session and
   * sandboxes, a separate one's image. A server with approved tools in its lock file is served
   * from it at once (`serving-from-lock`) and verified in its turn (a separate one by a session
   * of its own, removed after); one without is discovered and its sandboxes started (a separate
   * one: its image built) before it is ready.
   */
  start(names: readonly string[] = this.names): void {
    for (const name of names) {
      const entry = this.entry(name);
      const { profile } = entry;
      const current = (): boolean => this.served.get(name)?.profile === profile;
      const cold = opensCold({ locked: entry.approvals.locked });
      let ready: Promise<unknown>;
      if (profile.clients === 'separate' && cold) {
        // Each client's session starts cold from the lock file itself: it waits for no build.
        this.states.set(name, 'serving-from-lock');
        ready = this.starts.run(() => this.verifySeparate(entry));
      } else if (profile.clients === 'separate') {
        ready = this.starts.run(() => this.options.engine.prepareImage(profile));
        ready.then(() => current() && this.states.set(name, 'ready')).catch(() => undefined);
      } else if (cold) {
        // Served from the lock file once opened (`sharedSession` keeps its state); verified in turn.
        ready = this.sharedSession(name).then((session) => this.starts.run(async () => session.verify()));
      } else ready = this.starts.run(() => this.sharedSession(name));
      ready.catch((error: Error) => {
        // A verification that failed is logged and marked by `sharedSession` already.
        if (!current() || this.closed || this.states.get(name) === 'failed') return;
        this.states.set(name, 'failed');
        this.options.log.error(`serve: ${name}: not ready: ${error.message}`);
      });
    }
  }

  /** Whether a server of a folder loaded again is served otherwise than now (its profile or lock file changed). */
  changedIn(next: ReadonlyMap<string, ServedProfile>, name: string): boolean {
    const entry = next.get(name);
    return entry !== undefined && this.fingerprints.get(name) !== fingerprintOf(entry);
  }

  /**
   * Serves a folder loaded again (SIGHUP): a server whose profile or lock file changed, or that
   * is gone, has its shared session removed (its clients' gateways with it; the caller ends
   * their HTTP sessions); a new or changed one is started as at serve's start.
   */
  async reload(next: ReadonlyMap<string, ServedProfile>): Promise<Reloaded> {
    const reloaded: Reloaded = { added: [], changed: [], removed: [], unchanged: [] };
    for (const name of this.served.keys()) if (!next.has(name)) reloaded.removed.push(name);
    const nextPrints = new Map([...next].map(([name, entry]) => [name, fingerprintOf(entry)]));
    for (const name of next.keys()) {
      if (!this.served.has(name)) reloaded.added.push(name);
      else if (this.changedIn(next, name)) reloaded.changed.push(name);
      else reloaded.unchanged.push(name);
    }
    const retired = [...reloaded.removed, ...reloaded.changed];
    // Taken out at once: a client that comes meanwhile gets the new session, not the retired one.
    const sessions = retired.map((name) => this.shared.get(name));
    for (const name of retired) {
      this.shared.delete(name);
      this.states.delete(name);
    }
    for (const name of [...reloaded.added, ...reloaded.changed]) {
      this.served.set(name, next.get(name) as ServedProfile);
      this.fingerprints.set(name, nextPrints.get(name) as string);
      this.states.set(name, 'starting');
    }
    for (const name of reloaded.removed) {
      this.served.delete(name);
      this.fingerprints.delete(name);
    }
    const removals = sessions.flatMap((opening) => (opening ? [opening.then((session) => this.remove(session))] : []));
    await Promise.allSettled(removals);
    this.start([...reloaded.added, ...reloaded.changed]);
    return reloaded;
  }

  /** Whether every server is ready (/readyz; `verified`: every one verified), and each one's state. */
  ready(verified = false): ReturnType<typeof readinessOf> {
    return readinessOf(this.states, { verified });
  }

  /**
   * A new client of a server: a gateway over the shared session, or a session of its own. What
   * its credentials earned (`access`) is its gateway's: the caller it records, and the tags of
   * the only tools it serves (as `hintbox run --tags`).
   */
  async openClient(name: string, access: Access | null): Promise<ClientSession> {
    if (name === COMBINED) return this.combinedClient(access);
    const entry = this.entry(name);
    if (entry.profile.clients === 'separate') return this.separateClient(entry, access);
    const opening = this.sharedSession(name);
    const session = await opening;
    // A client does not wait for the server's turn: its verification begins now if it has not.
    void session.verify()?.catch(() => undefined);
    const gateway = await session.createGateway(this.gatewaySettings(entry, access));
    const client = clientOf(
      gateway,
      () => session.closeGateway(gateway),
      'closing its gateway; the shared sandboxes stay up for the next client',
    );
    // Reloaded meanwhile (SIGHUP): this session is retired; the client connects again.
    if (this.shared.get(name) !== opening) {
      await client.close();
      throw new Error(`${name} was reloaded while the session opened: connect again`);
    }
    return client;
  }

  /**
   * A client of `/mcp` (`--one-endpoint`): a session of each server its credentials allow, as
   * at `/mcp/<server>`, behind one. A server that cannot open one now is left out (logged).
   */
  private async combinedClient(access: Access | null): Promise<ClientSession> {
    const members = [...membersOf(access, this.names)];
    const opened = await Promise.allSettled(members.map(([name, memberAccess]) => this.openClient(name, memberAccess)));
    const sessions = new Map<string, ClientSession>();
    opened.forEach((result, i) => {
      const name = members[i]?.[0] as string;
      if (result.status === 'fulfilled') sessions.set(name, result.value);
      else this.options.log.warn(`serve: one endpoint: ${name} left out: ${(result.reason as Error).message}`);
    });
    if (sessions.size === 0) throw new Error('no server could open a session');
    return combinedSession(sessions, this.options.log);
  }

  private gatewaySettings(entry: ServedProfile, access: Access | null): GatewaySettings {
    return {
      approvals: entry.approvals.read,
      audit: this.options.audit,
      caller: access?.caller ?? null,
      ...(access?.tags ? { tagFilter: access.tags } : {}),
      ...(this.options.console ? { console: this.options.console.approvals } : {}),
    };
  }

  /** Removes every session that is left (after the clients' gateways closed). */
  async close(): Promise<void> {
    this.closed = true;
    this.stopping.abort();
    await Promise.allSettled([...this.verifications]);
    await Promise.allSettled([...this.shared.values()]);
    await Promise.allSettled([...this.sessions].map((session) => this.remove(session)));
    // Those whose clients left before: their removal may still be under way.
    await Promise.allSettled([...this.removing]);
  }

  private entry(name: string): ServedProfile {
    const entry = this.served.get(name);
    if (!entry) throw new Error(`no server ${name}`);
    return entry;
  }

  /**
   * A shared server's session, opened on first use. Its state follows it: a cold start's is
   * `serving-from-lock` until verified (`ready`, or `differs-from-lock`), a discovered one's
   * `ready`; one whose verification fails is `failed`, logged and removed (the next client opens
   * another). A cold start's verification begins when `start` or a client asks (`verify`).
   */
  private sharedSession(name: string): Promise<HintboxSession> {
    let opening = this.shared.get(name);
    if (opening) return opening;
    const current = (): boolean => this.shared.get(name) === opening;
    opening = this.open(this.entry(name), true).then((session) => {
      if (!session.verified) {
        if (current()) this.states.set(name, 'ready');
        return session;
      }
      if (current() && this.states.get(name) === 'starting') this.states.set(name, 'serving-from-lock');
      session.verified.then(
        () => current() && this.verified(this.entry(name), session.tools),
        (error: Error) => {
          if (!current() || this.closed) return; // retired (reload) or stopping: removed by them
          this.verified(this.entry(name), error); // logged, `failed`; its clients' sessions end
          this.shared.delete(name);
          // The calls that waited are answered (their refusal is queued) before the gateways close.
          setImmediate(() => void this.remove(session));
        },
      );
      return session;
    });
    this.shared.set(name, opening);
    opening.catch(() => {
      if (current()) this.shared.delete(name);
    });
    return opening;
  }

  /**
   * A verification's outcome as the server's state (`verifiedState`), or `failed` (logged),
   * unless the server was reloaded or serve stops meanwhile.
   */
  private verified(entry: ServedProfile, outcome: readonly Tool[] | Error): void {
    const { name, file } = entry.profile;
    const { log } = this.options;
    if (this.served.get(name) !== entry || this.closed) return;
    if (!Array.isArray(outcome)) {
      log.error(`serve: ${name}: the server could not be verified: ${(outcome as Error).message}`);
      this.states.set(name, 'failed');
    } else
      this.states.set(
        name,
        verifiedState({ name, tools: outcome, lock: entry.approvals.read, profileFile: file, log }),
      );
  }

  /**
   * A separate server with approved tools, verified once at start in its turn (`discoverOnce`:
   * removed after): its state. Each client's session is verified again (`separateClient`), for
   * that session only.
   */
  private async verifySeparate(entry: ServedProfile): Promise<void> {
    const { engine, log, audit } = this.options;
    const { signal } = this.stopping;
    const verifying = discoverOnce({
      profile: entry.profile,
      engine,
      log,
      audit,
      knownTools: knownTools(),
      signal,
    }).then((outcome) => this.verified(entry, outcome));
    this.verifications.add(verifying);
    await verifying.finally(() => this.verifications.delete(verifying));
  }

  /** A client's own session (`clients: separate`), removed when it leaves. */
  private async separateClient(entry: ServedProfile, access: Access | null): Promise<ClientSession> {
    const session = await this.open(entry);
    try {
      // Reloaded meanwhile (SIGHUP): not with the profile of before.
      if (this.served.get(entry.profile.name) !== entry) {
        throw new Error(`${entry.profile.name} was reloaded while the session opened: connect again`);
      }
      const gateway = await session.createGateway(this.gatewaySettings(entry, access));
      const client = clientOf(gateway, () => this.remove(session), 'removing its sandboxes');
      // A client's session is verified too (a change of its tools is refused call by call, and
      // audited), without changing the server's state: only its start (or a reload) sets that, as
      // for a shared one, so that no server can take the process out of service at will later.
      // One that fails is logged and ends that client's session (unless the client left).
      session.verified?.catch((error: Error) => {
        if (!this.sessions.has(session)) return;
        this.options.log.error(
          `serve: ${entry.profile.name}: a client's session could not be verified: ${error.message}`,
        );
        void client.close();
      });
      return client;
    } catch (error) {
      await this.remove(session);
      throw error;
    }
  }

  /** A session of a server, cold from its lock file (`deferred`: verified when asked) or discovered; removed on failure. */
  private async open(entry: ServedProfile, deferred = false): Promise<HintboxSession> {
    if (this.closed) throw new Error('hintbox is stopping');
    const { engine, log, audit } = this.options;
    // A start that fails removes what it made (the session's one teardown) before it rejects.
    const session = await openSession({
      profile: entry.profile,
      engine,
      log,
      sessionId: newSessionId(),
      audit,
      knownTools: knownTools(),
      locked: entry.approvals.read(),
      deferVerification: deferred,
    });
    this.sessions.add(session);
    const off = this.options.console?.addDefinitions(session.definitionSource());
    if (off) this.offConsole.set(session, off);
    if (!this.closed) return session;
    await this.remove(session);
    throw new Error('hintbox is stopping');
  }

  /** Removes a session by its one teardown: its gateways, sandboxes, database roles, and any container of its id. */
  private async remove(session: HintboxSession): Promise<void> {
    this.sessions.delete(session);
    this.offConsole.get(session)?.();
    this.offConsole.delete(session);
    const removing = (async () => {
      await session.dispose().catch((error: Error) => this.options.log.error(`serve: ${error.message}`));
    })();
    this.removing.add(removing);
    await removing.finally(() => this.removing.delete(removing));
  }
}

/** A client's side of a gateway: served on its transport, closed once (however many ask). */
function clientOf(gateway: Gateway, close: () => Promise<void>, ending: string): ClientSession {
  let closing: Promise<void> | undefined;
  return {
    ending,
    close: () => (closing ??= close()),
    connect: async (transport, onClosed) => {
      await gateway.connect(transport);
      gateway.server.onclose = onClosed;
    },
  };
}

/** What a server is served as: its profile (as loaded, variables expanded) and its lock file's text. */
function fingerprintOf(entry: ServedProfile): string {
  let lock = '';
  try {
    lock = readFileSync(entry.approvals.file, 'utf8');
  } catch {
    // No lock file: nothing approved.
  }
  return createHash('sha256').update(JSON.stringify(entry.profile)).update('\0').update(lock).digest('hex');
}
