import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, constants, fchmodSync, mkdirSync, openSync, statSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HINT_NAMES } from '../policy/hints.js';
import { normalizeTag } from '../policy/tool-tags.js';
import type { Logger } from '../util/logger.js';
import { VERSION } from '../version.js';
import { auditFileName, chainName, frameLine, lineHash } from './audit-chain.js';
import {
  AUDIT_DECISIONS,
  AUDIT_OUTCOMES,
  AUDIT_SCHEMA_VERSION,
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
 * Every record is appended with one synchronous `write` on an `O_APPEND` descriptor before the
 * method returns, so a call's intent is in the file (the page cache: it survives hintbox being
 * killed, not the machine losing power; there is no fsync) before the call is forwarded. An
 * append that fails throws: for an intent the call guard then refuses the call (fail closed).
 * After a failed append the next one starts a new file (linked to the last line written whole).
 * An outcome that cannot be appended is kept, as it was when the call ended, and written before
 * the next record, or by a retry on a timer; one still unwritten when the log closes is logged
 * whole (error), so that it is not lost silently.
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
}

export const DEFAULT_MAX_AUDIT_FILE_BYTES = 16 * 1024 * 1024;

/** What the writer remembers of a call in flight, for its outcome. */
interface OpenCall {
  timeMs: number;
  decision: AuditDecision;
}

export class AuditLogWriter implements AuditLog, Disposable {
  readonly chain: string;
  private readonly clock: Clock;
  private readonly ids: IdGenerator;
  private readonly maxFileBytes: number;
  private fd: number | undefined;
  private seq = -1;
  private size = 0;
  private prev: string | null = null;
  private needsNewFile = true;
  private closed = false;
  private readonly open = new Map<string, OpenCall>();
  /** Outcomes whose append failed, oldest first: written before the next record. */
  private readonly unwritten: { callId: string; fields: Record<string, unknown> }[] = [];
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly subject: string;

  private constructor(private readonly options: AuditLogWriterOptions) {
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? randomIds;
    this.maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_AUDIT_FILE_BYTES;
    this.chain = chainName(this.clock.now(), process.pid, randomBytes(4).toString('hex'));
    this.subject = currentUser();
  }

  /** Creates the audit folder (owner-only) if needed and the chain's first file. Throws when it cannot. */
  static open(options: AuditLogWriterOptions): AuditLogWriter {
    ensureOwnerOnlyFolder(options.dir);
    const writer = new AuditLogWriter(options);
    writer.startFile();
    return writer;
  }

  /** The file being written. */
  get currentFile(): string {
    return path.join(this.options.dir, auditFileName(this.chain, this.seq));
  }

