import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import type { Logger } from '../util/logger.js';
import { auditFileName, lineHash } from './audit-chain.js';
import { listAuditChains, type AuditChainFiles } from './audit-reader.js';
import { AuditRecordError, parseAuditLine } from './audit-record.js';
import { LineSplitter } from './line-splitter.js';
import { monotonicMs } from '../util/clock.js';

/**
 * A sink for platforms: copies the audit log into Postgres (`HINTBOX_DATABASE_URL`), for
 * querying and keeping. The log, not the sink, is the record: the sink reads the files, never
 * the calls, so a database that is slow or down never slows or refuses a call; it only falls
 * behind, and catches up when the database is back.
 *
 * At least once and idempotent: each line is a row keyed by (chain, seq, line), inserted with
 * ON CONFLICT DO NOTHING, and where a chain got to (`hintbox.audit_shipped`: seq, line and the
 * byte offset past that line) is written in the same transaction as its lines, never backwards.
 * So shippers in several processes may ship the same chain at once: a line is numbered the same
 * by each (its place in its file), the second insert of it does nothing, and none is lost. A
 * line goes in only once it ends with its newline (a line being written is left for the next
 * pass; a torn one, never finished, is never shipped: see `audit-chain.ts`).
 *
 * Not wasteful: several hintbox processes share one folder, each with its own chain. A run's
 * sink (`chain`) ships its own chain every pass, reading from where the database says it got
 * to, and the folder's other chains only when it sweeps (its first pass, then every
 * `sweepEveryMs`): those of runs without a sink, killed, or stopped while the database was
 * down. A chain closed and shipped, or shipped up to the end of its last file, costs no read. Each row keeps the line's exact text (so the chain
 * can be verified from the database: `hash`, `prev`) and, for queries, the record as jsonb (with
 * NUL and lone surrogates, which jsonb cannot hold, as U+FFFD; the text keeps them escaped).
 */

const SCHEMA = `
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
ALTER TABLE hintbox.audit_shipped ADD COLUMN IF NOT EXISTS bytes bigint;`;

export interface PostgresAuditSinkOptions {
  url: string;
  /** The audit folder. */
  dir: string;
  log: Logger;
  /** Lines per transaction. Default 2000. */
  batchLines?: number;
  /** How long a connection or a statement may take before the pass fails, in ms. Default 30 000. */
  timeoutMs?: number;
  /**
   * The chain this process writes: shipped every pass, the others only in a sweep. Without it
   * (`hintbox audit ship`) every pass is a sweep.
   */
  chain?: string;
  /** How often a run's sink sweeps the folder's other chains, in ms. Default 600 000. */
  sweepEveryMs?: number;
}

/**
 * Where a chain got to: the last line shipped (seq and 1-based line; line 0: none of that
 * file) and the byte offset just past it in its file (null in rows of an older hintbox: the
 * file is then read from its start, skipping `line` lines).
 */
interface Progress {
  seq: number;
  line: number;
  bytes: number | null;
  head: string | null;
  closed: boolean;
}

interface Row {
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

export class PostgresAuditSink {
  /** pg is loaded only by a run that has a sink (dynamic import: not at every hintbox start). */
  private readonly pool: Promise<pg.Pool>;
  private schemaReady = false;
  private nextSweep = 0;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private failing = false;
  private stopped = false;
  /** When the last pass that succeeded began (monotonic ms): every line written before it is shipped. */
  private caughtUpAt: number | undefined;

  constructor(private readonly options: PostgresAuditSinkOptions) {
    this.pool = import('pg').then(({ default: pg }) => {
      const pool = new pg.Pool({
        connectionString: options.url,
        max: 1,
        connectionTimeoutMillis: Math.min(options.timeoutMs ?? 30_000, 5000),
        query_timeout: options.timeoutMs ?? 30_000,
        idleTimeoutMillis: 10_000,
        allowExitOnIdle: true,
      });
      // An idle connection that breaks (the database restarts) must not crash hintbox.
      pool.on('error', (error) => options.log.debug(`audit sink: ${error.message}`));
      return pool;
    });
  }

