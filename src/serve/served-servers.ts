import type { AuditLogWriter } from '../audit/audit-log-writer.js';
import type { SandboxEngine } from '../engine/sandbox-engine.js';
import type { Gateway } from '../gateway/gateway.js';
import type { HintboxSession } from '../session/hintbox-session.js';
import { knownTools, openSession } from '../session/session-setup.js';
import type { Logger } from '../util/logger.js';
import { newSessionId } from '../util/session-identity.js';
import type { ClientSession } from './mcp-http-server.js';
import type { ServedProfile } from './profile-folder.js';

/**
 * The servers of `hintbox serve` and their clients' sessions. A server whose profile says
 * `clients: shared` (the default) runs one hintbox session — one set of sandboxes, one trust,
 * one database role per sandbox — from the start of serve until it stops, and each client gets
 * a gateway over it (its own guard, caller and confirmations). With `clients: separate` each
 * client gets a session of its own, removed when it leaves, as `hintbox run` would start one.
 */

export type ServerState = 'starting' | 'ready' | 'failed';

export interface ServedServersOptions {
  served: ReadonlyMap<string, ServedProfile>;
  engine: SandboxEngine;
  audit: AuditLogWriter;
  log: Logger;
}

export class ServedServers {
  private readonly states = new Map<string, ServerState>();
  /** The running sessions of shared servers (a failed one is opened again by the next client). */
  private readonly shared = new Map<string, Promise<HintboxSession>>();
  /** Every session opened (shared or a client's), so that closing serve removes each. */
  private readonly sessions = new Set<HintboxSession>();
  private closed = false;

  constructor(private readonly options: ServedServersOptions) {
    for (const name of options.served.keys()) this.states.set(name, 'starting');
  }

  /** Prepares every server in the background: a shared one's session and sandboxes, a separate one's image. */
  start(): void {
    for (const [name, { profile }] of this.options.served) {
      const ready =
        profile.clients === 'shared'
          ? this.sharedSession(name).then((session) => session.verified)
          : this.options.engine.prepareImage(profile.server);
      ready.then(
        () => this.states.set(name, 'ready'),
        (error: Error) => {
          this.states.set(name, 'failed');
          this.options.log.error(`serve: ${name}: not ready: ${error.message}`);
        },
      );
    }
  }

  /** Whether every server is ready (/readyz), and each one's state. */
  ready(): { ready: boolean; servers: Record<string, ServerState> } {
    return { ready: [...this.states.values()].every((s) => s === 'ready'), servers: Object.fromEntries(this.states) };
  }

  /** A new client of a server: a gateway over the shared session, or a session of its own. */
  async openClient(name: string, caller: string | null): Promise<ClientSession> {
    const entry = this.entry(name);
    if (entry.profile.clients === 'separate') return this.separateClient(entry, caller);
    const session = await this.sharedSession(name);
    const gateway = await session.createGateway({ approvals: entry.approvals.read, audit: this.options.audit, caller });
    return clientOf(gateway, () => session.closeGateway(gateway));
  }

  /** Removes every session that is left (after the clients' gateways closed). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.shared.values()]);
    await Promise.allSettled([...this.sessions].map((session) => this.remove(session)));
  }

  private entry(name: string): ServedProfile {
    const entry = this.options.served.get(name);
    if (!entry) throw new Error(`no server ${name}`);
    return entry;
  }

  /** A shared server's session, opened on first use; one whose verification fails is removed. */
  private sharedSession(name: string): Promise<HintboxSession> {
    let opening = this.shared.get(name);
    if (opening) return opening;
    const { log } = this.options;
    opening = this.open(this.entry(name)).then((session) => {
      session.verified?.catch((error: Error) => {
        log.error(`serve: ${name}: the server could not be verified: ${error.message}; its clients' sessions end`);
        this.states.set(name, 'failed');
        if (this.shared.get(name) === opening) this.shared.delete(name);
        void this.remove(session);
      });
      return session;
    });
    this.shared.set(name, opening);
    opening.catch(() => {
      if (this.shared.get(name) === opening) this.shared.delete(name);
    });
    return opening;
  }

  /** A client's own session (`clients: separate`), removed when it leaves. */
  private async separateClient(entry: ServedProfile, caller: string | null): Promise<ClientSession> {
    const session = await this.open(entry);
    try {
      const gateway = await session.createGateway({
        approvals: entry.approvals.read,
        audit: this.options.audit,
        caller,
      });
      const client = clientOf(gateway, () => this.remove(session));
      // A cold start whose server cannot be verified: that client's session ends.
      session.verified?.catch((error: Error) => {
        this.options.log.error(`serve: ${entry.profile.name}: the server could not be verified: ${error.message}`);
        void client.close();
      });
      return client;
    } catch (error) {
      await this.remove(session);
      throw error;
    }
  }

  /** A session of a server, cold from its lock file or discovered; removed on failure. */
  private async open(entry: ServedProfile): Promise<HintboxSession> {
    if (this.closed) throw new Error('hintbox is stopping');
    const { engine, log, audit } = this.options;
    const sessionId = newSessionId();
    try {
      const session = await openSession({
        profile: entry.profile,
        engine,
        log,
        sessionId,
        audit,
        knownTools: knownTools(),
        locked: entry.approvals.read(),
      });
      this.sessions.add(session);
      if (!this.closed) return session;
      await this.remove(session);
      throw new Error('hintbox is stopping');
    } catch (error) {
      await engine.removeSession(sessionId).catch(() => undefined);
      throw error;
    }
  }

  /** Removes a session: its gateways, sandboxes, database roles, and any container of its id. */
  private async remove(session: HintboxSession): Promise<void> {
    this.sessions.delete(session);
    await session.dispose().catch((error: Error) => this.options.log.error(`serve: ${error.message}`));
    await this.options.engine.removeSession(session.sessionId).catch(() => undefined);
  }
}

/** A client's side of a gateway: served on its transport, closed once (however many ask). */
function clientOf(gateway: Gateway, close: () => Promise<void>): ClientSession {
  let closing: Promise<void> | undefined;
  return {
    close: () => (closing ??= close()),
    connect: async (transport, onClosed) => {
      await gateway.connect(transport);
      gateway.server.onclose = onClosed;
    },
  };
}
