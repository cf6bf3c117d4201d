import { sectionTables, type DatabaseSection } from '../profile/database-profile-schema.js';
import { revokeFromPublicStatement } from './role-grants.js';
import { HintboxError } from '../util/hintbox-error.js';

/**
 * What must be true of a database before hintbox creates roles in it, as a table: each check
 * is one catalogue query whose rows are candidate problems, which of them are problems, the
 * message that names the object, and the REVOKE that fixes it. `checkGrants` runs the table in
 * order over a query function it is given (the admin connection, or a fake in tests), so the
 * table and what it makes of catalogue rows are tested without Postgres.
 *
 * A hintbox role owns nothing and holds only its grants; these checks find what would let it
 * do more anyway: PUBLIC's TEMP or CREATE on the database, CREATE on any schema, EXECUTE on
 * SECURITY DEFINER routines and write privileges on relations in schemas a role can use (the
 * targets, and every schema PUBLIC has USAGE on), large objects, ways out to the network, and
 * a connection budget that would let a run starve the server. Also missing schemas and tables.
 */

/** What checkGrants finds. */
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

/** The checks found problems that must be fixed before roles are created. */
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

/** The part of the profile's database section the checks read. */
export type CheckedSection = Pick<DatabaseSection, 'database' | 'schemas' | 'tables' | 'connectionLimit'>;

/** Runs one catalogue query with its parameters and returns its rows. */
export type CatalogQuery = (sql: string, params: readonly unknown[]) => Promise<readonly object[]>;

/**
 * One row of the table. The functions are written as methods so that a check typed with its
 * own row shape still fits in the table of all checks.
 */
export interface GrantCheck<Row extends object = object> {
  kind: DatabaseProblemKind;
  severity: DatabaseProblem['severity'];
  /** A catalogue query, run with search_path = pg_catalog, pg_temp. */
  sql: string;
  /** The query's parameters. Default: none. */
  params?(section: CheckedSection): unknown[];
  /** Whether a row is a problem. Default: every row the query returns is one. */
  isProblem?(row: Row, section: CheckedSection): boolean;
  message(row: Row, section: CheckedSection): string;
  /** The REVOKE that fixes the problem, when one does. */
  fix?(row: Row, section: CheckedSection): string;
}

/** Runs every check in order and returns what they find. Changes nothing. */
export async function checkGrants(
  query: CatalogQuery,
  section: CheckedSection,
  checks: readonly GrantCheck[] = GRANT_CHECKS,
): Promise<DatabaseProblem[]> {
  const problems: DatabaseProblem[] = [];
  for (const check of checks) {
    problems.push(...problemsIn(check, await query(check.sql, check.params?.(section) ?? []), section));
  }
  return problems;
}

/** What one check makes of the rows its query returned. */
export function problemsIn(check: GrantCheck, rows: readonly object[], section: CheckedSection): DatabaseProblem[] {
  return rows
    .filter((row) => check.isProblem?.(row, section) ?? true)
    .map((row) => {
      const statement = check.fix?.(row, section);
      return {
        kind: check.kind,
        severity: check.severity,
        message: check.message(row, section),
        ...(statement === undefined ? {} : { statement }),
      };
    });
}

