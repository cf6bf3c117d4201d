import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  closeSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../util/logger.js';
import { isProcessAlive } from '../util/process-alive.js';
import {
  auditIntentRow,
  auditOutcomeRow,
  checkAuditBatchEntry,
  contradictionMessage,
  outcomeFitsDecision,
  randomIds,
  StateStoreError,
  systemClock,
  type AuditBatchEntry,
  type AuditDecision,
  type AuditIntent,
  type AuditLog,
  type AuditOutcomeReport,
  type AuditQuery,
  type AuditRecord,
  type BatchAuditLog,
  type Clock,
  type IdGenerator,
  type StateStore,
} from './state-store.js';
import { delay } from '../util/delay.js';
import { capText, textDigest } from '../util/cap-text.js';

/**
 * A write-ahead journal in front of the state store's audit trail.
 *
 * The audit promise: a call's intent is durably recorded before the call is forwarded; a crash
 * between intent and outcome leaves a record without an outcome; if the audit cannot be
 * written the call is refused; no record is lost. A round trip to the store per call (an
 * INSERT through the state daemon) costs about a millisecond and serialises every call, so
 * the journal keeps the promise locally instead:
 *
 * - `recordIntent` checks the intent as the store would (`auditIntentRow`), fixes its id and
 *   time, and appends one NDJSON line to this process's journal file with a synchronous
 *   `write` on an `O_APPEND` descriptor, before it returns. The line is then in the page
 *   cache: it survives hintbox crashing or being killed (SIGKILL), not the machine losing
 *   power: there is no fsync (a sync per call would cost what the journal saves). That is the
 *   embedded store's durability too; the operator's Postgres syncs its commits, so there a
 *   power loss can take the records of the last milliseconds that were only in the journal.
 *   A failed append throws, and the guard refuses the call.
 * - Entries are queued and written to the store by a flusher, in batches of one statement
 *   each (`recordBatch`, idempotent), starting `flushDelayMs` (20 ms) after something is
 *   queued, unless a batch is in flight; what arrives while a batch is in flight waits for the
 *   next delay too (unless a full batch is waiting, the journal is closing, or a reader waits).
 *   The wait gathers many calls into one batch: each statement costs the state daemon CPU that
 *   the sandboxes and hintbox share, whatever its size. The intent of a call still running
 *   waits for its outcome (up to `holdOpenMs`, 1 s) so that the two go in as one record, not
 *   a record and then an update of it. When the store has everything, the file is truncated
 *   to nothing.
 * - When a batch fails, the journal logs it once and enters the "store failing" state: new
 *   intents are refused (fail closed) while outcomes are still journaled, and the batch is
 *   retried with backoff until it succeeds. Nothing queued is dropped.
 * - No single record can stop the trail: each retry takes half the entries of the batch that
 *   failed, so the entries before a record the store refuses go in, and that record ends up
 *   alone. When it fails alone while the store still answers a read, the store is refusing that
 *   record, not failing: it is written in a reduced form (no arguments, tags or free text: a
 *   note with the error and the size and SHA-256 of the whole entry instead) and kept whole in
 *   a `.refused` file beside the journal, and the trail goes on. If the store refuses even the
 *   reduced form, it is the store that fails (a full disk refuses every write): fail closed.
 * - `close()` flushes (waiting at most a few seconds) and removes the file; what the store did
 *   not take stays in the file, and is said so.
 * - The files of processes that died (a crash, SIGKILL) are replayed into the store by the
 *   next `hintbox run` or `hintbox audit` of this host ({@link replayJournals}), then removed.
 *
 * Reads (`get`, `query`) go to the store, after what this process recorded so far is flushed;
 * another process reading the trail may miss the last few tens of milliseconds of a live
 * session, and the calls still running for up to a second (they are in the journal).
 */

/** A journal file: `<host>.<pid>.<random>.ndjson`, the host URI-encoded. */
const JOURNAL_FILE = /^(.+)\.(\d+)\.([0-9a-f]{16})\.ndjson$/;

/** At most this many entries, or about this many bytes, per statement to the store. */
const MAX_BATCH_ENTRIES = 1000;
const MAX_BATCH_BYTES = 16 * 1024 * 1024;
/** More queued than this: a new intent waits for the store to catch up (bounded memory). */
const MAX_QUEUED = 10_000;
/**
 * A file this large whose entries never all reach the store at once is replaced by a fresh one
 * (under steady load that is the rule: the intents of running calls wait for their outcomes).
 * It bounds what a replay after a crash writes again.
 */
