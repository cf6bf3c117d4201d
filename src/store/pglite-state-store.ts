import { existsSync } from 'node:fs';
import { mkdir, open, readFile, unlink } from 'node:fs/promises';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { SqlStateStore, StateStoreError, type SqlAdapter, type StateStoreOptions } from './state-store.js';
import { isProcessAlive } from '../util/process-alive.js';
import { STATE_LOCK_FILE } from './state-daemon.js';

/**
 * The state store embedded in the hintbox process: PGlite (Postgres compiled to WebAssembly)
 * with its data in a local folder, so that `hintbox run` needs no database server. Same SQL,
 * same schema and migrations as the Postgres store.
 *
 * PGlite is single-process and does not lock its data folder: two instances on one folder
 * silently diverge and can corrupt it. So the folder is locked (a lock file with the owner's
 * pid) for as long as the store is open; a second open fails with {@link StateStoreLockedError}.
 * Concurrent hintbox processes need the Postgres store (`HINTBOX_DATABASE_URL`).
 */

/** The default state folder, relative to the working directory. */
export const DEFAULT_STATE_DIR = path.join('.hintbox', 'state');

export interface PgliteStateStoreOptions extends StateStoreOptions {
  /** The state folder; created if missing. The database is in `pgdata/` inside it. */
  dir: string;
}

/** The state folder is in use by another open store. */
export class StateStoreLockedError extends StateStoreError {
  constructor(
    readonly lockFile: string,
    readonly pid: number,
  ) {
    super(
      `the state folder is in use by process ${pid} (lock ${lockFile}); ` +
        'stop it, or set HINTBOX_DATABASE_URL to share a Postgres database between hintbox processes',
    );
    this.name = 'StateStoreLockedError';
  }
}

/**
 * Takes the folder's lock: creates the lock file exclusively, or takes over one left by a
 * process that is gone (a crash). Returns the release function.
 */
async function lockFolder(lockFile: string): Promise<() => Promise<void>> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(lockFile, 'wx', 0o600);
      await handle.writeFile(`${process.pid}\n`);
      await handle.close();
      return async () => {
        await unlink(lockFile).catch(() => undefined);
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const pid = Number.parseInt(await readFile(lockFile, 'utf8').catch(() => ''), 10);
    if (Number.isInteger(pid) && pid > 0 && isProcessAlive(pid)) throw new StateStoreLockedError(lockFile, pid);
    // Stale (its owner died, or it is unreadable): remove it and try once more. If another
    // process takes it in between, the exclusive create above fails again and we report it.
    await unlink(lockFile).catch(() => undefined);
  }
  const pid = Number.parseInt(await readFile(lockFile, 'utf8').catch(() => ''), 10);
  throw new StateStoreLockedError(lockFile, Number.isInteger(pid) ? pid : -1);
}

/** An {@link SqlAdapter} over a PGlite instance. */
export function pgliteAdapter(db: PGlite): SqlAdapter {
  const run = async (client: SqlLike, sql: string, params: readonly unknown[] = []) =>
    (await client.query<Record<string, unknown>>(sql, [...params])).rows;
  return {
    query: (sql, params) => run(db, sql, params),
    transaction: (work) => db.transaction((tx) => work({ query: (sql, params) => run(tx, sql, params) })),
    // PGlite feeds COPY from a blob it shows the server as the file /dev/blob.
    copyRows: async (table, columns, data) => {
      await db.query(`COPY ${table} (${columns.join(', ')}) FROM '/dev/blob'`, [], { blob: new Blob([data]) });
    },
    close: () => db.close(),
  };
}

/** What PGlite and its transactions have in common. */
interface SqlLike {
  query<T>(sql: string, params?: unknown[]): Promise<{ rows: T[] }>;
}

/** Whether the state folder has a database already (it is created at the first open otherwise). */
export function pgliteDataExists(folder: string): boolean {
  return existsSync(path.join(folder, 'pgdata', 'PG_VERSION'));
}

/** Locks the folder, opens (or creates) the database, brings the schema up to date. */
export async function openPgliteStateStore(options: PgliteStateStoreOptions): Promise<SqlStateStore> {
  const { adapter, release } = await openLockedPglite(options.dir);
  return SqlStateStore.open(adapter, options, release);
}

/**
 * Locks the folder and opens (or creates) its database; for the state daemon, which serves the
 * adapter to other processes. Closing the adapter does not release the lock: call `release`.
 */
export async function openLockedPglite(folder: string): Promise<{ adapter: SqlAdapter; release: () => Promise<void> }> {
  const dir = path.resolve(folder);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const release = await lockFolder(path.join(dir, STATE_LOCK_FILE));
  try {
    return { adapter: pgliteAdapter(await PGlite.create(path.join(dir, 'pgdata'))), release };
  } catch (error) {
    await release();
    throw error;
  }
}
