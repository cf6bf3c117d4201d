import { randomBytes as cryptoRandomBytes } from 'node:crypto';
import type { Client } from 'pg';
import type { SessionIdentity } from '../util/session-identity.js';
import type { IsOwnerAlive } from '../util/process-alive.js';
import { silentLogger, type Logger } from '../util/logger.js';
import { assertCanCreateRoles, connectAdmin, inTransaction } from './admin-connection.js';
import type { DatabasePrivilege, DatabaseSection } from '../profile/database-profile-schema.js';
import { DatabaseNotPreparedError, checkGrants, type DatabaseProblem } from './grant-checks.js';
import { readGrantObjects } from './grant-objects.js';
import type { BackendState } from './call-end-sessions.js';
import {
  ROLE_PREFIX,
  DEFAULT_CALL_TIMEOUT_MS,
  createRoleStatements,
  sessionBounds,
  disableLoginStatement,
  dropRoleStatements,
  parseRoleComment,
  quoteLiteral,
  renewRoleStatement,
  roleName,
  scramSha256Verifier,
  terminateSessionsQuery,
} from './role-grants.js';
import { minPrivilege } from '../policy/database-privilege.js';
import { monotonicMs } from '../util/clock.js';
import { isoTime } from '../util/iso-time.js';

/**
 * Postgres roles for sandboxes, through an admin connection (a superuser, or a role with
 * CREATEROLE that owns the target objects). One provisioner per profile: it checks the
 * target database for grants that would undo the roles' limits, revokes them on request,
 * creates and drops the roles, and sweeps the roles of dead sessions.
 */

/** What prepare() did. */
export interface PrepareResult {
  /** Every statement it ran, in order. */
  statements: string[];
  /** What checkDatabase still finds afterwards (e.g. a REVOKE the admin was not allowed to make). */
  remaining: DatabaseProblem[];
}

/** A role made for one sandbox. The password is only here: keep it out of logs. */
export interface CreatedRole {
  name: string;
  password: string;
  privilege: DatabasePrivilege;
  database: string;
  validUntil: Date;
}

export interface CreateRoleOptions {
  identity: SessionIdentity;
  /** The sandbox class id (e.g. `ro-offline`). */
  classId: string;
  /** The sandbox's privilege from its hints; capped again here by the profile's ceiling. */
  privilege: DatabasePrivilege;
}

export interface RoleProvisionerOptions {
  /** The admin URL (read from the environment variable the profile names). */
  adminUrl: string;
  /** The profile's database section. */
  section: Omit<DatabaseSection, 'adminUrlEnv'>;
  log?: Logger;
  /** Injected for tests: VALID UNTIL is computed from it. */
  now?: () => Date;
  /** Injected for tests: passwords and SCRAM salts. */
  randomBytes?: (size: number) => Buffer;
  /** Default 10 s. */
  connectTimeoutMs?: number;
  /**
   * How long a tool call may take; the roles' statement and idle bounds follow from it
   * (sessionBounds). Default 600 000 ms (the profile's default `timeouts.call`).
   */
  callTimeoutMs?: number;
}

/** How long dropRole and endSessions wait for terminated sessions to end before they give up. */
const TERMINATE_WAIT_MS = 10_000;

/**
 * Creates, checks and drops hintbox's roles in one database. `await using` it, or call close().
 */
export class RoleProvisioner implements AsyncDisposable {
  private readonly log: Logger;
  private readonly now: () => Date;
  private readonly randomBytes: (size: number) => Buffer;
  private readonly connectTimeoutMs: number;

  private constructor(
    private readonly client: Client,
    private readonly options: RoleProvisionerOptions,
  ) {
    this.log = options.log ?? silentLogger;
    this.now = options.now ?? (() => new Date());
    this.randomBytes = options.randomBytes ?? cryptoRandomBytes;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  }

