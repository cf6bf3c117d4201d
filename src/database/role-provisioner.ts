import { randomBytes as cryptoRandomBytes } from 'node:crypto';
import { Client, type ClientConfig } from 'pg';
import type { SessionIdentity } from '../engine/docker/container-spec.js';
import type { IsOwnerAlive } from '../engine/docker/sweep.js';
import { silentLogger, type Logger } from '../util/logger.js';
import { sectionTables, type DatabasePrivilege, type DatabaseSection } from './database-profile-schema.js';
import { minPrivilege } from '../policy/database-privilege.js';
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
  revokeFromPublicStatement,
  roleName,
  scramSha256Verifier,
  terminateSessionsQuery,
  type GrantObjects,
  type GrantRelation,
  type QualifiedName,
  type RelationKind,
} from './role-grants.js';
import { HintboxError } from '../util/hintbox-error.js';
import { monotonicMs } from '../util/clock.js';

/**
 * Postgres roles for sandboxes, through an admin connection (a superuser, or a role with
 * CREATEROLE that owns the target objects). One provisioner per profile: it checks the
 * target database for grants that would undo the roles' limits, revokes them on request,
 * creates and drops the roles, and sweeps the roles of dead sessions.
 */

/** Where the admin URL points: for error messages (never the password) and for the relay. */
export interface AdminEndpoint {
  /** Host name, IP address, or the directory of a Unix socket. */
  host: string;
  port: number;
  user: string;
  database: string;
  /** For the socket relay: TCP host and port, or the path of the server's Unix socket. */
  upstream: { host: string; port: number } | { path: string };
}

/**
 * Reads host, port, user and database from a `postgres://` / `postgresql://` URL, including
 * the socket forms (`postgresql://u@%2Frun%2Fpostgresql/db`, `postgresql:///db?host=/tmp`).
 */
export function adminEndpoint(adminUrl: string): AdminEndpoint {
  const url = parseUrl(adminUrl);
  const host = decodeURIComponent(url.hostname) || url.searchParams.get('host') || 'localhost';
  const port = Number(url.port || url.searchParams.get('port') || 5432);
  const user = decodeURIComponent(url.username) || url.searchParams.get('user') || '';
  const database = decodeURIComponent(url.pathname.replace(/^\//, '')) || url.searchParams.get('dbname') || user;
  const upstream = host.startsWith('/') ? { path: `${host.replace(/\/+$/, '')}/.s.PGSQL.${port}` } : { host, port };
  return { host, port, user, database, upstream };
}

function parseUrl(adminUrl: string): URL {
  let url: URL;
  try {
    url = new URL(adminUrl);
  } catch {
    throw new DatabaseConnectionError('the admin connection URL is not a valid URL');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new DatabaseConnectionError(`the admin connection URL must start with postgresql:// (not ${url.protocol}//)`);
  }
  return url;
}

/** The admin URL with another database; everything else (TLS options, socket host) is kept. */
export function withDatabase(adminUrl: string, database: string): string {
  const url = parseUrl(adminUrl);
  url.pathname = `/${encodeURIComponent(database)}`;
  // Touching searchParams re-encodes the query (host=/tmp → %2Ftmp), so only when needed.
  if (url.searchParams.has('dbname')) url.searchParams.delete('dbname');
  return url.toString();
}

/** The admin connection failed: names host, port, user and the reason; never the password. */
export class DatabaseConnectionError extends HintboxError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'DatabaseConnectionError';
  }
}

/** What checkDatabase finds. */
export type DatabaseProblemKind =
  | 'missing-schema'
  | 'missing-table'
  | 'public-temp'
  | 'public-create-database'
  | 'public-create-schema'
  | 'public-execute-security-definer'
  | 'public-write-relation'
  | 'public-write-column'
  | 'public-write-large-object'
  | 'public-create-large-object'
  | 'large-object-compat-privileges'
  | 'egress-extension'
  | 'public-usage-foreign-data-wrapper'
  | 'public-usage-foreign-server'
  | 'untrusted-language-routine'
  | 'connection-budget';

