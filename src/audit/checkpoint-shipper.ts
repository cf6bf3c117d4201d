import { closeSync, openSync, readSync, realpathSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { lineHash } from './audit-chain.js';
import { CHECKPOINTS_FILE } from './audit-checkpoint.js';
import { inTransaction } from './audit-sink-rows.js';
import { completeLines } from './complete-lines.js';

/**
 * The audit folder's signed checkpoints anchored in the Postgres sink: every whole line of
 * `checkpoints.jsonl` copied, exactly, into `hintbox.audit_checkpoints` (keyed by its SHA-256,
 * `ON CONFLICT DO NOTHING`), tagged with the folder it came from (host and real path: one
 * database may hold the folders of several hosts). The rows are what a person who can write
 * the folder cannot change: `hintbox audit verify --sink` holds the folder against them, and
 * finds a chain deleted together with its checkpoint lines, or the folder rolled back.
 *
 * Lines are shipped as they are, not judged: a line that is no checkpoint (a forger's) is an
 * anchored fact of its own, which verify reports. Keyed by hash rather than by (chain, n), so
 * that a line planted before a real checkpoint cannot take its place in the database. Where the
 * file was shipped to (`hintbox.audit_checkpoints_shipped`: the byte past the last line shipped,
 * and that line's start and hash) lets a new shipper go on from there; a file that no longer
 * has that line there (truncated, replaced, rolled back) is read again from its start.
 */

/** Where a folder's checkpoints file was shipped to. */
interface ShippedTo {
  /** The byte just past the last line shipped. */
  bytes: number;
  /** Where that line starts, and its hash (null before the first). */
  lastStart: number;
  last: string | null;
}

const START: ShippedTo = { bytes: 0, lastStart: 0, last: null };

/** A checkpoint line as the sink keeps it. */
export interface AnchoredLine {
  /** SHA-256 of the line as it was in the file. */
  hash: string;
  text: string;
}

/** The name a folder's checkpoints go by in the sink: this host and the folder's real path. */
export function auditFolderId(dir: string): string {
  let real: string;
  try {
    real = realpathSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    real = path.resolve(dir);
  }
  return `${os.hostname()}:${real}`;
}

export class CheckpointShipper {
  private readonly file: string;
  /** Named once the folder exists (its real path). */
  private folder: string | undefined;
  /** Known after the first pass: the database is asked once. */
  private at: ShippedTo | undefined;

  constructor(private readonly dir: string) {
    this.file = path.join(dir, CHECKPOINTS_FILE);
  }

  /** Ships the checkpoint lines the sink does not have yet; returns how many were read. Throws when the database fails. */
  async ship(pool: pg.Pool, batchLines: number): Promise<number> {
    let size: number;
    try {
      size = statSync(this.file).size;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw error;
    }
    const folder = (this.folder ??= auditFolderId(this.dir));
    this.at ??= await shippedTo(pool, folder);
    const from = size >= this.at.bytes && this.endsWithLast(this.at) ? this.at : START;
    if (from.bytes === size) return 0;
    let at = from;
    let batch: (AnchoredLine & { chain: string | null; n: number | null })[] = [];
    let count = 0;
    const flush = async (): Promise<void> => {
      await insertCheckpoints(await pool.connect(), folder, batch, at);
      this.at = at;
      count += batch.length;
      batch = [];
    };
    for (const { text, end } of completeLines(this.file, from.bytes, 0)) {
      const hash = lineHash(text);
      at = { bytes: end, lastStart: at.bytes, last: hash };
      batch.push({ hash, text: withoutNul(text), ...named(text) });
      if (batch.length >= batchLines) await flush();
    }
    if (batch.length > 0) await flush();
    return count;
  }

  /** The file still has the line last shipped where it was (not truncated, replaced or rolled back). */
  private endsWithLast(at: ShippedTo): boolean {
    if (at.last === null) return true;
    const length = at.bytes - at.lastStart - 1;
    if (length < 0 || length > 1 << 20) return false;
    const fd = openSync(this.file, 'r');
    try {
      const bytes = Buffer.alloc(length);
      return readSync(fd, bytes, 0, length, at.lastStart) === length && lineHash(bytes.toString('utf8')) === at.last;
    } finally {
      closeSync(fd);
    }
  }
}

/**
 * The checkpoint lines the sink at `url` holds of `folder` (see {@link auditFolderId}), by
 * chain and number; none when nothing was ever shipped there.
 */
export async function anchoredCheckpoints(url: string, folder: string, timeoutMs = 30_000): Promise<AnchoredLine[]> {
  const { default: pgModule } = await import('pg');
  const client = new pgModule.Client({
    connectionString: url,
    connectionTimeoutMillis: Math.min(timeoutMs, 5000),
    query_timeout: timeoutMs,
  });
  // The database ending the session fails the query in flight; unheard, its 'error' event would be uncaught.
  client.on('error', () => undefined);
  await client.connect();
  try {
    const table = await client.query<{ t: string | null }>(`SELECT to_regclass('hintbox.audit_checkpoints') AS t`);
    if (table.rows[0]?.t == null) return [];
    const rows = await client.query<AnchoredLine>(
      'SELECT hash, text FROM hintbox.audit_checkpoints WHERE folder = $1 ORDER BY chain, n NULLS LAST, hash',
      [folder],
    );
    return rows.rows;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function shippedTo(pool: pg.Pool, folder: string): Promise<ShippedTo> {
  const { rows } = await pool.query<{ bytes: string; last_start: string; last: string | null }>(
    'SELECT bytes, last_start, last FROM hintbox.audit_checkpoints_shipped WHERE folder = $1',
    [folder],
  );
  const row = rows[0];
  return row ? { bytes: Number(row.bytes), lastStart: Number(row.last_start), last: row.last } : START;
}

/** Inserts the lines and where the file was shipped to, in one transaction; releases the client. */
async function insertCheckpoints(
  client: pg.PoolClient,
  folder: string,
  lines: readonly (AnchoredLine & { chain: string | null; n: number | null })[],
  at: ShippedTo,
): Promise<void> {
  await inTransaction(client, async () => {
    await client.query(
      `INSERT INTO hintbox.audit_checkpoints (hash, folder, chain, n, text)
       SELECT h, $1, c, n, t FROM unnest($2::text[], $3::text[], $4::int[], $5::text[]) AS u(h, c, n, t)
       ON CONFLICT (hash) DO NOTHING`,
      [folder, lines.map((l) => l.hash), lines.map((l) => l.chain), lines.map((l) => l.n), lines.map((l) => l.text)],
    );
    // Backwards too: a file read again from its start (rolled back) is shipped from there on.
    await client.query(
      `INSERT INTO hintbox.audit_checkpoints_shipped (folder, bytes, last_start, last) VALUES ($1, $2, $3, $4)
       ON CONFLICT (folder) DO UPDATE SET bytes = EXCLUDED.bytes, last_start = EXCLUDED.last_start, last = EXCLUDED.last`,
      [folder, at.bytes, at.lastStart, at.last],
    );
  });
}

/** The chain and number a line names, for the sink's index; null where it names none (not a checkpoint). */
function named(text: string): { chain: string | null; n: number | null } {
  try {
    const { chain, n } = JSON.parse(text) as { chain?: unknown; n?: unknown };
    return {
      chain: typeof chain === 'string' ? withoutNul(chain) : null,
      n: Number.isInteger(n) && (n as number) >= 0 && (n as number) < 2 ** 31 ? (n as number) : null,
    };
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    return { chain: null, n: null };
  }
}

/** Postgres text cannot hold NUL; a line with a raw one is no checkpoint anyway (JSON escapes it). */
function withoutNul(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\ufffd') : text;
}
