import { monotonicMs } from '../util/clock.js';
import os from 'node:os';
import type { SessionIdentity } from '../util/session-identity.js';
import { makeIsOwnerAlive, type IsOwnerAlive } from '../util/process-alive.js';
import type { Logger } from '../util/logger.js';
import type { DatabasePrivilege, DatabaseSection } from '../profile/database-profile-schema.js';
import { adminEndpoint } from './admin-url.js';
import { DatabaseNotPreparedError } from './grant-checks.js';
import { RoleProvisioner, type CreatedRole } from './role-provisioner.js';
import { DEFAULT_CALL_TIMEOUT_MS, sessionBounds } from './role-grants.js';
import { startSocketRelay } from './pg-socket-relay.js';
import { sessionsToEnd } from './call-end-sessions.js';
import { sandboxDatabaseEnv, type PrivilegeViolation, type SocketRelay } from './socket-relay.js';
import { isoTime } from '../util/iso-time.js';

/**
 * The database side of one hintbox session: the admin connection, one role and one socket
 * relay per sandbox class, their renewal in long sessions, and their teardown. Opening it
 * sweeps the roles of dead sessions and refuses a database whose grants would undo the roles'
 * limits, before any container starts.
 */

/** How long a call's end waits for a statement still running or a transaction still open to finish before it judges the sessions. */
const CALL_END_SETTLE_MS = 1000;

export interface SessionDatabaseOptions {
  /** The admin URL (from the variable the profile names); never logged. */
  adminUrl: string;
  section: DatabaseSection;
  identity: SessionIdentity;
  log: Logger;
  /** Postgres refused something a sandbox's session tried (42501, 25006). */
  onViolation: (sandboxId: string, role: string, violation: PrivilegeViolation) => void;
  /** Injected for tests. */
  isOwnerAlive?: IsOwnerAlive;
  /** Parent of the relays' socket directories (default: the OS temp dir). */
  socketBaseDir?: string;
  /**
   * How long a tool call may take (the profile's `timeouts.call`): the roles' statement and
   * idle bounds follow from it (see sessionBounds). Default 600 000 ms, the profile's default.
   */
  callTimeoutMs?: number;
}

/** What a sandbox's container needs to reach its database. */
export interface SandboxDatabaseAccess {
  socketDir: string;
  env: Record<string, string>;
}

interface SandboxSlot {
  role: CreatedRole;
  relay: SocketRelay;
}