/** A grant (or a gap) that would let a hintbox role do more than its privilege says. */
export interface DatabaseProblem {
  kind: DatabaseProblemKind;
  /**
   * `refuse`: no role is created while it exists. `warn`: reported and fixed by prepare(), but
   * not refused, because what it allows never touches existing data (a role's own large
   * objects, dropped with the role) and managed services may not let an admin revoke it.
   */
  severity: 'refuse' | 'warn';
  /** One line, naming the object. */
  message: string;
  /** The REVOKE that fixes it, when one does. */
  statement?: string;
}

/** checkDatabase found problems that must be fixed before roles are created. */
export class DatabaseNotPreparedError extends HintboxError {
  readonly problems: DatabaseProblem[];
  constructor(database: string, problems: DatabaseProblem[]) {
    super(
      [
        `database ${JSON.stringify(database)} has grants that would let a hintbox role do more than its hints allow; run \`hintbox db prepare\` or fix them:`,
        ...problems.map((p) => `  - ${p.message}${p.statement ? ` (fix: ${p.statement};)` : ''}`),
      ].join('\n'),
    );
    this.name = 'DatabaseNotPreparedError';
    this.problems = problems;
  }
}

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

const RELKINDS: Readonly<Record<string, RelationKind>> = {
  r: 'table',
  p: 'partitioned-table',
  v: 'view',
  m: 'materialized-view',
  f: 'foreign-table',
};

/** Functions that create a large object, which the creating role then owns. */
const LARGE_OBJECT_CREATORS = [
  'pg_catalog.lo_create(oid)',
  'pg_catalog.lo_creat(integer)',
  'pg_catalog.lo_from_bytea(oid,bytea)',
  'pg_catalog.lo_import(text)',
  'pg_catalog.lo_import(text,oid)',
];

/**
 * Extensions whose functions make Postgres itself open a connection to a host the caller
 * names (or reach a cloud service): a network-less role would get a network through them.
 * Any extension that provides a foreign-data wrapper counts too, whatever its name.
 */
export const EGRESS_EXTENSIONS = ['dblink', 'postgres_fdw', 'http', 'pg_net', 'aws_s3', 'aws_lambda', 'azure_storage'];

/** Roles one run may hold at once: one per database class (read, append, write). */
const DATABASE_CLASSES = 3;

/** How long dropRole and endSessions wait for terminated sessions to end before they give up. */
const TERMINATE_WAIT_MS = 10_000;

/**
 * Connects to the admin URL with the target database, with a clear error when that fails.
 * The session's search_path is pg_catalog only, so names Postgres prints (regprocedure) are
 * schema-qualified and the statements hintbox prints mean the same in any session.
 */
async function connectAdmin(adminUrl: string, database: string, timeoutMs: number): Promise<Client> {
  const endpoint = adminEndpoint(adminUrl);
  const config: ClientConfig = {
    connectionString: withDatabase(adminUrl, database),
    connectionTimeoutMillis: timeoutMs,
    application_name: 'hintbox',
  };
  const client = new Client(config);
  // An idle admin connection that breaks must not crash the process; the next query fails.
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SET search_path = pg_catalog, pg_temp');
    return client;
  } catch (error) {
    await client.end().catch(() => undefined);
    throw new DatabaseConnectionError(
      `cannot connect to Postgres at ${endpoint.host}:${endpoint.port} (database ${JSON.stringify(database)}, user ${JSON.stringify(endpoint.user)}): ${reasonOf(error, adminUrl)}`,
      { cause: error },
    );
  }
}