const ROTATE_BYTES = 1024 * 1024;

/** Journal files this process writes (or wrote and has not yet removed), by full path. */
const ownFiles = new Set<string>();

function journalFileName(host: string, pid: number): string {
  return `${encodeURIComponent(host)}.${pid}.${randomBytes(8).toString('hex')}.ndjson`;
}

/** The owner of a journal file, from its name; undefined for a name that is not a journal's. */
export function journalOwner(file: string): { host: string; pid: number } | undefined {
  const match = JOURNAL_FILE.exec(path.basename(file));
  if (!match) return undefined;
  try {
    return { host: decodeURIComponent(match[1]!), pid: Number(match[2]) };
  } catch {
    return undefined;
  }
}

export interface AuditJournalOptions {
  /** The store's audit trail: where the entries end up, and where reads go. */
  store: BatchAuditLog;
  /** The journal folder, created (0700) if missing. */
  dir: string;
  log: Logger;
  /** Times of intents and outcomes. Default: the system clock. */
  clock?: Clock;
  /** Ids of records. Default: random UUIDs. */
  ids?: IdGenerator;
  /** How long `close()` waits for the store to take everything. Default 5 s. */
  closeTimeoutMs?: number;
  /** Wait before the first retry of a failed batch; doubles up to `maxRetryMs`. Default 100 ms, 5 s. */
  retryMs?: number;
  maxRetryMs?: number;
  /** How long queued entries wait to be batched with later ones. Default 20 ms. */
  flushDelayMs?: number;
  /**
   * How long the intent of a call still running waits for its outcome, to go to the store in
   * one record with it (one row written once, instead of a row and then an update of it).
   * Default 1000 ms; a call that runs longer has its intent written alone.
   */
  holdOpenMs?: number;
}

interface Queued {
  entry: AuditBatchEntry;
  /** Its line's size in the file. */
  bytes: number;
  /** 1, 2, 3, … in order of appending. */
  seq: number;
  /** For an intent: until when (performance.now()) it waits for its outcome. */
  holdUntil: number;
}

export class JournaledAuditLog implements AuditLog, AsyncDisposable {
  private readonly store: BatchAuditLog;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly ids: IdGenerator;
  private readonly closeTimeoutMs: number;
  private readonly retryMs: number;
  private readonly maxRetryMs: number;
  private readonly flushDelayMs: number;
  private readonly holdOpenMs: number;

  private currentFile: string;
  private fd: number | undefined;
  /** Bytes in the current file. */
  private fileBytes = 0;
  /** A failed append may have left part of a line: the next one starts on a fresh line. */
  private needsNewline = false;
  /** Files replaced by a fresh one, each removed once the store has its last entry. */
  private readonly retired: { file: string; lastSeq: number }[] = [];

  private readonly queue: Queued[] = [];
  private appended = 0;
  private stored = 0;
  private readonly waiters: { seq: number; resolve: () => void }[] = [];
  /** Intents of this journal whose outcome is not recorded yet, with their decision. */
  private readonly open = new Map<string, AuditDecision>();

  private flushing: Promise<void> | undefined;
  private scheduled = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDelay: number;
  /** Set while the store fails: new intents are refused. */
  private failure: Error | undefined;
  /** At most this many entries in the next batch: halved at each failure, to isolate a record the store refuses. */
  private batchCap = MAX_BATCH_ENTRIES;
  /** Set while a record that failed alone is looked into (`setAside`): new intents are refused meanwhile. */
  private suspect: Error | undefined;
  private closing: Promise<void> | undefined;
  /** Set by `close()` when it gave up waiting: no more batches start. */
  private abandoned = false;

  constructor(options: AuditJournalOptions) {
    this.store = options.store;
    this.log = options.log;
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? randomIds;
    this.closeTimeoutMs = options.closeTimeoutMs ?? 5000;
    this.retryMs = options.retryMs ?? 100;
    this.maxRetryMs = options.maxRetryMs ?? 5000;
    this.flushDelayMs = options.flushDelayMs ?? 20;
    this.holdOpenMs = options.holdOpenMs ?? 1000;
    this.retryDelay = this.retryMs;
    const dir = path.resolve(options.dir);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const { file, fd } = createJournalFile(dir);
    this.currentFile = file;
    this.fd = fd;
  }