  /**
   * Connects to the profile's database as the admin and checks that the admin may create
   * roles. Throws DatabaseConnectionError (host, port, reason; no password) when it cannot.
   */
  static async connect(options: RoleProvisionerOptions): Promise<RoleProvisioner> {
    const database = options.section.database;
    const client = await connectAdmin(options.adminUrl, database, options.connectTimeoutMs ?? 10_000);
    try {
      await assertCanCreateRoles(client, options.adminUrl);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    return new RoleProvisioner(client, options);
  }

  get database(): string {
    return this.options.section.database;
  }

  /**
   * Runs the grant checks (GRANT_CHECKS) against the profile's database: what would let a
   * hintbox role write (or own) anything despite its grants, and missing schemas and tables.
   * Nothing is changed.
   */
  async checkDatabase(): Promise<DatabaseProblem[]> {
    return checkGrants(
      async (sql, params) => (await this.client.query<object>(sql, [...params])).rows,
      this.options.section,
    );
  }

  /**
   * Runs the REVOKE of every problem checkDatabase finds, in one transaction, calling
   * `onStatement` before each (so a CLI can print it), then checks again.
   */
  async prepare(onStatement: (statement: string) => void = () => {}): Promise<PrepareResult> {
    const statements = (await this.checkDatabase()).flatMap((p) => (p.statement ? [p.statement] : []));
    await inTransaction(this.client, async () => {
      for (const statement of statements) {
        onStatement(statement);
        await this.client.query(statement);
      }
    });
    return { statements, remaining: await this.checkDatabase() };
  }

  /**
   * Creates the role of one sandbox with a random password and grants it `privilege` (capped by
   * the profile's ceiling) on the profile's schemas or tables. Refuses, creating nothing, while
   * checkDatabase finds a problem of severity `refuse`.
   */
  async createRole(options: CreateRoleOptions): Promise<CreatedRole> {
    const { section } = this.options;
    const refusing = (await this.checkDatabase()).filter((p) => p.severity === 'refuse');
    if (refusing.length > 0) throw new DatabaseNotPreparedError(this.database, refusing);

    const privilege = minPrivilege(options.privilege, section.privilege);
    const name = roleName(options.identity.sessionId, options.classId);
    const password = this.randomBytes(24).toString('base64url');
    const validUntil = new Date(this.now().getTime() + section.roleTtlMinutes * 60_000);
    const objects = await readGrantObjects(this.client, section, privilege);
    const statements = createRoleStatements(
      {
        name,
        password: scramSha256Verifier(password, this.randomBytes(16)),
        privilege,
        database: this.database,
        schemas: section.schemas,
        validUntil,
        connectionLimit: section.connectionLimit,
        bounds: sessionBounds(this.options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS),
        comment: {
          session: options.identity.sessionId,
          class: options.classId,
          host: options.identity.ownerHost,
          pid: options.identity.ownerPid,
          database: this.database,
        },
      },
      objects,
    );
    await inTransaction(this.client, async () => {
      for (const statement of statements) await this.client.query(statement);
    });
    this.log.info(
      `created database role ${name} (${privilege} on ${section.schemas.join(', ')}, valid until ${isoTime(validUntil)})`,
    );
    return { name, password, privilege, database: this.database, validUntil };
  }

  /** Moves a role's VALID UNTIL to now + the profile's TTL (for sessions longer than it). */
  async renewRole(name: string): Promise<Date> {
    assertHintboxRole(name);
    const validUntil = new Date(this.now().getTime() + this.options.section.roleTtlMinutes * 60_000);
    await this.client.query(renewRoleStatement(name, validUntil));
    return validUntil;
  }

  /** Ends every session of a role now (a call's deadline passed); the role stays. */
  async terminateSessions(name: string): Promise<number> {
    assertHintboxRole(name);
    const { rowCount } = await this.client.query(terminateSessionsQuery(name));
    return rowCount ?? 0;
  }

  /**
   * The backends of a role now, each with its state, whether a transaction is open and how
   * many locks it holds or waits for (pg_locks: advisory locks of an idle session included).
   */
  async sessionStates(name: string): Promise<BackendState[]> {
    assertHintboxRole(name);
    const { rows } = await this.client.query<BackendState>(
      `SELECT a.pid, a.state, a.xact_start IS NOT NULL AS "inTransaction",
         (SELECT count(*) FROM pg_locks l WHERE l.pid = a.pid)::int AS locks
       FROM pg_stat_activity a WHERE a.usename = $1 AND a.pid <> pg_backend_pid() ORDER BY a.pid`,
      [name],
    );
    return rows;
  }

  /**
   * Terminates those of `pids` that are still backends of the role, and waits until none of
   * them is left (a backend releases its locks as it exits). Throws after 10 s.
   */
  async endSessions(name: string, pids: readonly number[]): Promise<void> {
    assertHintboxRole(name);
    if (pids.length === 0) return;
    const left = async () =>
      (
        await this.client.query<{ pid: number }>(
          'SELECT pid FROM pg_stat_activity WHERE usename = $1 AND pid = ANY($2::int[])',
          [name, pids],
        )
      ).rows.map((r) => r.pid);
    const deadline = monotonicMs() + TERMINATE_WAIT_MS;
    for (let remaining = await left(); remaining.length > 0; remaining = await left()) {
      if (monotonicMs() > deadline) {
        throw new Error(
          `${remaining.length} session(s) of role ${name} still running ${TERMINATE_WAIT_MS} ms after terminating them`,
        );
      }
      await this.client.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [remaining]);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /**
   * Drops a hintbox role: no new logins, its sessions terminated (and waited for), whatever it
   * owns dropped and its grants revoked in its database, then the role. False when it did not
   * exist. Refuses names without the hintbox prefix.
   */
  async dropRole(name: string): Promise<boolean> {
    assertHintboxRole(name);
    const { rows } = await this.client.query<{ comment: string | null }>(
      `SELECT shobj_description(oid, 'pg_authid') AS comment FROM pg_roles WHERE rolname = $1`,
      [name],
    );
    if (rows.length === 0) return false;
    const database = parseRoleComment(rows[0]?.comment)?.database ?? this.database;

    await this.client.query(disableLoginStatement(name));
    await this.client.query(terminateSessionsQuery(name));
    await this.waitForNoSessions(name);

    const other = database === this.database ? undefined : await this.connectOrGone(database);
    try {
      for (const statement of dropRoleStatements(name)) await (other ?? this.client).query(statement);
    } finally {
      await other?.end().catch(() => undefined);
    }
    this.log.info(`dropped database role ${name}`);
    return true;
  }

  /**
   * Drops the roles of sessions whose owner is no longer running (a run killed with SIGKILL),
   * whatever database they were granted on. Roles of live owners, and prefixed roles without a
   * hintbox comment, are left alone. Returns the dropped names; a role that cannot be dropped
   * is logged and skipped.
   */
  async sweepRoles(isOwnerAlive: IsOwnerAlive): Promise<string[]> {
    const { rows } = await this.client.query<{ name: string; comment: string | null }>(
      `SELECT rolname AS name, shobj_description(oid, 'pg_authid') AS comment
         FROM pg_roles WHERE left(rolname, length($1)) = $1 ORDER BY 1`,
      [ROLE_PREFIX],
    );
    const dropped: string[] = [];
    for (const { name, comment } of rows) {
      const owner = parseRoleComment(comment);
      if (!owner) {
        this.log.warn(`left role ${name} alone: it has the hintbox prefix but no hintbox comment`);
        continue;
      }
      if (isOwnerAlive(owner.host, owner.pid)) continue;
      try {
        if (await this.dropRole(name)) {
          dropped.push(name);
          this.log.info(`swept database role ${name} (session ${owner.session} is no longer running)`);
        }
      } catch (error) {
        this.log.warn(`could not sweep database role ${name}: ${(error as Error).message}`);
      }
    }
    return dropped;
  }

  async close(): Promise<void> {
    await this.client.end().catch(() => undefined);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private async waitForNoSessions(name: string): Promise<void> {
    const deadline = monotonicMs() + TERMINATE_WAIT_MS;
    for (;;) {
      const { rows } = await this.client.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1',
        [name],
      );
      if ((rows[0]?.n ?? 0) === 0) return;
      if (monotonicMs() > deadline) {
        throw new Error(
          `role ${name} still has ${rows[0]?.n} session(s) ${TERMINATE_WAIT_MS} ms after terminating them`,
        );
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * An admin connection to the role's own database, for DROP OWNED there. Undefined when that
   * database no longer exists: its grants went with it, and the role can be dropped from here.
   */
  private async connectOrGone(database: string): Promise<Client | undefined> {
    try {
      return await connectAdmin(this.options.adminUrl, database, this.connectTimeoutMs);
    } catch (error) {
      if ((error as { cause?: { code?: string } }).cause?.code === '3D000') return undefined;
      throw error;
    }
  }
}

/** A guard for every statement that alters or drops a role: never touch a role not hintbox's. */
function assertHintboxRole(name: string): void {
  if (!name.startsWith(ROLE_PREFIX)) {
    throw new Error(`refusing to touch role ${quoteLiteral(name)}: not a hintbox role (${ROLE_PREFIX}…)`);
  }
}