/** The error's message with its SQLSTATE, and any trace of the URL's password removed. */
function reasonOf(error: unknown, adminUrl: string): string {
  const e = error as { message?: string; code?: string };
  let reason = e.message || String(error);
  if (e.code && !reason.includes(e.code)) reason += ` (${e.code})`;
  const encoded = parseUrl(adminUrl).password;
  for (const secret of new Set([encoded, safeDecode(encoded)])) {
    if (secret) reason = reason.split(secret).join('***');
  }
  return reason;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

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
      const { rows } = await client.query<{ can: boolean; name: string }>(
        'SELECT rolsuper OR rolcreaterole AS can, rolname AS name FROM pg_roles WHERE rolname = current_user',
      );
      if (!rows[0]?.can) {
        const endpoint = adminEndpoint(options.adminUrl);
        throw new DatabaseConnectionError(
          `the admin user ${JSON.stringify(rows[0]?.name ?? endpoint.user)} at ${endpoint.host}:${endpoint.port} cannot create roles (it needs SUPERUSER or CREATEROLE)`,
        );
      }
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
   * Finds what would let a hintbox role write (or own) anything despite its grants: PUBLIC's
   * TEMP or CREATE on the database, CREATE on any schema, EXECUTE on SECURITY DEFINER routines
   * and write privileges on relations in schemas a role can use (the targets, and every schema
   * PUBLIC has USAGE on), and large objects. Also missing schemas and tables. Nothing is changed.
   */
  async checkDatabase(): Promise<DatabaseProblem[]> {
    const { section } = this.options;
    const problems: DatabaseProblem[] = [];
    const db = this.database;

    const { rows: schemas } = await this.client.query<{ name: string }>(
      'SELECT nspname AS name FROM pg_namespace WHERE nspname = ANY($1::text[])',
      [section.schemas],
    );
    const existing = new Set(schemas.map((s) => s.name));
    for (const schema of section.schemas) {
      if (!existing.has(schema)) {
        problems.push({
          kind: 'missing-schema',
          severity: 'refuse',
          message: `schema ${JSON.stringify(schema)} does not exist in database ${JSON.stringify(db)}`,
        });
      }
    }
    const tables = sectionTables(section) ?? [];
    if (tables.length > 0) {
      const { rows } = await this.client.query<{ schema: string; name: string }>(
        `SELECT n.nspname AS schema, c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND (n.nspname, c.relname) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
        [tables.map((t) => t.schema), tables.map((t) => t.name)],
      );
      const found = new Set(rows.map((r) => `${r.schema}\0${r.name}`));
      for (const table of tables) {
        if (!found.has(`${table.schema}\0${table.name}`)) {
          problems.push({
            kind: 'missing-table',
            severity: 'refuse',
            message: `table ${table.schema}.${table.name} does not exist in database ${JSON.stringify(db)}`,
          });
        }
      }
    }

    const { rows: dbPrivileges } = await this.client.query<{ privilege: string }>(
      `SELECT a.privilege_type AS privilege
         FROM pg_database d, aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
        WHERE d.datname = current_database() AND a.grantee = 0 AND a.privilege_type IN ('TEMPORARY', 'CREATE')
        ORDER BY 1 DESC`,
    );
    for (const { privilege } of dbPrivileges) {
      problems.push(
        privilege === 'TEMPORARY'
          ? {
              kind: 'public-temp',
              severity: 'refuse',
              message: `PUBLIC may create temporary tables in database ${JSON.stringify(db)} (TEMP; Postgres grants it by default)`,
              statement: revokeFromPublicStatement('TEMPORARY', { type: 'DATABASE', name: db }),
            }
          : {
              kind: 'public-create-database',
              severity: 'refuse',
              message: `PUBLIC may create schemas in database ${JSON.stringify(db)} (CREATE)`,
              statement: revokeFromPublicStatement('CREATE', { type: 'DATABASE', name: db }),
            },
      );
    }

    const { rows: createSchemas } = await this.client.query<{ name: string }>(
      `SELECT n.nspname AS name FROM pg_namespace n, aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
        WHERE a.grantee = 0 AND a.privilege_type = 'CREATE' ORDER BY 1`,
    );
    for (const { name } of createSchemas) {
      problems.push({
        kind: 'public-create-schema',
        severity: 'refuse',
        message: `PUBLIC may create objects in schema ${JSON.stringify(name)} (CREATE)`,
        statement: revokeFromPublicStatement('CREATE', { type: 'SCHEMA', name }),
      });
    }

    // Schemas a hintbox role can use: its own targets, and any PUBLIC may use.
    const reachable = `SELECT n.oid FROM pg_namespace n
       WHERE n.nspname = ANY($1::text[])
          OR EXISTS (SELECT 1 FROM aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
                      WHERE a.grantee = 0 AND a.privilege_type = 'USAGE')`;

    const { rows: definers } = await this.client.query<{ signature: string }>(
      `SELECT p.oid::regprocedure::text AS signature
         FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
        WHERE p.prosecdef AND p.pronamespace IN (${reachable}) AND a.grantee = 0 AND a.privilege_type = 'EXECUTE'
        ORDER BY 1`,
      [section.schemas],
    );
    for (const { signature } of definers) {
      problems.push({
        kind: 'public-execute-security-definer',
        severity: 'refuse',
        message: `PUBLIC may execute the SECURITY DEFINER routine ${signature} (it runs with its owner's rights)`,
        statement: revokeFromPublicStatement('EXECUTE', { type: 'ROUTINE', signature }),
      });
    }

    problems.push(...(await this.egressProblems(reachable)));
    problems.push(...(await this.connectionBudgetProblems()));

    const { rows: relations } = await this.client.query<{
      schema: string;
      name: string;
      kind: string;
      privileges: string[];
    }>(
      `SELECT n.nspname AS schema, c.relname AS name, c.relkind AS kind,
              array_agg(a.privilege_type ORDER BY a.privilege_type) AS privileges
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, aclexplode(c.relacl) a
        WHERE c.relnamespace IN (${reachable}) AND a.grantee = 0
          -- Updating pg_settings is SET: it changes only the updating session's settings.
          AND c.oid <> 'pg_catalog.pg_settings'::regclass
          AND ((c.relkind <> 'S' AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'TRIGGER', 'MAINTAIN'))
            OR (c.relkind = 'S' AND a.privilege_type IN ('USAGE', 'UPDATE')))
        GROUP BY 1, 2, 3 ORDER BY 1, 2`,
      [section.schemas],
    );
    for (const r of relations) {
      const what = r.kind === 'S' ? 'sequence' : 'relation';
      problems.push({
        kind: 'public-write-relation',
        severity: 'refuse',
        message: `PUBLIC has ${r.privileges.join(', ')} on ${what} ${r.schema}.${r.name}`,
        statement: revokeFromPublicStatement(r.privileges.join(', '), {
          type: r.kind === 'S' ? 'SEQUENCE' : 'TABLE',
          name: { schema: r.schema, name: r.name },
        }),
      });
    }

    const { rows: columns } = await this.client.query<{
      schema: string;
      name: string;
      privilege: string;
      columns: string[];
    }>(
      `SELECT n.nspname AS schema, c.relname AS name, a.privilege_type AS privilege,
              array_agg(att.attname::text ORDER BY att.attnum) AS columns
         FROM pg_attribute att JOIN pg_class c ON c.oid = att.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace,
              aclexplode(att.attacl) a
        WHERE c.relnamespace IN (${reachable}) AND NOT att.attisdropped AND a.grantee = 0
          AND a.privilege_type IN ('INSERT', 'UPDATE')
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
      [section.schemas],
    );
    for (const c of columns) {
      problems.push({
        kind: 'public-write-column',
        severity: 'refuse',
        message: `PUBLIC has ${c.privilege} on columns ${c.columns.join(', ')} of ${c.schema}.${c.name}`,
        statement: revokeFromPublicStatement(c.privilege, {
          type: 'TABLE',
          name: { schema: c.schema, name: c.name },
          columns: c.columns,
        }),
      });
    }

    const { rows: largeObjects } = await this.client.query<{ oid: string; privilege: string }>(
      `SELECT m.oid::text AS oid, a.privilege_type AS privilege
         FROM pg_largeobject_metadata m, aclexplode(m.lomacl) a
        WHERE a.grantee = 0 AND a.privilege_type = 'UPDATE' ORDER BY m.oid`,
    );
    for (const lo of largeObjects) {
      problems.push({
        kind: 'public-write-large-object',
        severity: 'refuse',
        message: `PUBLIC may write large object ${lo.oid} (UPDATE)`,
        statement: revokeFromPublicStatement('UPDATE', { type: 'LARGE OBJECT', oid: Number(lo.oid) }),
      });
    }

    const { rows: compat } = await this.client.query<{ on: boolean }>(
      `SELECT current_setting('lo_compat_privileges')::boolean AS on`,
    );
    if (compat[0]?.on) {
      problems.push({
        kind: 'large-object-compat-privileges',
        severity: 'refuse',
        message:
          'lo_compat_privileges is on: every role may read and write every large object (set it off in postgresql.conf)',
      });
    }

    const { rows: creators } = await this.client.query<{ signature: string }>(
      `SELECT p.oid::regprocedure::text AS signature
         FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
        WHERE p.oid IN (SELECT to_regprocedure(unnest($1::text[]))) AND a.grantee = 0 AND a.privilege_type = 'EXECUTE'
        ORDER BY 1`,
      [LARGE_OBJECT_CREATORS],
    );
    for (const { signature } of creators) {
      problems.push({
        kind: 'public-create-large-object',
        severity: 'warn',
        message: `PUBLIC may execute ${signature}: a role can store large objects of its own (dropped with the role)`,
        statement: revokeFromPublicStatement('EXECUTE', { type: 'ROUTINE', signature: `pg_catalog.${signature}` }),
      });
    }
    return problems;
  }

  /**
   * A run's roles may hold `connectionLimit` connections each, one role per database class: at
   * most read, append and write. Together they may take at most half of what Postgres leaves to
   * ordinary clients, so that a sandbox cannot starve the server's other users.
   */
  private async connectionBudgetProblems(): Promise<DatabaseProblem[]> {
    const { rows } = await this.client.query<{ max: number; reserved: number }>(
      `SELECT current_setting('max_connections')::int AS max,
              current_setting('superuser_reserved_connections')::int
                + coalesce(current_setting('reserved_connections', true)::int, 0) AS reserved`,
    );
    const { max, reserved } = rows[0] ?? { max: 0, reserved: 0 };
    const available = max - reserved;
    const limit = this.options.section.connectionLimit;
    const most = Math.floor(available / 2 / DATABASE_CLASSES);
    if (DATABASE_CLASSES * limit <= available / 2) return [];
    return [
      {
        kind: 'connection-budget',
        severity: 'refuse',
        message: `database.connectionLimit ${limit}: a run's ${DATABASE_CLASSES} roles could hold ${DATABASE_CLASSES * limit} of the ${available} connections Postgres leaves to ordinary clients (max_connections ${max}, ${reserved} reserved); at most ${most} leaves half for everyone else`,
      },
    ];
  }

  /**
   * Ways out to the network through Postgres itself: the functions of an egress extension
   * (dblink, postgres_fdw, any foreign-data wrapper's, …) that PUBLIC may execute, PUBLIC's
   * USAGE on a foreign-data wrapper or server, and routines in an untrusted procedural language
   * (plpython3u, plperlu, …) that PUBLIC may execute. One problem per extension, wrapper,
   * server and routine, each with the REVOKE that fixes it.
   */
  private async egressProblems(reachable: string): Promise<DatabaseProblem[]> {
    const { section } = this.options;
    const problems: DatabaseProblem[] = [];
    const { rows: extensions } = await this.client.query<{ name: string; routines: string[] }>(
      `SELECT e.extname AS name, array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text) AS routines
         FROM pg_extension e
         JOIN pg_depend d ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
                         AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
         JOIN pg_proc p ON p.oid = d.objid,
              aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
        WHERE (e.extname = ANY($2::text[])
               OR EXISTS (SELECT 1 FROM pg_depend w
                           WHERE w.classid = 'pg_foreign_data_wrapper'::regclass AND w.refclassid = 'pg_extension'::regclass
                             AND w.refobjid = e.oid AND w.deptype = 'e'))
          AND p.pronamespace IN (${reachable}) AND a.grantee = 0 AND a.privilege_type = 'EXECUTE'
        GROUP BY 1 ORDER BY 1`,
      [section.schemas, EGRESS_EXTENSIONS],
    );
    for (const { name, routines } of extensions) {
      const shown = routines.slice(0, 3).join(', ') + (routines.length > 3 ? ', …' : '');
      problems.push({
        kind: 'egress-extension',
        severity: 'refuse',
        message: `extension ${name} is installed and PUBLIC may execute ${routines.length} of its functions (${shown}): a role without a network could make Postgres connect out`,
        statement: revokeFromPublicStatement('EXECUTE', { type: 'ROUTINE', signature: routines }),
      });
    }

    for (const [catalog, type, kind] of [
      ['pg_foreign_data_wrapper', 'FOREIGN DATA WRAPPER', 'public-usage-foreign-data-wrapper'],
      ['pg_foreign_server', 'FOREIGN SERVER', 'public-usage-foreign-server'],
    ] as const) {
      const [name, acl, owner, aclKind] =
        catalog === 'pg_foreign_data_wrapper'
          ? ['fdwname', 'fdwacl', 'fdwowner', 'F']
          : ['srvname', 'srvacl', 'srvowner', 'S'];
      const { rows } = await this.client.query<{ name: string }>(
        `SELECT o.${name} AS name FROM ${catalog} o, aclexplode(coalesce(o.${acl}, acldefault('${aclKind}', o.${owner}))) a
          WHERE a.grantee = 0 AND a.privilege_type = 'USAGE' ORDER BY 1`,
      );
      for (const row of rows) {
        problems.push({
          kind,
          severity: 'refuse',
          message: `PUBLIC has USAGE on ${type.toLowerCase()} ${row.name}: a role could define connections to a host of its choice`,
          statement: revokeFromPublicStatement('USAGE', { type, name: row.name }),
        });
      }
    }

    const { rows: untrusted } = await this.client.query<{ signature: string; language: string }>(
      `SELECT p.oid::regprocedure::text AS signature, l.lanname AS language
         FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang,
              aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
        WHERE NOT l.lanpltrusted AND l.lanname NOT IN ('internal', 'c')
          AND p.pronamespace IN (${reachable}) AND a.grantee = 0 AND a.privilege_type = 'EXECUTE'
        ORDER BY 1`,
      [section.schemas],
    );
    for (const { signature, language } of untrusted) {
      problems.push({
        kind: 'untrusted-language-routine',
        severity: 'refuse',
        message: `PUBLIC may execute ${signature}, written in the untrusted language ${language} (it can open files and connections as the server)`,
        statement: revokeFromPublicStatement('EXECUTE', { type: 'ROUTINE', signature }),
      });
    }
    return problems;
  }

  /**
   * Runs the REVOKE of every problem checkDatabase finds, in one transaction, calling
   * `onStatement` before each (so a CLI can print it), then checks again.
   */
  async prepare(onStatement: (statement: string) => void = () => {}): Promise<PrepareResult> {
    const statements = (await this.checkDatabase()).flatMap((p) => (p.statement ? [p.statement] : []));
    await this.transaction(async () => {
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
    const objects = await this.grantObjects(privilege);
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
    await this.transaction(async () => {
      for (const statement of statements) await this.client.query(statement);
    });
    this.log.info(
      `created database role ${name} (${privilege} on ${section.schemas.join(', ')}, valid until ${validUntil.toISOString()})`,
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

  /** The backends of a role now (for endSessions). */
  async sessionPids(name: string): Promise<number[]> {
    assertHintboxRole(name);
    const { rows } = await this.client.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid() ORDER BY pid',
      [name],
    );
    return rows.map((r) => r.pid);
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

  /** Relations (and, for append and write, the sequences their defaults use) to grant on. */
  private async grantObjects(privilege: DatabasePrivilege): Promise<GrantObjects> {
    const { section } = this.options;
    const tables = sectionTables(section);
    const { rows } = await this.client.query<{ oid: number; schema: string; name: string; kind: string }>(
      `SELECT c.oid, n.nspname AS schema, c.relname AS name, c.relkind AS kind
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = ANY($1::text[]) AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
        ORDER BY 2, 3`,
      [section.schemas],
    );
    const wanted = tables ? new Set(tables.map((t) => `${t.schema}\0${t.name}`)) : undefined;
    const selected = rows.filter((r) => !wanted || wanted.has(`${r.schema}\0${r.name}`));
    const relations: GrantRelation[] = selected.map((r) => ({
      schema: r.schema,
      name: r.name,
      kind: RELKINDS[r.kind] ?? 'table',
    }));
    if (privilege === 'read') return { relations, sequences: [] };
    // Sequences the column defaults call (serial, nextval defaults); identity columns need none.
    const { rows: sequences } = await this.client.query<QualifiedName>(
      `SELECT DISTINCT sn.nspname AS schema, s.relname AS name
         FROM pg_attrdef ad
         JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid AND d.refclassid = 'pg_class'::regclass
         JOIN pg_class s ON s.oid = d.refobjid AND s.relkind = 'S'
         JOIN pg_namespace sn ON sn.oid = s.relnamespace
        WHERE ad.adrelid = ANY($1::oid[])
        ORDER BY 1, 2`,
      [selected.filter((r) => r.kind !== 'm').map((r) => r.oid)],
    );
    return { relations, sequences };
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

  private async transaction(work: () => Promise<void>): Promise<void> {
    await this.client.query('BEGIN');
    try {
      await work();
      await this.client.query('COMMIT');
    } catch (error) {
      await this.client.query('ROLLBACK').catch(() => undefined);
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