  recordIntent(intent: AuditIntent): Promise<string> {
    try {
      return Promise.resolve(this.appendIntent(intent));
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }

  recordOutcome(id: string, report: AuditOutcomeReport): Promise<void> {
    try {
      this.appendOutcome(id, report);
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }

  recordEvent(event: AuditEvent): void {
    if (this.closed) {
      // e.g. a sandbox whose stop is seen after the run closed its log
      this.options.log.debug(`${event.type} after the audit log was closed: not recorded`);
      return;
    }
    try {
      this.append({ ...this.base(event.type), ...withoutType(event) });
    } catch (error) {
      this.options.log.error(`could not record ${event.type} in the audit log: ${(error as Error).message}`);
    }
  }

  /** Appends the intent; returns the call's id. Throws when the intent is malformed or cannot be written. */
  appendIntent(intent: AuditIntent): string {
    const decision = oneOf(intent.decision, AUDIT_DECISIONS, 'decision');
    const decidedBy = oneOf(intent.decidedBy, DECIDERS_OF[decision], `decidedBy of a ${decision} call`);
    const base = this.base('call.intent');
    const tags = (source: 'profile' | 'server'): string[] =>
      intent.tags.filter((t) => t.source === source).map((t) => storedText(normalizeTag(t.name)));
    this.append({
      ...base,
      session: intent.session,
      server: storedText(intent.server),
      tool: storedText(intent.tool),
      tags: tags('profile'),
      claimedTags: tags('server'),
      claimedHints: booleanHints(intent.claimedHints),
      effectiveHints: booleanHints(intent.effectiveHints),
      sandbox: storedText(intent.sandbox),
      decision,
      decidedBy,
      arguments: intent.arguments ?? null,
      pin: intent.pinHash,
      traceId: intent.traceId ?? null,
    });
    this.open.set(base.id, { timeMs: Date.parse(base.time), decision });
    return base.id;
  }

  appendOutcome(id: string, report: AuditOutcomeReport): void {
    const call = this.open.get(id);
    if (!call) throw new AuditRecordError(`no call ${id} in flight (unknown, or its outcome is recorded)`);
    const outcome = oneOf(report.outcome, AUDIT_OUTCOMES, 'outcome');
    if (!outcomeFitsDecision(outcome, call.decision)) {
      throw new AuditRecordError(`call ${id}: outcome ${outcome} contradicts decision ${call.decision}`);
    }
    const attempts = report.attempts ?? 1;
    if (!Number.isInteger(attempts) || attempts < 1) throw new AuditRecordError('attempts: expected an integer ≥ 1');
    const base = this.base('call.outcome');
    const fields = {
      ...base,
      callId: id,
      outcome,
      detail: storedText(report.detail ?? null),
      hintViolation: storedText(report.hintViolation ?? null),
      attempts,
      durationMs: Math.max(0, Date.parse(base.time) - call.timeMs),
    };
    try {
      this.append(fields);
    } catch (error) {
      if (error instanceof AuditRecordError) throw error;
      // The call has ended: its outcome is decided, only not written yet.
      this.open.delete(id);
      this.unwritten.push({ callId: id, fields });
      this.scheduleRetry(1000);
      throw new Error(`${(error as Error).message}; the outcome is kept and written when the log can be appended to`);
    }
    this.open.delete(id);
  }

  /** Writes `log.close` and closes the file. Calls still in flight keep no outcome. */
  close(): void {
    if (this.closed) return;
    clearTimeout(this.retryTimer);
    try {
      this.append(this.base('log.close'));
    } catch (error) {
      this.options.log.error(`could not close the audit log: ${(error as Error).message}`);
    }
    for (const { callId, fields } of this.unwritten) {
      this.options.log.error(
        `the outcome of call ${callId} could not be written to the audit log ${this.currentFile}: ${JSON.stringify(fields)}`,
      );
    }
    this.unwritten.length = 0;
    this.closed = true;
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  [Symbol.dispose](): void {
    this.close();
  }

  private base(type: string): { v: number; id: string; time: string; type: string } {
    return { v: AUDIT_SCHEMA_VERSION, id: this.ids(), time: this.clock.now().toISOString(), type };
  }

  private startFile(): void {
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
    this.write({
      ...this.base('log.open'),
      chain: this.chain,
      seq: this.seq,
      host: os.hostname(),
      pid: process.pid,
      subject: this.subject,
      hintbox: VERSION,
    });
  }

  private append(fields: Record<string, unknown>): void {
    if (this.closed) throw new AuditRecordError('the audit log is closed');
    if (this.unwritten.length > 0) this.writeUnwritten();
    this.appendNow(fields);
  }

  /** The outcomes kept after a failed append, in order; throws at the first that still fails. */
  private writeUnwritten(): void {
    while (this.unwritten.length > 0) {
      const { callId, fields } = this.unwritten[0]!;
      this.appendNow(fields);
      this.unwritten.shift();
      this.options.log.info(`the outcome of call ${callId} is written late to the audit log`);
    }
  }

  private scheduleRetry(delayMs: number): void {
    if (this.retryTimer !== undefined || this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.closed || this.unwritten.length === 0) return;
      try {
        this.writeUnwritten();
      } catch (error) {
        this.options.log.debug(
          `audit log: still cannot write ${this.unwritten.length} outcome(s): ${(error as Error).message}`,
        );
        this.scheduleRetry(Math.min(delayMs * 2, 30_000));
      }
    }, delayMs);
    this.retryTimer.unref();
  }

  private appendNow(fields: Record<string, unknown>): void {
    if (this.needsNewFile) this.startFile();
    let text = frameLine(fields, this.prev);
    if (this.size > 0 && this.size + Buffer.byteLength(text) + 1 > this.maxFileBytes) {
      this.startFile();
      text = frameLine(fields, this.prev); // now linked to the new file's log.open
    }
    this.write(fields, text);
  }

  private write(fields: Record<string, unknown>, framed?: string): void {
    const text = framed ?? frameLine(fields, this.prev);
    const line = text + '\n';
    const bytes = Buffer.byteLength(line, 'utf8');
    try {
      if (this.fd === undefined) throw new AuditRecordError('no audit file is open');
      const written = writeSync(this.fd, line);
      if (written !== bytes) throw new Error(`short write (${written} of ${bytes} bytes)`);
    } catch (error) {
      this.needsNewFile = true;
      throw new Error(`cannot append to ${this.currentFile}: ${(error as Error).message}`);
    }
    this.size += bytes;
    this.prev = lineHash(text);
  }
}

/**
 * Creates `dir` (and its parents) owner-only, or checks an existing one: it must be a folder of
 * this user's; group and others lose any access they had.
 */
export function ensureOwnerOnlyFolder(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = statSync(dir);
  if (!stat.isDirectory()) throw new Error(`${dir} is not a folder`);
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid)
    throw new Error(`${dir} belongs to uid ${stat.uid}, not to this user (${uid})`);
  if ((stat.mode & 0o077) !== 0) chmodSync(dir, 0o700);
}

function currentUser(): string {
  try {
    const info = os.userInfo();
    return `${info.username} (uid ${info.uid})`;
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`;
  }
}

function oneOf<T extends string>(value: unknown, allowed: readonly T[], what: string): T {
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  throw new AuditRecordError(`${what}: expected one of ${allowed.join(', ')}, got ${JSON.stringify(value)}`);
}

/** The four hints, each a boolean: a record says what was decided on, nothing else. */
function booleanHints(hints: unknown): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  if (hints === null || typeof hints !== 'object') return out;
  for (const name of HINT_NAMES) {
    const value = (hints as Record<string, unknown>)[name];
    if (typeof value === 'boolean') out[name] = value;
  }
  return out;
}

/** An event's fields but its type, every text capped ({@link storedText}): some are a server's (a violation's message). */
function withoutType(event: AuditEvent): Record<string, unknown> {
  const rest: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(event)) {
    if (key === 'type') continue;
    rest[key] =
      typeof value === 'string'
        ? storedText(value)
        : Array.isArray(value)
          ? value.map((v: unknown) => (typeof v === 'string' ? storedText(v) : v))
          : value;
  }
  return rest;
}