  /**
   * One pass: the lines not in the database yet of this process's chain, or (in a sweep, or
   * without `chain`) of every chain of the folder. Throws when the database fails.
   */
  async shipOnce(options: { sweep?: boolean } = {}): Promise<{ lines: number }> {
    if (!this.schemaReady) {
      await (await this.pool).query(SCHEMA);
      this.schemaReady = true;
    }
    const own = this.options.chain;
    const sweep = own === undefined || (options.sweep ?? monotonicMs() >= this.nextSweep);
    const listed = sweep ? listAuditChains(this.options.dir) : [];
    const names = listed.map((c) => c.chain);
    if (own !== undefined && !names.includes(own)) names.push(own);
    const shipped = await (
      await this.pool
    ).query<Omit<Progress, 'bytes'> & { chain: string; bytes: string | null }>(
      'SELECT chain, seq, line, bytes, head, closed FROM hintbox.audit_shipped WHERE chain = ANY($1)',
      [names],
    );
    const progress = new Map<string, Progress>(
      shipped.rows.map((r) => [r.chain, { ...r, bytes: r.bytes === null ? null : Number(r.bytes) }]),
    );
    const chains = listed.filter((c) => c.chain !== own);
    // Its own chain by name, from the file it got to: no listing of the folder every second.
    if (own !== undefined) chains.push(chainFiles(this.options.dir, own, progress.get(own)?.seq ?? 0));
    let lines = 0;
    for (const chain of chains) {
      const at = progress.get(chain.chain);
      if (at?.closed || (at && shippedToTheEnd(chain, at))) continue;
      lines += await this.shipChain(
        chain,
        at ?? { seq: chain.files[0]?.seq ?? 0, line: 0, bytes: 0, head: null, closed: false },
      );
    }
    if (sweep) this.nextSweep = monotonicMs() + (this.options.sweepEveryMs ?? 600_000);
    return { lines };
  }

  /** Ships in the background every `intervalMs`; a failing database is logged once, then retried with backoff. */
  start(intervalMs = 1000): void {
    let delay = intervalMs;
    this.caughtUpAt ??= monotonicMs();
    const tick = (): void => {
      if (this.stopped) return;
      const began = monotonicMs();
      this.running = this.shipOnce().then(
        () => {
          this.caughtUpAt = began;
          if (this.failing) this.options.log.info('audit sink: the database answers again, catching up');
          this.failing = false;
          delay = intervalMs;
        },
        (error: Error) => {
          if (!this.failing) {
            this.options.log.warn(
              `audit sink: cannot ship the audit log to Postgres (${error.message}); the log is the record, retrying`,
            );
          }
          this.failing = true;
          delay = Math.min(delay * 2, 30_000);
        },
      );
      void this.running.finally(() => {
        if (!this.stopped) {
          this.timer = setTimeout(tick, delay);
          this.timer.unref();
        }
      });
    };
    tick();
  }

  /** Seconds since the last pass that succeeded began (or the loop started): no line older is unshipped. */
  lagSeconds(): number {
    return Math.max(0, monotonicMs() - (this.caughtUpAt ?? monotonicMs())) / 1000;
  }

  /** Stops the loop; a last pass gets up to `timeoutMs`. Never throws. */
  async stop(timeoutMs = 2000): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    const last = (async () => {
      await this.running?.catch(() => undefined);
      await this.shipOnce({ sweep: false }).catch((error: Error) =>
        this.options.log.warn(`audit sink: the last lines stay in the log only for now: ${error.message}`),
      );
    })();
    await Promise.race([last, new Promise((r) => setTimeout(r, timeoutMs).unref())]);
    await (await this.pool).end().catch(() => undefined);
  }

  /** Closes the connection (after {@link shipOnce} alone, without the loop). */
  async close(): Promise<void> {
    this.stopped = true;
    await (await this.pool).end().catch(() => undefined);
  }

