import type pg from 'pg';

/** The Postgres sink's tables and how a batch of rows goes in (see `postgres-sink.ts`). */

/** The sink's tables (idempotent): the log's lines, and the folder's signed checkpoints (`checkpoint-shipper.ts`). */
export const AUDIT_SINK_SCHEMA = `
CREATE SCHEMA IF NOT EXISTS hintbox;
CREATE TABLE IF NOT EXISTS hintbox.audit_log (
  chain text NOT NULL,
  seq int NOT NULL,
  line int NOT NULL,
  hash text NOT NULL,
  prev text,
  id text NOT NULL,
  time timestamptz NOT NULL,
  type text NOT NULL,
  text text NOT NULL,
  record jsonb NOT NULL,
  PRIMARY KEY (chain, seq, line)
);
CREATE INDEX IF NOT EXISTS audit_log_time ON hintbox.audit_log (time);
CREATE TABLE IF NOT EXISTS hintbox.audit_shipped (
  chain text PRIMARY KEY,
  seq int NOT NULL,
  line int NOT NULL,
  head text,
  closed boolean NOT NULL DEFAULT false
);
ALTER TABLE hintbox.audit_shipped ADD COLUMN IF NOT EXISTS bytes bigint;
CREATE TABLE IF NOT EXISTS hintbox.audit_checkpoints (
  hash text PRIMARY KEY,
  folder text NOT NULL,
  chain text,
  n int,
  text text NOT NULL,
  shipped timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS audit_checkpoints_folder ON hintbox.audit_checkpoints (folder, chain, n);
CREATE TABLE IF NOT EXISTS hintbox.audit_checkpoints_shipped (
  folder text PRIMARY KEY,
  bytes bigint NOT NULL,
  last_start bigint NOT NULL,
  last text
);`;

/**
 * Where a chain got to: the last line shipped (seq and 1-based line; line 0: none of that
 * file) and the byte offset just past it in its file (null in rows of an older hintbox: the
 * file is then read from its start, skipping `line` lines).
 */
export interface Progress {
  seq: number;
  line: number;
  bytes: number | null;
  head: string | null;
  closed: boolean;
}

/** A row, with where its file is and where its chain got to once it is in (`audit_shipped`). */
export interface Row {
  file: string;
  end: Progress & { offset: number };
  chain: string;
  seq: number;
  line: number;
  hash: string;
  prev: string | null;
  id: string;
  time: string;
  type: string;
  text: string;
  record: string;
}

/** Inserts rows of one chain and where it got to, in one transaction; releases the client (however it ends). */
export async function insertRows(client: pg.PoolClient, rows: readonly Row[]): Promise<void> {
  const column = <K extends keyof Row>(key: K): Row[K][] => rows.map((r) => r[key]);
  const { chain, end } = rows.at(-1) as Row;
  await inTransaction(client, async () => {
    await client.query(
      `INSERT INTO hintbox.audit_log (chain, seq, line, hash, prev, id, time, type, text, record)
       SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::text[], $5::text[], $6::text[],
         $7::timestamptz[], $8::text[], $9::text[], $10::jsonb[])
       ON CONFLICT (chain, seq, line) DO NOTHING`,
      [
        column('chain'),
        column('seq'),
        column('line'),
        column('hash'),
        column('prev'),
        column('id'),
        column('time'),
        column('type'),
        column('text'),
        column('record'),
      ],
    );
    // Never backwards: another process may have shipped further meanwhile.
    await client.query(
      `INSERT INTO hintbox.audit_shipped AS s (chain, seq, line, bytes, head, closed) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (chain) DO UPDATE SET seq = EXCLUDED.seq, line = EXCLUDED.line, bytes = EXCLUDED.bytes,
         head = EXCLUDED.head, closed = EXCLUDED.closed
       WHERE (EXCLUDED.seq, EXCLUDED.line) > (s.seq, s.line)`,
      [chain, end.seq, end.line, end.offset, end.head, end.closed],
    );
  });
}

/**
 * Runs `body` in one transaction on `client` (rolled back when it throws); releases the client
 * however it ends, dropping it from the pool when its connection broke.
 */
export async function inTransaction(client: pg.PoolClient, body: () => Promise<void>): Promise<void> {
  // A client checked out of the pool has no 'error' listener of the pool's: the database ending
  // its session (a restart, pg_terminate_backend) fails the query in flight and then emits
  // 'error' on the client, which without a listener is an uncaught exception that stops serve.
  let broken: Error | undefined;
  const onError = (error: Error): void => void (broken ??= error);
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    await body();
    await client.query('COMMIT');
  } catch (error) {
    if (!broken) await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release(broken);
    client.off('error', onError);
  }
}

/**
 * Whether an insert's error is the rows' fault (the database read them and refused them), as
 * opposed to the database or the connection failing under them. Only an error with a SQLSTATE
 * outside the classes of connection loss (08), resources (53), operator intervention (57: the
 * server shutting down or ending the session, 57P01), system errors (58), a transaction to
 * retry (40) and internal errors (XX) is the rows'; an error without one (the socket closed,
 * "Connection terminated unexpectedly") is the database's. A batch cut by a restart is then
 * tried again whole at the next pass instead of being split and its line held for a minute.
 */
export function refusedByDatabase(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !/^(08|40|53|57|58|XX)/.test(code);
}
