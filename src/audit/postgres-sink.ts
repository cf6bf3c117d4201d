import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import type { Logger } from '../util/logger.js';
import { auditFileName, lineHash } from './audit-chain.js';
import { listAuditChains, type AuditChainFiles } from './audit-reader.js';
import { AuditRecordError, parseAuditLine } from './audit-record.js';
import { AUDIT_SINK_SCHEMA, insertRows, refusedByDatabase, type Progress, type Row } from './audit-sink-rows.js';
import { CheckpointShipper } from './checkpoint-shipper.js';
import { completeLines } from './complete-lines.js';
import { jsonbString, jsonbText } from './jsonb-text.js';
import { monotonicMs } from '../util/clock.js';
import { isoTime } from '../util/iso-time.js';

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
 * down. A chain closed and shipped, or shipped up to the end of its last file, costs no read.
 *
 * Any line the writer produces ships: each row keeps the line's exact text (so the chain can be
 * verified from the database: `hash` is the SHA-256 of `text`, `prev` the hash of the row before)
 * and, for queries, the record as jsonb with NUL and lone surrogates, which jsonb cannot hold,
 * as U+FFFD in keys and values (`jsonb-text.ts`; the text keeps them escaped). A line the
 * database still refuses (a damaged file: a raw NUL byte) holds back its chain only: the lines
 * before it are shipped, it is reported with its file and line, and its chain is tried again
 * after `retryHeldMs` (doubling), while the other chains ship on.
 *
 * Every pass also ships the folder's signed checkpoints (`checkpoint-shipper.ts`), after the
 * lines they cover: the anchor that `hintbox audit verify --sink` holds the folder against.
 */

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
  /** When a chain held at a line the database refuses is tried again, in ms (doubling up to an hour). Default 60 000. */
  retryHeldMs?: number;
}

/** A line the database refused while it answered: its chain is held there. */
export interface HeldLine {
  chain: string;
  file: string;
  /** 1-based. */
  line: number;
  error: string;
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
  /** Chains held at a line the database refused, until when (monotonic ms) and for how long next. */
  private readonly held = new Map<string, HeldLine & { until: number; waitMs: number }>();
  private readonly checkpoints: CheckpointShipper;

  constructor(private readonly options: PostgresAuditSinkOptions) {
    this.checkpoints = new CheckpointShipper(options.dir);
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
   * without `chain`) of every chain of the folder. Throws when the database fails; a line it
   * refuses holds back its own chain only (`held`: those held now, each reported once). Then
   * the checkpoint lines the database does not have yet (`checkpoints`).
   */
  async shipOnce(options: { sweep?: boolean } = {}): Promise<{ lines: number; checkpoints: number; held: HeldLine[] }> {
    if (!this.schemaReady) {
      await (await this.pool).query(AUDIT_SINK_SCHEMA);
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
      const held = this.held.get(chain.chain);
      if (held && monotonicMs() < held.until) continue; // not hot: tried again once its wait is over
      const result = await this.shipChain(
        chain,
        at ?? { seq: chain.files[0]?.seq ?? 0, line: 0, bytes: 0, head: null, closed: false },
      );
      lines += result.lines;
      if (result.held) this.hold(result.held);
      else this.held.delete(chain.chain);
    }
    if (sweep) this.nextSweep = monotonicMs() + (this.options.sweepEveryMs ?? 600_000);
    const checkpoints = await this.checkpoints.ship(await this.pool, this.options.batchLines ?? 2000);
    return {
      lines,
      checkpoints,
      held: [...this.held.values()].map(({ chain, file, line, error }) => ({ chain, file, line, error })),
    };
  }

  /** Holds a chain at a line the database refused: reported once per line, tried again later, waiting longer each time. */
  private hold(line: HeldLine): void {
    const before = this.held.get(line.chain);
    const first = this.options.retryHeldMs ?? 60_000;
    const waitMs = before ? Math.min(before.waitMs * 2, 3_600_000) : first;
    if (before?.file !== line.file || before.line !== line.line) {
      this.options.log.warn(
        `audit sink: ${line.file}:${line.line} cannot be shipped to Postgres (${line.error}): chain ${line.chain} waits at that line ` +
          `(the lines before it are shipped; other chains ship on), tried again in ${Math.round(waitMs / 1000)} s; the log is the record`,
      );
    }
    this.held.set(line.chain, { ...line, until: monotonicMs() + waitMs, waitMs });
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

  private async shipChain(chain: AuditChainFiles, from: Progress): Promise<{ lines: number; held?: HeldLine }> {
    // `offset` -1: not known (a row of an older hintbox), read from the start skipping `line` lines.
    const cursor = { ...from, offset: from.bytes ?? -1 };
    const done = { lines: 0 };
    let batch: Row[] = [];
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
        cursor.head = lineHash(text);
        if (line?.type === 'log.close') cursor.closed = true;
        const time = line && !Number.isNaN(Date.parse(line.time)) ? line.time : isoTime(0);
        batch.push({
          file,
          end: { ...cursor },
          chain: chain.chain,
          seq,
          line: cursor.line,
          hash: cursor.head,
          prev: line?.prev ?? null,
          id: jsonbString(line?.id ?? `${chain.chain}:${seq}:${cursor.line}`),
          time,
          type: line?.type ?? 'invalid',
          text,
          record: line ? jsonbText(line) : JSON.stringify({ invalid: true }),
        });
        if (batch.length >= (this.options.batchLines ?? 2000)) {
          const held = await this.insertOrFind(batch, done);
          if (held) return { lines: done.lines, held };
          batch = [];
        }
      }
    }
    const held = batch.length > 0 ? await this.insertOrFind(batch, done) : undefined;
    return held ? { lines: done.lines, held } : { lines: done.lines };
  }

  /**
   * Inserts the rows; when the database refuses them while it answers, inserts those before the
   * first it refuses (halving) and names that one. Throws when the database does not answer.
   */
  private async insertOrFind(rows: readonly Row[], done: { lines: number }): Promise<HeldLine | undefined> {
    // A database that does not answer fails the pass here, before any halving.
    const client = await (await this.pool).connect();
    try {
      await insertRows(client, rows);
      done.lines += rows.length;
      return undefined;
    } catch (error) {
      // The rows' fault only if the database read them and refused them, and answers otherwise.
      if (!refusedByDatabase(error)) throw error;
      await (await this.pool).query('SELECT 1').catch(() => Promise.reject(error as Error));
      if (rows.length === 1) {
        const [row] = rows as [Row];
        return { chain: row.chain, file: row.file, line: row.line, error: (error as Error).message };
      }
      const half = Math.ceil(rows.length / 2);
      return (await this.insertOrFind(rows.slice(0, half), done)) ?? (await this.insertOrFind(rows.slice(half), done));
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