export class SessionDatabase {
  private readonly sandboxes = new Map<string, Promise<SandboxSlot>>();
  private renewTimer?: NodeJS.Timeout;
  private closed = false;
  /** The provisioner has one admin connection: its transactions must not interleave. */
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly provisioner: RoleProvisioner,
    private readonly options: SessionDatabaseOptions,
  ) {}

  /**
   * Connects as the admin (a failure names host, port and reason), drops the roles of sessions
   * no longer running, and checks the database: problems of severity `refuse` stop here, each
   * named; `warn` ones are logged.
   */
  static async open(options: SessionDatabaseOptions): Promise<SessionDatabase> {
    const { section, log } = options;
    const provisioner = await RoleProvisioner.connect({
      adminUrl: options.adminUrl,
      section,
      log,
      callTimeoutMs: options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS,
    });
    try {
      await provisioner.sweepRoles(options.isOwnerAlive ?? makeIsOwnerAlive(os.hostname()));
      const problems = await provisioner.checkDatabase();
      for (const p of problems.filter((p) => p.severity === 'warn')) log.warn(`database: ${p.message}`);
      const refusing = problems.filter((p) => p.severity === 'refuse');
      if (refusing.length > 0) throw new DatabaseNotPreparedError(section.database, refusing);
    } catch (error) {
      await provisioner.close();
      throw error;
    }
    const db = new SessionDatabase(provisioner, options);
    db.armRenewal();
    return db;
  }

  /**
   * The role and relay of a sandbox class: made on its first start, reused by its restarts.
   * `sandboxUser` is the uid:gid the container runs as (the relay's socket is given to it).
   */
  access(
    sandboxId: string,
    privilege: DatabasePrivilege,
    sandboxUser: { uid: number; gid: number },
  ): Promise<SandboxDatabaseAccess> {
    if (this.closed) return Promise.reject(new Error('the session database is closed'));
    let slot = this.sandboxes.get(sandboxId);
    if (!slot) {
      slot = this.provision(sandboxId, privilege, sandboxUser);
      this.sandboxes.set(sandboxId, slot);
      // A failed start may be tried again on the next call.
      slot.catch(() => this.sandboxes.delete(sandboxId));
    }
    return slot.then(({ role, relay }) => ({
      socketDir: relay.dir,
      env: sandboxDatabaseEnv({ user: role.name, password: role.password, database: role.database }),
    }));
  }

  /** The role name of a sandbox (for messages), when it has one. */
  async roleOf(sandboxId: string): Promise<string | undefined> {
    return (await this.sandboxes.get(sandboxId)?.catch(() => undefined))?.role.name;
  }

  /**
   * Ends those of a sandbox's database sessions that could still act once its call is over,
   * and resolves once Postgres has ended their backends: every session running a statement, in
   * a transaction, holding a lock (table or advisory), or that may listen (see
   * call-end-sessions.ts). A clean idle connection of the server's pool stays, to be judged
   * again at the next call's end. For the end of a sandbox's last call in flight (a held
   * sandbox is frozen first, so nothing changes meanwhile), and for a call past its deadline.
   * A statement running or a transaction open is given a moment to finish first: a pool's
   * ROLLBACK, sent as the call answered, may reach hintbox after the answer. Returns how many sessions were ended; throws when a backend is still there after 10 s.
   */
  async endCallSessions(sandboxId: string): Promise<number> {
    const slot = await this.sandboxes.get(sandboxId)?.catch(() => undefined);
    if (!slot) return 0;
    // What the call left running or open as it answered (a pool's ROLLBACK, sent with the
    // answer, can reach the relay after it) is given a moment to finish, and judged again while
    // only running statements would end. hintbox's own requests to the sandbox (listings) are
    // not among them: they count as calls in flight (SandboxPool.serving), so none runs now.
    const until = monotonicMs() + CALL_END_SETTLE_MS;
    let end: ReturnType<typeof sessionsToEnd>;
    for (;;) {
      await slot.relay.settled(Math.max(0, until - monotonicMs()));
      const backends = await this.serial(() => this.provisioner.sessionStates(slot.role.name));
      end = sessionsToEnd(slot.relay.openSessions(), backends);
      if (!end.onlyRunning || monotonicMs() >= until) break;
    }
    const cut = await slot.relay.cutSessions(end.cut);
    await this.serial(() => this.provisioner.endSessions(slot.role.name, end.terminate));
    for (const reason of end.reasons) this.options.log.debug(`sandbox ${sandboxId}: ended database ${reason}`);
    return Math.max(cut, end.terminate.length);
  }

  /**
   * After the containers are gone: every relay closed, every role dropped (sessions terminated,
   * what it owns dropped), the admin connection closed. Failures are logged, never thrown.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.renewTimer) clearInterval(this.renewTimer);
    const { log } = this.options;
    const slots = await Promise.all([...this.sandboxes.values()].map((s) => s.catch(() => undefined)));
    this.sandboxes.clear();
    for (const slot of slots) {
      if (!slot) continue;
      await slot.relay.close().catch((error: Error) => log.warn(`closing a database relay: ${error.message}`));
      await this.serial(() => this.provisioner.dropRole(slot.role.name)).catch((error: Error) =>
        log.warn(`could not drop database role ${slot.role.name}: ${error.message}`),
      );
    }
    await this.provisioner.close();
  }

  private async provision(
    sandboxId: string,
    privilege: DatabasePrivilege,
    sandboxUser: { uid: number; gid: number },
  ): Promise<SandboxSlot> {
    const { identity, adminUrl, log } = this.options;
    const role = await this.serial(() => this.provisioner.createRole({ identity, classId: sandboxId, privilege }));
    try {
      const relay = await startSocketRelay({
        upstream: adminEndpoint(adminUrl).upstream,
        sandboxUser,
        allow: { user: role.name, database: role.database },
        // Postgres applies CONNECTION LIMIT only after authentication; the relay, before.
        maxConnections: this.options.section.connectionLimit,
        // Postgres's timeouts are the role's defaults, which a session can SET off; these it cannot.
        bounds: sessionBounds(this.options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS),
        onViolation: (violation) => this.options.onViolation(sandboxId, role.name, violation),
        onRefused: (refused) =>
          log.warn(`database relay of sandbox ${sandboxId} ended a connection: ${refused.reason}`),
        ...(this.options.socketBaseDir ? { baseDir: this.options.socketBaseDir } : {}),
      });
      if (this.closed) {
        await relay.close();
        throw new Error('the session database is closed');
      }
      log.debug(`sandbox ${sandboxId}: database role ${role.name} (${role.privilege}) through ${relay.socketPath}`);
      return { role, relay };
    } catch (error) {
      await this.serial(() => this.provisioner.dropRole(role.name)).catch(() => undefined);
      throw error;
    }
  }

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Moves every role's VALID UNTIL forward at half the TTL, for sessions longer than it. */
  private armRenewal(): void {
    const halfTtlMs = (this.options.section.roleTtlMinutes * 60_000) / 2;
    this.renewTimer = setInterval(() => void this.renewAll(), halfTtlMs);
    this.renewTimer.unref();
  }

  private async renewAll(): Promise<void> {
    for (const slot of await Promise.all([...this.sandboxes.values()].map((s) => s.catch(() => undefined)))) {
      if (!slot || this.closed) continue;
      try {
        const until = await this.serial(() => this.provisioner.renewRole(slot.role.name));
        this.options.log.debug(`renewed database role ${slot.role.name} until ${isoTime(until)}`);
      } catch (error) {
        this.options.log.warn(`could not renew database role ${slot.role.name}: ${(error as Error).message}`);
      }
    }
  }
}