/** Functions that create a large object, which the creating role then owns. */
export const LARGE_OBJECT_CREATORS = [
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
export const DATABASE_CLASSES = 3;

/** Schemas a hintbox role can use: its own targets ($1), and any PUBLIC may use. */
const REACHABLE_SCHEMAS = `SELECT n.oid FROM pg_namespace n
       WHERE n.nspname = ANY($1::text[])
          OR EXISTS (SELECT 1 FROM aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
                      WHERE a.grantee = 0 AND a.privilege_type = 'USAGE')`;

const schemasParam = (section: CheckedSection): unknown[] => [section.schemas];
const quoted = JSON.stringify;

type Named = { name: string };
type Routine = { signature: string };

function grantCheck<Row extends object>(check: GrantCheck<Row>): GrantCheck {
  return check;
}

/** A database privilege of PUBLIC's (TEMPORARY or CREATE) in the current database. */
function databasePrivilegeSql(privilege: 'TEMPORARY' | 'CREATE'): string {
  return `SELECT a.privilege_type AS privilege
         FROM pg_database d, aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
        WHERE d.datname = current_database() AND a.grantee = 0 AND a.privilege_type = '${privilege}'`;
}

/** PUBLIC's USAGE on a foreign-data wrapper or a foreign server. */
function foreignUsageCheck(type: 'FOREIGN DATA WRAPPER' | 'FOREIGN SERVER'): GrantCheck {
  const [catalog, name, acl, owner, aclKind] =
    type === 'FOREIGN DATA WRAPPER'
      ? ['pg_foreign_data_wrapper', 'fdwname', 'fdwacl', 'fdwowner', 'F']
      : ['pg_foreign_server', 'srvname', 'srvacl', 'srvowner', 'S'];
  return grantCheck<Named>({
    kind: type === 'FOREIGN DATA WRAPPER' ? 'public-usage-foreign-data-wrapper' : 'public-usage-foreign-server',
    severity: 'refuse',
    sql: `SELECT o.${name} AS name FROM ${catalog} o, aclexplode(coalesce(o.${acl}, acldefault('${aclKind}', o.${owner}))) a
          WHERE a.grantee = 0 AND a.privilege_type = 'USAGE' ORDER BY 1`,
    message: (row) =>
      `PUBLIC has USAGE on ${type.toLowerCase()} ${row.name}: a role could define connections to a host of its choice`,
    fix: (row) => revokeFromPublicStatement('USAGE', { type, name: row.name }),
  });
}

/** Every check, in the order its problems are reported. */
export const GRANT_CHECKS: readonly GrantCheck[] = [
  grantCheck<Named>({
    kind: 'missing-schema',
    severity: 'refuse',
    sql: `SELECT s.name FROM unnest($1::text[]) WITH ORDINALITY AS s(name, n)
           WHERE NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = s.name) ORDER BY s.n`,
    params: schemasParam,
    message: (row, section) => `schema ${quoted(row.name)} does not exist in database ${quoted(section.database)}`,
  }),
  grantCheck<{ schema: string; name: string }>({
    kind: 'missing-table',
    severity: 'refuse',
    sql: `SELECT t.schema, t.name FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(schema, name, n)
           WHERE NOT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
                              WHERE ns.nspname = t.schema AND c.relname = t.name AND c.relkind IN ('r', 'p', 'v', 'm', 'f'))
           ORDER BY t.n`,
    params: (section) => {
      const tables = sectionTables(section) ?? [];
      return [tables.map((t) => t.schema), tables.map((t) => t.name)];
    },
    message: (row, section) => `table ${row.schema}.${row.name} does not exist in database ${quoted(section.database)}`,
  }),
  grantCheck({
    kind: 'public-temp',
    severity: 'refuse',
    sql: databasePrivilegeSql('TEMPORARY'),
    message: (_row, section) =>
      `PUBLIC may create temporary tables in database ${quoted(section.database)} (TEMP; Postgres grants it by default)`,
    fix: (_row, section) => revokeFromPublicStatement('TEMPORARY', { type: 'DATABASE', name: section.database }),
  }),
  grantCheck({
    kind: 'public-create-database',
    severity: 'refuse',
    sql: databasePrivilegeSql('CREATE'),
    message: (_row, section) => `PUBLIC may create schemas in database ${quoted(section.database)} (CREATE)`,
    fix: (_row, section) => revokeFromPublicStatement('CREATE', { type: 'DATABASE', name: section.database }),
  }),
  grantCheck<Named>({
    kind: 'public-create-schema',
    severity: 'refuse',
    sql: `SELECT n.nspname AS name FROM pg_namespace n, aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
        WHERE a.grantee = 0 AND a.privilege_type = 'CREATE' ORDER BY 1`,
    message: (row) => `PUBLIC may create objects in schema ${quoted(row.name)} (CREATE)`,
    fix: (row) => revokeFromPublicStatement('CREATE', { type: 'SCHEMA', name: row.name }),
  }),
  grantCheck<Routine>({
    kind: 'public-execute-security-definer',
    severity: 'refuse',
    sql: `SELECT p.oid::regprocedure::text AS signature
         FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
        WHERE p.prosecdef AND p.pronamespace IN (${REACHABLE_SCHEMAS}) AND a.grantee = 0 AND a.privilege_type = 'EXECUTE'
        ORDER BY 1`,
    params: schemasParam,
    message: (row) =>
      `PUBLIC may execute the SECURITY DEFINER routine ${row.signature} (it runs with its owner's rights)`,
    fix: (row) => revokeFromPublicStatement('EXECUTE', { type: 'ROUTINE', signature: row.signature }),
  }),
  // Ways out to the network through Postgres itself: the functions of an egress extension
  // (dblink, postgres_fdw, any foreign-data wrapper's, …) that PUBLIC may execute, PUBLIC's
  // USAGE on a foreign-data wrapper or server, and routines in an untrusted procedural language
  // (plpython3u, plperlu, …) that PUBLIC may execute. One problem per extension, wrapper,
  // server and routine.
  grantCheck<{ name: string; routines: string[] }>({
    kind: 'egress-extension',
    severity: 'refuse',
    sql: `SELECT e.extname AS name, array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text) AS routines
         FROM pg_extension e
         JOIN pg_depend d ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
                         AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
         JOIN pg_proc p ON p.oid = d.objid,
              aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
        WHERE (e.extname = ANY($2::text[])
               OR EXISTS (SELECT 1 FROM pg_depend w
                           WHERE w.classid = 'pg_foreign_data_wrapper'::regclass AND w.refclassid = 'pg_extension'::regclass
                             AND w.refobjid = e.oid AND w.deptype = 'e'))
          AND p.pronamespace IN (${REACHABLE_SCHEMAS}) AND a.grantee = 0 AND a.privilege_type = 'EXECUTE'
        GROUP BY 1 ORDER BY 1`,
    params: (section) => [section.schemas, EGRESS_EXTENSIONS],
    message: ({ name, routines }) => {
      const shown = routines.slice(0, 3).join(', ') + (routines.length > 3 ? ', …' : '');
      return `extension ${name} is installed and PUBLIC may execute ${routines.length} of its functions (${shown}): a role without a network could make Postgres connect out`;
    },
    fix: (row) => revokeFromPublicStatement('EXECUTE', { type: 'ROUTINE', signature: row.routines }),
  }),
  foreignUsageCheck('FOREIGN DATA WRAPPER'),
  foreignUsageCheck('FOREIGN SERVER'),
  grantCheck<Routine & { language: string }>({
    kind: 'untrusted-language-routine',
    severity: 'refuse',
    sql: `SELECT p.oid::regprocedure::text AS signature, l.lanname AS language
         FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang,
              aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
        WHERE NOT l.lanpltrusted AND l.lanname NOT IN ('internal', 'c')
          AND p.pronamespace IN (${REACHABLE_SCHEMAS}) AND a.grantee = 0 AND a.privilege_type = 'EXECUTE'
        ORDER BY 1`,
    params: schemasParam,
    message: (row) =>
      `PUBLIC may execute ${row.signature}, written in the untrusted language ${row.language} (it can open files and connections as the server)`,
    fix: (row) => revokeFromPublicStatement('EXECUTE', { type: 'ROUTINE', signature: row.signature }),
  }),
  // A run's roles may hold `connectionLimit` connections each, one role per database class: at
  // most read, append and write. Together they may take at most half of what Postgres leaves to
  // ordinary clients, so that a sandbox cannot starve the server's other users.
  grantCheck<{ max: number; reserved: number }>({
    kind: 'connection-budget',
    severity: 'refuse',
    sql: `SELECT current_setting('max_connections')::int AS max,
              current_setting('superuser_reserved_connections')::int
                + coalesce(current_setting('reserved_connections', true)::int, 0) AS reserved`,
    isProblem: (row, section) => DATABASE_CLASSES * section.connectionLimit > (row.max - row.reserved) / 2,
    message: ({ max, reserved }, { connectionLimit: limit }) => {
      const available = max - reserved;
      const most = Math.floor(available / 2 / DATABASE_CLASSES);
      return `database.connectionLimit ${limit}: a run's ${DATABASE_CLASSES} roles could hold ${DATABASE_CLASSES * limit} of the ${available} connections Postgres leaves to ordinary clients (max_connections ${max}, ${reserved} reserved); at most ${most} leaves half for everyone else`;
    },
  }),
  grantCheck<{ schema: string; name: string; kind: string; privileges: string[] }>({
    kind: 'public-write-relation',
    severity: 'refuse',
    sql: `SELECT n.nspname AS schema, c.relname AS name, c.relkind AS kind,
              array_agg(a.privilege_type ORDER BY a.privilege_type) AS privileges
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, aclexplode(c.relacl) a
        WHERE c.relnamespace IN (${REACHABLE_SCHEMAS}) AND a.grantee = 0
          -- Updating pg_settings is SET: it changes only the updating session's settings.
          AND c.oid <> 'pg_catalog.pg_settings'::regclass
          AND ((c.relkind <> 'S' AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'TRIGGER', 'MAINTAIN'))
            OR (c.relkind = 'S' AND a.privilege_type IN ('USAGE', 'UPDATE')))
        GROUP BY 1, 2, 3 ORDER BY 1, 2`,
    params: schemasParam,
    message: (r) =>
      `PUBLIC has ${r.privileges.join(', ')} on ${r.kind === 'S' ? 'sequence' : 'relation'} ${r.schema}.${r.name}`,
    fix: (r) =>
      revokeFromPublicStatement(r.privileges.join(', '), {
        type: r.kind === 'S' ? 'SEQUENCE' : 'TABLE',
        name: { schema: r.schema, name: r.name },
      }),
  }),
  grantCheck<{ schema: string; name: string; privilege: string; columns: string[] }>({
    kind: 'public-write-column',
    severity: 'refuse',
    sql: `SELECT n.nspname AS schema, c.relname AS name, a.privilege_type AS privilege,
              array_agg(att.attname::text ORDER BY att.attnum) AS columns
         FROM pg_attribute att JOIN pg_class c ON c.oid = att.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace,
              aclexplode(att.attacl) a
        WHERE c.relnamespace IN (${REACHABLE_SCHEMAS}) AND NOT att.attisdropped AND a.grantee = 0
          AND a.privilege_type IN ('INSERT', 'UPDATE')
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
    params: schemasParam,
    message: (c) => `PUBLIC has ${c.privilege} on columns ${c.columns.join(', ')} of ${c.schema}.${c.name}`,
    fix: (c) =>
      revokeFromPublicStatement(c.privilege, {
        type: 'TABLE',
        name: { schema: c.schema, name: c.name },
        columns: c.columns,
      }),
  }),
  grantCheck<{ oid: string }>({
    kind: 'public-write-large-object',
    severity: 'refuse',
    sql: `SELECT m.oid::text AS oid
         FROM pg_largeobject_metadata m, aclexplode(m.lomacl) a
        WHERE a.grantee = 0 AND a.privilege_type = 'UPDATE' ORDER BY m.oid`,
    message: (lo) => `PUBLIC may write large object ${lo.oid} (UPDATE)`,
    fix: (lo) => revokeFromPublicStatement('UPDATE', { type: 'LARGE OBJECT', oid: Number(lo.oid) }),
  }),
  grantCheck<{ on: boolean }>({
    kind: 'large-object-compat-privileges',
    severity: 'refuse',
    sql: `SELECT current_setting('lo_compat_privileges')::boolean AS on`,
    isProblem: (row) => row.on,
    message: () =>
      'lo_compat_privileges is on: every role may read and write every large object (set it off in postgresql.conf)',
  }),
  grantCheck<Routine>({
    kind: 'public-create-large-object',
    severity: 'warn',
    sql: `SELECT p.oid::regprocedure::text AS signature
         FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
        WHERE p.oid IN (SELECT to_regprocedure(unnest($1::text[]))) AND a.grantee = 0 AND a.privilege_type = 'EXECUTE'
        ORDER BY 1`,
    params: () => [LARGE_OBJECT_CREATORS],
    message: (row) =>
      `PUBLIC may execute ${row.signature}: a role can store large objects of its own (dropped with the role)`,
    fix: (row) => revokeFromPublicStatement('EXECUTE', { type: 'ROUTINE', signature: `pg_catalog.${row.signature}` }),
  }),
];