  /** The file new entries are appended to. */
  get file(): string {
    return this.currentFile;
  }

  /** Why the store is failing, while it is (new intents are refused meanwhile). */
  get storeFailure(): Error | undefined {
    return this.failure;
  }

  /** Entries journaled but not yet in the store. */
  get backlog(): number {
    return this.queue.length;
  }

  async recordIntent(intent: AuditIntent): Promise<string> {
    this.refuseIntents();
    // Bounded memory: when the store falls far behind, wait for it (it fails, or catches up).
    if (this.queue.length >= MAX_QUEUED) {
      await this.flushed();
      this.refuseIntents();
    }
    const row = auditIntentRow(intent);
    const id = this.ids();
    if (typeof id !== 'string' || id === '') throw new StateStoreError('generated id: expected a non-empty string');
    this.append({ kind: 'intent', id, at: this.clock.now().toISOString(), intent: row });
    this.open.set(id, row.decision);
    return id;
  }

  recordOutcome(id: string, report: AuditOutcomeReport): Promise<void> {
    // What the executor throws rejects the promise.
    return new Promise((resolve) => {
      const row = auditOutcomeRow(report);
      const decision = this.open.get(id);
      if (decision === undefined) {
        throw new StateStoreError(
          `no audit record ${id} awaits its outcome here (unknown, or its outcome is recorded)`,
        );
      }
      if (!outcomeFitsDecision(row.outcome, decision)) {
        throw new StateStoreError(contradictionMessage(id, row.outcome, decision));
      }
      // Also while the store fails: the call already ran, its end must be kept.
      this.append({ kind: 'outcome', id, at: this.clock.now().toISOString(), outcome: row });
      this.open.delete(id);
      resolve();
    });
  }

  async get(id: string): Promise<AuditRecord | undefined> {
    await this.flushed();
    return this.store.get(id);
  }

  async query(filter?: AuditQuery): Promise<AuditRecord[]> {
    await this.flushed();
    return this.store.query(filter);
  }

