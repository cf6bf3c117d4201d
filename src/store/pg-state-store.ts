import pg from 'pg';
import { SqlStateStore, type SqlAdapter, type SqlExecutor, type StateStoreOptions } from './state-store.js';

/**
 * The state store on a Postgres server (the operator's, named by `HINTBOX_DATABASE_URL`), so
 * that several hintbox processes share pins and one audit trail.
 */

export interface PgStateStoreOptions extends StateStoreOptions {
  /** A libpq connection URL, e.g. `postgres://hintbox:…@db:5432/hintbox`. */
  url: string;
  /** Connections in the pool. Default 4: calls are recorded one statement at a time. */
  maxConnections?: number;
  /**
   * Called when an idle pooled connection fails (the server restarted, the network dropped).
   * The failing connection is discarded and the next query opens a new one. Default: ignored,
   * because the next query reports the problem anyway; without a listener pg's pool would
   * crash the process with an unhandled 'error' event.
   */
  onIdleError?: (error: Error) => void;
}

/** An {@link SqlAdapter} over a pg pool. */
export function pgAdapter(pool: pg.Pool): SqlAdapter {
  const run = async (client: pg.Pool | pg.PoolClient, sql: string, params: readonly unknown[] = []) =>
    (await client.query(sql, [...params])).rows as Record<string, unknown>[];
  return {
    query: (sql, params) => run(pool, sql, params),
    async transaction(work) {
      const client = await pool.connect();
      let broken: Error | undefined;
      try {
        await client.query('BEGIN');
        const tx: SqlExecutor = { query: (sql, params) => run(client, sql, params) };
        const result = await work(tx);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch((rollbackError: Error) => {
          broken = rollbackError;
        });
        throw error;
      } finally {
        // A connection whose ROLLBACK failed is in an unknown state: destroy it, don't reuse it.
        client.release(broken);
      }
    },
    close: () => pool.end(),
  };
}

/** Connects, brings the schema up to date and returns the store. */
export async function openPgStateStore(options: PgStateStoreOptions): Promise<SqlStateStore> {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.maxConnections ?? 4,
    application_name: 'hintbox',
  });
  pool.on('error', (error) => options.onIdleError?.(error));
  return SqlStateStore.open(pgAdapter(pool), options);
}
