import type { SchemaInfo, SqlAdapter } from './state-store.js';

/**
 * The state store's schema, as ordered migrations. The same statements run on Postgres 15+
 * (through pg) and on PGlite: plain SQL, no extensions, one statement per string (PGlite's
 * `query` takes one statement at a time, and that keeps the two paths identical).
 *
 * Everything lives in the `hintbox` schema so that a database shared with other software
 * (the operator's `HINTBOX_DATABASE_URL`) gets no generic table names such as
 * `schema_migrations` in `public`. Never edit a migration that has shipped: add the next one.
 */

export interface Migration {
  /** 1, 2, 3, …: applied in order, each once. */
  version: number;
  name: string;
  statements: readonly string[];
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'pins and audit trail',
    statements: [
      `CREATE TABLE hintbox.tool_pins (
        server text NOT NULL,
        tool text NOT NULL,
        hash text NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
        -- json, not jsonb: the definition is kept as the exact text that was approved.
        definition json NOT NULL,
        approved_at timestamptz NOT NULL,
        approved_by text NOT NULL,
        PRIMARY KEY (server, tool)
      )`,
      `CREATE TABLE hintbox.audit_calls (
        id text PRIMARY KEY,
        -- Order of recording, to order calls recorded at the same instant.
        seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        started_at timestamptz NOT NULL,
        session text NOT NULL,
        server text NOT NULL,
        tool text NOT NULL,
        tags text[] NOT NULL,
        claimed_tags text[] NOT NULL,
        claimed_hints json NOT NULL,
        effective_hints json NOT NULL,
        sandbox text,
        decision text NOT NULL,
        decided_by text NOT NULL,
        -- json, not jsonb: jsonb would reorder keys, drop duplicate keys and refuse \\u0000;
        -- the audit trail keeps the arguments exactly as they were sent.
        arguments json,
        pin_hash text,
        outcome text,
        detail text,
        hint_violation text,
        attempts integer,
        ended_at timestamptz,
        CONSTRAINT audit_calls_decided_by CHECK (
          (decision = 'allowed' AND decided_by IN ('auto', 'rule', 'pre-approval', 'person'))
          OR (decision = 'denied' AND decided_by IN ('rule', 'person', 'timeout', 'no-elicitation'))
          OR (decision = 'blocked' AND decided_by = 'pin')
        ),
        CONSTRAINT audit_calls_outcome CHECK (
          outcome IS NULL
          OR (outcome IN ('ok', 'tool-error', 'error', 'cancelled', 'sandbox-died') AND decision = 'allowed')
          OR (outcome = 'not-run' AND decision <> 'allowed')
        ),
        CONSTRAINT audit_calls_ended CHECK ((outcome IS NULL) = (ended_at IS NULL) AND (outcome IS NULL) = (attempts IS NULL)),
        CONSTRAINT audit_calls_attempts CHECK (attempts IS NULL OR attempts >= 1)
      )`,
      `CREATE INDEX audit_calls_recent ON hintbox.audit_calls (started_at DESC, seq DESC)`,
      `CREATE INDEX audit_calls_server_tool ON hintbox.audit_calls (server, tool, started_at DESC)`,
      `CREATE INDEX audit_calls_session ON hintbox.audit_calls (session)`,
    ],
  },
];

/**
 * Serializes concurrent migrations (two hintbox processes starting on one Postgres): a
 * transaction-level advisory lock, released at commit. The number is arbitrary but fixed
 * ("hint" in ASCII).
 */
const MIGRATION_LOCK = 0x68696e74;

/** Thrown when the database's schema is newer than this hintbox knows. */
export class SchemaTooNewError extends Error {
  constructor(
    readonly found: number,
    readonly known: number,
  ) {
    super(`the state store's schema is version ${found}, newer than this hintbox knows (${known}); upgrade hintbox`);
    this.name = 'SchemaTooNewError';
  }
}

/**
 * Brings the schema up to date, all in one transaction (Postgres DDL is transactional: a
 * failing migration leaves nothing behind). Safe to run on every open, and concurrently.
 */
export async function migrate(db: SqlAdapter, migrations: readonly Migration[] = MIGRATIONS): Promise<SchemaInfo> {
  const known = migrations.reduce((max, m) => Math.max(max, m.version), 0);
  return db.transaction(async (tx) => {
    await tx.query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
    // Looked up first rather than `CREATE … IF NOT EXISTS`: that checks the CREATE privilege
    // even when the object exists, and a least-privileged role on a prepared database has none.
    const [exists] = await tx.query(
      `SELECT to_regnamespace('hintbox') IS NOT NULL AS schema,
              to_regclass('hintbox.schema_migrations') IS NOT NULL AS migrations`,
    );
    if (exists?.schema !== true) await tx.query('CREATE SCHEMA hintbox');
    if (exists?.migrations !== true) {
      await tx.query(
        `CREATE TABLE hintbox.schema_migrations (
          version integer PRIMARY KEY,
          name text NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`,
      );
    }
    const rows = await tx.query('SELECT version FROM hintbox.schema_migrations');
    const applied = new Set(rows.map((r) => Number(r.version)));
    const found = Math.max(0, ...applied);
    if (found > known) throw new SchemaTooNewError(found, known);

    const appliedNow: number[] = [];
    for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
      if (applied.has(migration.version)) continue;
      for (const statement of migration.statements) await tx.query(statement);
      await tx.query('INSERT INTO hintbox.schema_migrations (version, name) VALUES ($1::int, $2::text)', [
        migration.version,
        migration.name,
      ]);
      appliedNow.push(migration.version);
    }
    return { version: Math.max(found, ...appliedNow), appliedNow };
  });
}