  /**
   * Resolves once everything journaled so far is in the store, or as soon as the store fails
   * (then the entries are still queued and journaled). Never rejects.
   */
  flushed(): Promise<void> {
    const seq = this.appended;
    if (this.stored >= seq || this.failure || this.abandoned) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ seq, resolve }));
  }

  /**
   * Stops taking intents, flushes (waiting at most `closeTimeoutMs`), and removes the journal
   * when the store has everything; otherwise leaves it for replay, and says so.
   */
  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private refuseIntents(): void {
    if (this.closing) throw new StateStoreError('the audit journal is closed');
    const failure = this.failure ?? this.suspect;
    if (failure) {
      throw new StateStoreError(
        `the audit store is failing (${failure.message}); new calls are refused until it recovers`,
      );
    }
  }

  /** Appends one line, synchronously, then queues the entry for the store. Throws if it cannot. */
  private append(entry: AuditBatchEntry): void {
    if (this.fd === undefined) throw new StateStoreError('the audit journal is closed');
    const line = Buffer.from(`${this.needsNewline ? '\n' : ''}${JSON.stringify(entry)}\n`, 'utf8');
    try {
      let written = 0;
      while (written < line.length) written += writeSync(this.fd, line, written, line.length - written);
    } catch (error) {
      this.needsNewline = true;
      throw new StateStoreError(`cannot write the audit journal ${this.currentFile}: ${(error as Error).message}`);
    }
    this.needsNewline = false;
    this.fileBytes += line.length;
    this.queue.push({
      entry,
      bytes: line.length,
      seq: ++this.appended,
      holdUntil: entry.kind === 'intent' ? performance.now() + this.holdOpenMs : 0,
    });
    this.schedule();
  }

  /** Starts a flush after `flushDelayMs` (entries recorded meanwhile go in one batch), unless one runs or waits. */
  private schedule(): void {
    if (this.scheduled || this.flushing || this.retryTimer || this.abandoned) return;
    this.scheduled = true;
    setTimeout(() => {
      this.scheduled = false;
      void this.flush();
    }, this.flushDelayMs);
  }

  private flush(): Promise<void> {
    this.flushing ??= (async () => {
      await Promise.resolve(); // `flushing` is set before the loop below can end
      try {
        while (this.queue.length > 0 && !this.abandoned) {
          const batch = this.nextBatch();
          if (batch.length === 0) break; // only intents waiting for their outcomes
          try {
            await this.store.recordBatch(batch.map((q) => q.entry));
          } catch (error) {
            if (batch.length === 1 && (await this.setAside(batch[0]!, error as Error))) continue;
            this.failed(error as Error, batch.length);
            return;
          }
          this.succeeded(batch);
          // What came in meanwhile waits for the next scheduled flush, to gather into one batch:
          // a statement has a fixed cost in the store (~2 ms in the embedded one) whatever its
          // size, so going on at once with the few entries of a few milliseconds kept the state
          // daemon busy with tiny batches (~0.3 ms of its CPU per call at one call in flight).
          // Go on at once only with a full batch waiting, or when someone waits for the store.
          // (Intents that wait for their outcomes do not count: they are among `open`.)
          if (!this.closing && this.waiters.length === 0 && this.queue.length - this.open.size < MAX_BATCH_ENTRIES) {
            break;
          }
        }
      } finally {
        // In the same turn as the loop's last look at the queue: an entry appended after it
        // schedules a flush of its own, and so does what the loop left.
        this.flushing = undefined;
        if (this.queue.length > 0) this.schedule();
      }
    })();
    return this.flushing;
  }

  /**
   * The next batch, in journal order: everything queued, up to a statement's size, except the
   * intents of calls still running that may wait for their outcomes (see `holdOpenMs`). Nothing
   * waits while the journal closes or a reader waits for the store.
   */
  private nextBatch(): Queued[] {
    const hold = !this.closing && this.waiters.length === 0;
    const now = performance.now();
    const batch: Queued[] = [];
    let bytes = 0;
    for (const queued of this.queue) {
      if (batch.length >= this.batchCap) break;
      const { entry } = queued;
      if (hold && entry.kind === 'intent' && queued.holdUntil > now && this.open.has(entry.id)) continue;
      bytes += queued.bytes;
      if (batch.length > 0 && bytes > MAX_BATCH_BYTES) break;
      batch.push(queued);
    }
    return batch;
  }

  private succeeded(batch: Queued[]): void {
    // The batch is the queue's first entries, bar the intents that wait: remove it, keeping order.
    const written = new Set(batch);
    let kept = 0;
    for (const queued of this.queue) if (!written.has(queued)) this.queue[kept++] = queued;
    this.queue.length = kept;
    // Everything up to the first entry still queued is in the store.
    this.stored = this.queue.length > 0 ? this.queue[0]!.seq - 1 : this.appended;
    if (this.failure) {
      this.log.info(`the audit store works again; the journaled records are being written to it`);
      this.failure = undefined;
    }
    this.retryDelay = this.retryMs;
    // A cap from a failure stays until the store has caught up: the batches go on narrowing
    // down on the record it refused (reset too once that record is set aside).
    if (this.queue.length === 0) this.batchCap = MAX_BATCH_ENTRIES;
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const waiter = this.waiters[i]!;
      if (waiter.seq <= this.stored) {
        this.waiters.splice(i, 1);
        waiter.resolve();
      }
    }
    while (this.retired[0] && this.retired[0].lastSeq <= this.stored) {
      removeJournalFile(this.retired.shift()!.file, this.log);
    }
    if (this.fd === undefined) return;
    if (this.queue.length === 0) {
      // Everything journaled is in the store. Synchronous from the check above to here:
      // nothing can be appended in between.
      if (this.fileBytes > 0) {
        try {
          ftruncateSync(this.fd, 0);
          this.fileBytes = 0;
          this.needsNewline = false;
        } catch (error) {
          this.log.warn(`cannot truncate the audit journal ${this.currentFile}: ${(error as Error).message}`);
        }
      }
    } else if (this.fileBytes >= ROTATE_BYTES) {
      this.rotate();
    }
  }

  /** The store never caught up completely while the file grew: go on in a fresh file. */
  private rotate(): void {
    let fresh: { file: string; fd: number };
    try {
      fresh = createJournalFile(path.dirname(this.currentFile));
    } catch (error) {
      this.log.warn(`cannot start a fresh audit journal: ${(error as Error).message}`);
      return;
    }
    closeSync(this.fd!);
    this.retired.push({ file: this.currentFile, lastSeq: this.appended });
    this.currentFile = fresh.file;
    this.fd = fresh.fd;
    this.fileBytes = 0;
    this.needsNewline = false;
  }

  /**
   * One entry failed alone. If the store still answers a read and takes the entry's reduced form
   * ({@link reducedEntry}), it was refusing this record: the whole entry is kept in the `.refused`
   * file beside the journal, the reduced one is in the store, and true is returned. Otherwise
   * (the store fails) false, and nothing changed.
   */
  private async setAside(queued: Queued, error: Error): Promise<boolean> {
    this.suspect = error;
    let said: string | undefined;
    try {
      said = await setEntryAside(this.store, queued.entry, error, `${this.currentFile}.refused`);
    } finally {
      this.suspect = undefined;
    }
    if (said === undefined) return false;
    this.log.error(said);
    this.batchCap = MAX_BATCH_ENTRIES;
    this.succeeded([queued]);
    return true;
  }

  private failed(error: Error, batchSize: number): void {
    this.batchCap = Math.max(1, Math.ceil(batchSize / 2));
    if (!this.failure) {
      this.log.error(
        `the audit store failed (${error.message}): new calls are refused until it recovers; ` +
          `${this.queue.length} journaled record(s) are kept in ${this.currentFile} and retried`,
      );
    }
    this.failure = error;
    for (const waiter of this.waiters.splice(0)) waiter.resolve();
    if (this.abandoned) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.flush();
    }, this.retryDelay);
    this.retryTimer.unref();
    this.retryDelay = Math.min(this.retryDelay * 2, this.maxRetryMs);
  }

  private async shutDown(): Promise<void> {
    const deadline = Date.now() + this.closeTimeoutMs;
    while (this.queue.length > 0 && Date.now() < deadline) {
      if (this.retryTimer) {
        clearTimeout(this.retryTimer);
        this.retryTimer = undefined;
      }
      if (this.failure) await delay(Math.min(this.retryDelay, deadline - Date.now()));
      await Promise.race([this.flush(), delay(deadline - Date.now())]);
    }
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const fd = this.fd;
    this.fd = undefined;
    if (fd !== undefined) closeSync(fd);
    if (this.queue.length === 0) {
      for (const { file } of this.retired.splice(0)) removeJournalFile(file, this.log);
      removeJournalFile(this.currentFile, this.log);
      return;
    }
    this.abandoned = true;
    for (const waiter of this.waiters.splice(0)) waiter.resolve();
    const files = [...this.retired.map((r) => r.file), this.currentFile];
    for (const file of files) ownFiles.delete(file);
    this.log.warn(
      `${this.queue.length} audit record(s) did not reach the store within ${Math.round(this.closeTimeoutMs / 1000)} s` +
        `${this.failure ? ` (${this.failure.message})` : ''}; they are kept in ${files.join(', ')} ` +
        'and written to the store by the next hintbox run or hintbox audit',
    );
  }
}

