import { randomBytes } from 'node:crypto';
import { closeSync, constants, fchmodSync, openSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../util/logger.js';
import { VERSION } from '../version.js';
import { auditFileName, chainName, frameBody, lineHash } from './audit-chain.js';
import { currentUser, ensureOwnerOnlyFolder } from './audit-folder.js';
import { KeptOutcomes } from './kept-outcomes.js';
import { CheckpointWriter, type CheckpointOptions } from './checkpoint-writer.js';
import { asError, field, fieldsText, hintsText, lineHead, oneOf, StoredTags, withoutType } from './audit-line-text.js';
import {
  AUDIT_DECISIONS,
  AUDIT_OUTCOMES,
  AuditRecordError,
  DECIDERS_OF,
  outcomeFitsDecision,
  randomIds,
  storedText,
  systemClock,
  type AuditDecision,
  type AuditEvent,
  type AuditIntent,
  type AuditLog,
  type AuditOutcomeReport,
  type Clock,
  type IdGenerator,
} from './audit-record.js';

/**
 * The audit log of one hintbox process: a hash chain of JSON Lines files of its own in the
 * audit folder (no daemon, no lock shared with other processes), rotated by size, owner-only.
 *
 * Records are appended with synchronous `write`s on an `O_APPEND` descriptor. `recordIntent`
 * resolves only once its line is in the file (the page cache: it survives hintbox being killed,
 * not the machine losing power; there is no fsync), so a call is forwarded after its intent is
 * written; an intent that cannot be written rejects, and the call guard refuses the call (fail
 * closed). The records of one turn of the event loop (the calls of one chunk of the client's
 * input, the outcomes of one chunk of a sandbox's answers) go out in one `write` at its end (a
 * microtask), each line framed and hashed into the chain when it is recorded (an outcome before
 * its answer is sent: it reaches the file first). The `append…` methods write at once (and
 * throw). After a failed write the next record starts a new file, linked to the last line
 * written whole; the records after it in the failed write are not recorded (their promises reject). An outcome that cannot be written is kept, as it was when
 * the call ended, and written before the next record, or by a retry on a timer; one still
 * unwritten when the log closes is logged whole (error), so that it is not lost silently.
 */
export interface AuditLogWriterOptions {
  dir: string;
  log: Logger;
  /** Default: the system clock. */
  clock?: Clock;
  /** Default: random UUIDs. */
  ids?: IdGenerator;
  /** A file that would grow past this many bytes is followed by a new one. Default 16 MiB. */
  maxFileBytes?: number;
  /** Signed checkpoints of the chain (`checkpoint-writer.ts`); none without. */
  checkpoints?: CheckpointOptions;
}

export const DEFAULT_MAX_AUDIT_FILE_BYTES = 16 * 1024 * 1024;

/** What the writer remembers of a call in flight, for its outcome. */
interface OpenCall {
  timeMs: number;
  decision: AuditDecision;
}

/** A line framed into the chain and not written yet. */
interface QueuedLine {
  text: string;
  /** UTF-8 bytes with its newline. */
  bytes: number;
  hash: string;
  /** Told once the line is in the file (no error) or could not be written. */
  settle?: (error?: Error) => void;
}

export class AuditLogWriter implements AuditLog, Disposable {
  readonly chain: string;
  private readonly clock: Clock;
  private readonly ids: IdGenerator;
  private readonly maxFileBytes: number;
  private fd: number | undefined;
  private seq = -1;
  /** Bytes written to the current file. */
  private size = 0;
  /** The hash of the last line framed (queued or written): the next line's `prev`. */
  private prev: string | null = null;
  /** The hash of the last line written whole: what the chain goes on from after a failed write. */
  private lastWritten: string | null = null;
  /** Whole lines written in the chain. */
  private records = 0;
  private readonly checkpoints: CheckpointWriter | undefined;
  private queue: QueuedLine[] = [];
  private queuedBytes = 0;
  private flushQueued = false;
  private needsNewFile = true;
  private closed = false;
  private readonly open = new Map<string, OpenCall>();
  /** Outcomes that could not be written, kept and written later. */
  private readonly kept: KeptOutcomes;
  private readonly subject: string;
  /** Tags as stored (normalised, capped), by the name given. */
  private readonly storedTags = new StoredTags();

  private constructor(private readonly options: AuditLogWriterOptions) {
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? randomIds;
    this.maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_AUDIT_FILE_BYTES;
    this.chain = chainName(this.clock.now(), process.pid, randomBytes(4).toString('hex'));
    this.subject = currentUser();
    this.kept = new KeptOutcomes({
      log: options.log,
      queue: (body, settle) => this.appendLine(body, settle),
      flush: () => this.flush(),
    });
    const state = () => ({ files: this.seq + 1, records: this.records, head: this.lastWritten });
    const where = { dir: options.dir, log: options.log, chain: this.chain, clock: this.clock, state };
    this.checkpoints = options.checkpoints && new CheckpointWriter(options.checkpoints, where);
  }

  /** Creates the audit folder (owner-only) if needed and the chain's first file. Throws when it cannot. */
  static open(options: AuditLogWriterOptions): AuditLogWriter {
    ensureOwnerOnlyFolder(options.dir);
    const writer = new AuditLogWriter(options);
    writer.startFile();
    return writer;
  }

  /** Outcomes of ended calls not written yet (a write failed): kept, and written by a retry. */
  get unwrittenOutcomes(): number {
    return this.kept.size;
  }

  /** The file being written. */
  get currentFile(): string {
    return path.join(this.options.dir, auditFileName(this.chain, this.seq));
  }

  recordIntent(intent: AuditIntent): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      try {
        // Settled at the earliest when the queue is written, after this returns the id.
        const id: string = this.queueIntent(intent, (error) => {
          if (!error) return resolve(id);
          this.open.delete(id);
          reject(error);
        });
      } catch (error) {
        reject(asError(error));
      }
    });
  }

  recordOutcome(id: string, report: AuditOutcomeReport): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      try {
        this.queueOutcome(id, report, (error) => (error ? reject(error) : resolve()));
      } catch (error) {
        reject(asError(error));
      }
    });
  }

  recordEvent(event: AuditEvent): void {
    if (this.closed) {
      // e.g. a sandbox whose stop is seen after the run closed its log
      this.options.log.debug(`${event.type} after the audit log was closed: not recorded`);
      return;
    }
    const failed = (error: Error): void =>
      this.options.log.error(`could not record ${event.type} in the audit log: ${error.message}`);
    try {
      this.append(lineHead(this.ids(), this.clock.now(), event.type) + fieldsText(withoutType(event)), (error) => {
        if (error) failed(error);
      });
    } catch (error) {
      failed(asError(error));
    }
  }

  /** Appends the intent now; returns the call's id. Throws when the intent is malformed or cannot be written. */
  appendIntent(intent: AuditIntent): string {
    let id = '';
    this.writeNow((settle) => (id = this.queueIntent(intent, settle)));
    return id;
  }

  /** Appends the outcome now. Throws when it cannot be recorded (see {@link AuditLog.recordOutcome}). */
  appendOutcome(id: string, report: AuditOutcomeReport): void {
    this.writeNow((settle) => this.queueOutcome(id, report, settle));
  }

  /** Writes everything queued (it would be at the end of this turn of the event loop). */
  flush(): void {
    const lines = this.queue;
    if (lines.length === 0) return;
    const bytes = this.queuedBytes;
    this.queue = [];
    this.queuedBytes = 0;
    const text = lines.length === 1 ? `${lines[0]!.text}\n` : `${lines.map((l) => l.text).join('\n')}\n`;
    let written = 0;
    let failure: Error | undefined;
    try {
      if (this.fd === undefined) throw new AuditRecordError('no audit file is open');
      written = writeSync(this.fd, text);
      if (written !== bytes) failure = new Error(`short write (${written} of ${bytes} bytes)`);
    } catch (error) {
      failure = asError(error);
    }
    this.size += written;
    let whole = lines.length;
    if (failure) {
      // The lines that made it whole are recorded; the chain goes on from the last of them.
      whole = 0;
      for (let end = 0; whole < lines.length && end + lines[whole]!.bytes <= written; whole++)
        end += lines[whole]!.bytes;
      this.needsNewFile = true;
      failure = new Error(`cannot append to ${this.currentFile}: ${failure.message}`);
    }
    if (whole > 0) this.lastWritten = lines[whole - 1]!.hash;
    this.records += whole;
    this.checkpoints?.written(this.records);
    if (failure) this.prev = this.lastWritten;
    for (let i = 0; i < lines.length; i++) lines[i]!.settle?.(i < whole ? undefined : failure);
  }

  /** Validates and queues the intent; remembers the call for its outcome. Returns the call's id. */
  private queueIntent(intent: AuditIntent, settle: (error?: Error) => void): string {
    const decision = oneOf(intent.decision, AUDIT_DECISIONS, 'decision');
    const decidedBy = oneOf(intent.decidedBy, DECIDERS_OF[decision], `decidedBy of a ${decision} call`);
    const id = this.ids();
    const now = this.clock.now();
    // The fields of CallIntentLine, in its order, as JSON.stringify writes them.
    const body =
      lineHead(id, now, 'call.intent') +
      field('session', intent.session) +
      field('server', storedText(intent.server)) +
      field('tool', storedText(intent.tool)) +
      `,"tags":${this.storedTags.text(intent.tags, 'profile')},"claimedTags":${this.storedTags.text(intent.tags, 'server')}` +
      `,"claimedHints":${hintsText(intent.claimedHints)},"effectiveHints":${hintsText(intent.effectiveHints)}` +
      field('sandbox', storedText(intent.sandbox)) +
      `,"decision":"${decision}","decidedBy":"${decidedBy}"` +
      field('arguments', intent.arguments ?? null) +
      field('pin', intent.pinHash) +
      field('traceId', intent.traceId ?? null) +
      field('caller', storedText(intent.caller?.subject ?? null)) +
      field('client', storedText(intent.caller?.client ?? null));
    this.append(body, settle);
    this.open.set(id, { timeMs: now.getTime(), decision });
    return id;
  }

  /** Validates and queues the outcome; the call is no longer in flight. */
  private queueOutcome(id: string, report: AuditOutcomeReport, settle: (error?: Error) => void): void {
    const call = this.open.get(id);
    if (!call) throw new AuditRecordError(`no call ${id} in flight (unknown, or its outcome is recorded)`);
    const outcome = oneOf(report.outcome, AUDIT_OUTCOMES, 'outcome');
    if (!outcomeFitsDecision(outcome, call.decision)) {
      throw new AuditRecordError(`call ${id}: outcome ${outcome} contradicts decision ${call.decision}`);
    }
    const attempts = report.attempts ?? 1;
    if (!Number.isInteger(attempts) || attempts < 1) throw new AuditRecordError('attempts: expected an integer ≥ 1');
    const now = this.clock.now();
    const body =
      lineHead(this.ids(), now, 'call.outcome') +
      field('callId', id) +
      `,"outcome":"${outcome}"` +
      field('detail', storedText(report.detail ?? null)) +
      field('hintViolation', storedText(report.hintViolation ?? null)) +
      `,"attempts":${attempts},"durationMs":${Math.max(0, now.getTime() - call.timeMs)}`;
    // The call has ended: an outcome that cannot be written is decided, only not written yet.
    try {
      this.append(body, (error) => settle(error && this.keep(id, body, error)));
    } catch (error) {
      if (error instanceof AuditRecordError) throw error;
      this.open.delete(id);
      throw this.keep(id, body, asError(error));
    }
    this.open.delete(id);
  }

  /** Keeps an outcome that could not be written (written later); the error to report. */
  private keep(id: string, body: string, error: Error): Error {
    this.kept.keep(id, body);
    return new Error(`${error.message}; the outcome is kept and written when the log can be appended to`);
  }

  /** Queues a record through `queue` and writes it (with anything queued before it); throws when it is not written. */
  private writeNow(queue: (settle: (error?: Error) => void) => void): void {
    let failure: Error | undefined;
    queue((error) => (failure = error));
    this.flush();
    if (failure) throw failure;
  }

  /** Writes `log.close` and closes the file. Calls still in flight keep no outcome. */
  close(): void {
    if (this.closed) return;
    this.kept.stop();
    try {
      this.writeNow((settle) => this.append(lineHead(this.ids(), this.clock.now(), 'log.close'), settle));
    } catch (error) {
      this.options.log.error(`could not close the audit log: ${(error as Error).message}`);
    }
    this.closed = true; // before the kept outcomes are dropped: no retry is scheduled any more
    this.checkpoints?.close(); // covers log.close: a closed chain is covered whole
    this.kept.stop();
    for (const { callId, body } of this.kept.drop()) {
      this.options.log.error(
        `the outcome of call ${callId} could not be written to the audit log ${this.currentFile}: ${body}}`,
      );
    }
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  [Symbol.dispose](): void {
    this.close();
  }

  private startFile(): void {
    this.flush(); // what was recorded before goes into the file it was recorded for
    if (this.fd !== undefined) {
      const fd = this.fd;
      this.fd = undefined;
      try {
        closeSync(fd);
      } catch {
        // the file is left as it is; the new one links to the last line written whole
      }
    }
    // The next number only once its file exists: a failed open must not leave a gap that
    // `audit verify` would report as a missing file.
    const file = path.join(this.options.dir, auditFileName(this.chain, this.seq + 1));
    const fd = openSync(file, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_EXCL, 0o600);
    this.seq++;
    fchmodSync(fd, 0o600); // the umask may have taken bits away, never added: make it exact
    this.fd = fd;
    this.size = 0;
    this.needsNewFile = false;
    const open =
      lineHead(this.ids(), this.clock.now(), 'log.open') +
      fieldsText({
        chain: this.chain,
        seq: this.seq,
        host: os.hostname(),
        pid: process.pid,
        subject: this.subject,
        hintbox: VERSION,
      });
    this.writeNow((settle) => this.enqueue(this.framed(open, settle)));
    // A chain that cannot be checkpointed at its start does not start (fail closed).
    if (this.seq === 0) this.checkpoints?.first();
    else this.checkpoints?.tryCheckpoint('rotate');
  }

  /**
   * Frames the record into the chain and queues it; it is written at the end of this turn of
   * the event loop, or before, by {@link flush}. Throws when the log is closed, or when a new
   * file is due and cannot be started.
   */
  private append(body: string, settle?: (error?: Error) => void): void {
    if (this.closed) throw new AuditRecordError('the audit log is closed');
    if (this.kept.size > 0) this.kept.queueAll();
    this.appendLine(body, settle);
  }

  private appendLine(body: string, settle?: (error?: Error) => void): void {
    if (this.needsNewFile) this.startFile();
    let line = this.framed(body, settle);
    const filled = this.size + this.queuedBytes;
    if (filled > 0 && filled + line.bytes > this.maxFileBytes) {
      this.startFile();
      line = this.framed(body, settle); // now linked to the new file's log.open
    }
    this.enqueue(line);
  }

  private enqueue(line: QueuedLine): void {
    this.queue.push(line);
    this.queuedBytes += line.bytes;
    this.prev = line.hash;
    if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(() => {
        this.flushQueued = false;
        this.flush();
      });
    }
  }

  /** The line of `body` after the last one framed. */
  private framed(body: string, settle?: (error?: Error) => void): QueuedLine {
    const text = frameBody(body, this.prev);
    const hash = lineHash(text);
    return { text, bytes: Buffer.byteLength(text, 'utf8') + 1, hash, ...(settle ? { settle } : {}) };
  }
}