  private async shipChain(chain: AuditChainFiles, from: Progress): Promise<number> {
    // `offset` -1: not known (a row of an older hintbox), read from the start skipping `line` lines.
    const cursor = { ...from, offset: from.bytes ?? -1 };
    let total = 0;
    let batch: Row[] = [];
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      await this.insert(chain.chain, batch, cursor);
      total += batch.length;
      batch = [];
    };
    for (const { file, seq } of chain.files) {
      if (seq < cursor.seq) continue;
      if (seq > cursor.seq) {
        cursor.seq = seq;
        cursor.line = 0;
        cursor.offset = 0;
      }
      for (const { text, end, skip } of completeLines(file, cursor.offset, cursor.line)) {
        if (skip) {
          cursor.offset = end;
          continue;
        }
        let line;
        try {
          line = parseAuditLine(text);
        } catch (error) {
          // Not a record (see hintbox audit verify): shipped as text, so that the database
          // shows the same break; its fields are what can be read of it.
          if (!(error instanceof AuditRecordError)) throw error;
          line = undefined;
        }
        cursor.line++;
        cursor.offset = end;
        const hash = lineHash(text);
        cursor.head = hash;
        if (line?.type === 'log.close') cursor.closed = true;
        batch.push({
          chain: chain.chain,
          seq,
          line: cursor.line,
          hash,
          prev: line?.prev ?? null,
          id: line?.id ?? `${chain.chain}:${seq}:${cursor.line}`,
          time: line?.time ?? new Date(0).toISOString(),
          type: line?.type ?? 'invalid',
          text,
          record: line ? queryableJson(line) : JSON.stringify({ invalid: true }),
        });
        if (batch.length >= (this.options.batchLines ?? 2000)) await flush();
      }
    }
    await flush();
    return total;
  }

  private async insert(chain: string, rows: readonly Row[], cursor: Progress & { offset: number }): Promise<void> {
    const column = <K extends keyof Row>(key: K): Row[K][] => rows.map((r) => r[key]);
    const client = await (await this.pool).connect();
    try {
      await client.query('BEGIN');
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
        [chain, cursor.seq, cursor.line, cursor.offset, cursor.head, cursor.closed],
      );
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }
}

/** One chain's files from `fromSeq` on, found by name (a writer leaves no gap in its numbering). */
function chainFiles(dir: string, chain: string, fromSeq: number): AuditChainFiles {
  const files: AuditChainFiles['files'] = [];
  for (let seq = fromSeq; ; seq++) {
    const file = path.join(dir, auditFileName(chain, seq));
    if (!existsSync(file)) break;
    files.push({ file, seq });
  }
  return { chain, files };
}

/** The database has the chain up to the end of its last file: nothing to read. */
function shippedToTheEnd(chain: AuditChainFiles, at: Progress): boolean {
  const last = chain.files.at(-1);
  if (!last || last.seq !== at.seq || at.bytes === null) return false;
  try {
    return statSync(last.file).size === at.bytes;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}

// eslint-disable-next-line no-control-regex -- NUL is what is looked for
const NOT_FOR_JSONB = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** The record as jsonb can hold it: NUL and lone surrogates in strings as U+FFFD. */
function queryableJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'string' ? v.replace(NOT_FOR_JSONB, '\ufffd') : v));
}

/**
 * The lines of a file that end with a newline, from `offset` (a byte offset of a line start;
 * -1: from the start, skipping the first `skipLines`), each with the offset just past it.
 */
function* completeLines(
  file: string,
  offset: number,
  skipLines: number,
): Generator<{ text: string; end: number; skip: boolean }> {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  try {
    let position = offset < 0 ? 0 : offset;
    let end = position;
    let skip = offset < 0 ? skipLines : 0;
    const chunk = Buffer.alloc(1 << 20);
    const splitter = new LineSplitter();
    for (;;) {
      const read = readSync(fd, chunk, 0, chunk.length, position);
      if (read === 0) return; // an unterminated tail waits for the next pass
      position += read;
      for (const { line, bytes } of splitter.push(chunk.subarray(0, read))) {
        end += bytes;
        if (skip > 0) {
          skip--;
          yield { text: '', end, skip: true };
        } else yield { text: line.toString('utf8'), end, skip: false };
      }
    }
  } finally {
    closeSync(fd);
  }
}