/**
 * An entry the store refused when written alone: if the store still answers a read and takes the
 * entry's reduced form ({@link reducedEntry}), the whole entry is appended to `refusedFile` and
 * the line to log is returned; otherwise (the store fails) undefined, and the store has nothing
 * of it.
 */
async function setEntryAside(
  store: BatchAuditLog,
  entry: AuditBatchEntry,
  error: Error,
  refusedFile: string,
): Promise<string | undefined> {
  const line = JSON.stringify(entry);
  try {
    await store.query({ limit: 1 });
    await store.recordBatch([reducedEntry(entry, error, line)]);
  } catch {
    return undefined;
  }
  let kept = `kept whole in ${refusedFile}`;
  try {
    appendFileSync(refusedFile, line + '\n', { mode: 0o600 });
  } catch (appendError) {
    kept = `could not be kept whole in ${refusedFile} (${(appendError as Error).message})`;
  }
  return (
    `the audit store refused one record (${error.message.slice(0, 200)}): audit ${entry.id} (${entry.kind}) ` +
    `is stored without its arguments and text, and ${kept}`
  );
}

/**
 * An entry the store refused, reduced to what cannot be refused for its content: its id, time,
 * decision, hints and outcome, names cut to 200 bytes of printable ASCII, and in place of its
 * arguments (an intent) or detail (an outcome) a note with the store's error and the size and
 * SHA-256 of the whole entry's line, which is kept in the `.refused` file.
 */
export function reducedEntry(entry: AuditBatchEntry, error: Error, line: string): AuditBatchEntry {
  const whole = textDigest(line);
  const ascii = (text: string, max = 200): string => capText(text.replace(/[^\x20-\x7e]/g, '?'), max).kept;
  const why = ascii(
    `not stored: the store refused this record; the whole entry (${whole.bytes} bytes, SHA-256 ${whole.sha256}) ` +
      `is in the journal's .refused file; the store said: ${error.message}`,
    600,
  );
  if (entry.kind === 'outcome') {
    const { outcome } = entry;
    return {
      ...entry,
      outcome: {
        outcome: outcome.outcome,
        detail: why,
        hintViolation: outcome.hintViolation === null ? null : 'not stored (see the detail)',
        attempts: outcome.attempts,
      },
    };
  }
  const { intent } = entry;
  return {
    ...entry,
    intent: {
      ...intent,
      session: ascii(intent.session),
      server: ascii(intent.server),
      tool: ascii(intent.tool),
      sandbox: intent.sandbox === null ? null : ascii(intent.sandbox),
      tags: [],
      claimedTags: [],
      arguments: JSON.stringify({ $hintbox: why }),
      pinHash: intent.pinHash === null ? null : ascii(intent.pinHash),
    },
  };
}

function createJournalFile(dir: string): { file: string; fd: number } {
  const file = path.join(dir, journalFileName(os.hostname(), process.pid));
  // 'ax': O_APPEND | O_CREAT | O_EXCL | O_WRONLY. Every write goes to the end, whatever the
  // offset, also after a truncation.
  const fd = openSync(file, 'ax', 0o600);
  ownFiles.add(file);
  return { file, fd };
}

function removeJournalFile(file: string, log: Logger): void {
  ownFiles.delete(file);
  try {
    unlinkSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      log.warn(`cannot remove the audit journal ${file}: ${(error as Error).message}`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Replay of the journals of dead processes

export interface ReplayOptions {
  /** The journal folder; a missing folder has nothing to replay. */
  dir: string;
  store: BatchAuditLog;
  log: Logger;
  /** This host's name (journals of other hosts are never touched). Default `os.hostname()`. */
  host?: string;
  /** Default: {@link isProcessAlive}. */
  isAlive?: (pid: number) => boolean;
}

export interface ReplayResult {
  /** Journal files replayed and removed. */
  files: number;
  /** Entries written (idempotently) to the store. */
  entries: number;
  /** Lines skipped: torn or damaged. */
  skipped: number;
}

/**
 * Writes the journals of this host's dead processes into the store, then removes them.
 * Idempotent (a record already in the store is left as it is), so a replay that is repeated,
 * or runs in two processes at once, records each entry once. A torn last line (the process
 * died while writing it: its call was never forwarded, or its outcome is lost and the record
 * says so) and damaged lines are skipped with a warning. A record the store refuses while it
 * takes others is set aside as the journal does (stored reduced, kept whole in a `.refused`
 * file). A journal that cannot be read, or whose store fails, is kept for the next replay (with a warning; never thrown: replay
 * must not keep anyone from the trail). Journals of live processes, of other hosts, and this
 * process's own are left alone.
 */
export async function replayJournals(options: ReplayOptions): Promise<ReplayResult> {
  const { store, log } = options;
  const dir = path.resolve(options.dir);
  const host = options.host ?? os.hostname();
  const isAlive = options.isAlive ?? isProcessAlive;
  const result: ReplayResult = { files: 0, entries: 0, skipped: 0 };
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      log.warn(`cannot read the audit journals in ${dir}: ${(error as Error).message}`);
    }
    return result;
  }
  // A process's files are replayed together, intents before outcomes: a process that rotated
  // its journal may have an intent in one file and its outcome in a later one, and the names do
  // not tell their order (an outcome whose record is not there yet would change nothing).
  const byProcess = new Map<number, string[]>();
  for (const name of names.sort()) {
    const owner = journalOwner(name);
    const file = path.join(dir, name);
    if (!owner || owner.host !== host || ownFiles.has(file)) continue;
    // A file of this pid that this process does not write is a dead process's whose pid came back.
    if (owner.pid !== process.pid && isAlive(owner.pid)) continue;
    byProcess.set(owner.pid, [...(byProcess.get(owner.pid) ?? []), file]);
  }
  for (const [pid, files] of byProcess) {
    const read: { file: string; entries: AuditBatchEntry[]; skipped: number }[] = [];
    let unreadable = false;
    for (const file of files) {
      try {
        read.push({ file, ...parseJournal(readFileSync(file, 'utf8'), file, log) });
      } catch (error) {
        // ENOENT: replayed by another process meanwhile.
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        log.warn(`cannot read the audit journal ${file}: ${(error as Error).message}; it is kept for the next time`);
        unreadable = true;
      }
    }
    if (unreadable) {
      log.warn(`the other audit journals of process ${pid} are kept with it, for the next time`);
      continue;
    }
    const entries = read.flatMap((r) => r.entries);
    const ordered = [...entries.filter((e) => e.kind === 'intent'), ...entries.filter((e) => e.kind !== 'intent')];
    try {
      for (const batch of batches(ordered)) {
        try {
          await store.recordBatch(batch);
        } catch {
          // One by one: a record the store refuses is set aside (as the journal does), so that it
          // does not keep its process's journal from the store at every replay.
          for (const entry of batch) {
            try {
              await store.recordBatch([entry]);
            } catch (alone) {
              const said = await setEntryAside(store, entry, alone as Error, `${read[0]!.file}.refused`);
              if (said === undefined) throw alone;
              log.error(said);
            }
          }
        }
      }
    } catch (error) {
      log.warn(
        `cannot replay the audit journal(s) ${read.map((r) => r.file).join(', ')} into the store ` +
          `(${(error as Error).message}); kept for the next time`,
      );
      continue;
    }
    for (const r of read) {
      removeJournalFile(r.file, log);
      result.files++;
      result.entries += r.entries.length;
      result.skipped += r.skipped;
    }
    if (entries.length > 0) {
      log.info(
        `wrote ${entries.length} audit entr${entries.length === 1 ? 'y' : 'ies'} of process ${pid}, which ended ` +
          'before they reached the store, from its journal',
      );
    }
  }
  return result;
}

/** The entries of a journal's text; torn and damaged lines are skipped with a warning. */
export function parseJournal(text: string, file: string, log: Logger): { entries: AuditBatchEntry[]; skipped: number } {
  const entries: AuditBatchEntry[] = [];
  let skipped = 0;
  const lines = text.split('\n');
  lines.forEach((line, i) => {
    if (line === '') return;
    try {
      entries.push(checkAuditBatchEntry(JSON.parse(line)));
    } catch (error) {
      skipped++;
      const last = i === lines.length - 1;
      log.warn(
        last
          ? `${file}: skipped its torn last line (${Buffer.byteLength(line)} bytes): the process died while writing it`
          : `${file}: skipped damaged line ${i + 1}: ${(error as Error).message}`,
      );
    }
  });
  return { entries, skipped };
}

function* batches(entries: readonly AuditBatchEntry[]): Generator<AuditBatchEntry[]> {
  let start = 0;
  while (start < entries.length) {
    let end = start;
    let bytes = 0;
    while (end < entries.length && end - start < MAX_BATCH_ENTRIES) {
      bytes += JSON.stringify(entries[end]).length;
      if (end > start && bytes > MAX_BATCH_BYTES) break;
      end++;
    }
    yield entries.slice(start, end);
    start = end;
  }
}

// ---------------------------------------------------------------------------------------------
// A store with the journal in front of its audit trail

/**
 * Replays the journals of dead processes into `store`, then returns a store whose audit trail
 * is a new journal in `dir` (pins go straight to the store). Closing it closes the journal
 * (flushing it) and then the store.
 */
export async function withAuditJournal(
  store: StateStore & { readonly audit: BatchAuditLog },
  options: Omit<AuditJournalOptions, 'store'>,
): Promise<StateStore & { readonly audit: JournaledAuditLog }> {
  await replayJournals({ dir: options.dir, store: store.audit, log: options.log });
  const journal = new JournaledAuditLog({ ...options, store: store.audit });
  const close = async (): Promise<void> => {
    try {
      await journal.close();
    } finally {
      await store.close();
    }
  };
  return {
    pins: store.pins,
    audit: journal,
    schema: store.schema,
    close,
    [Symbol.asyncDispose]: close,
  };
}
