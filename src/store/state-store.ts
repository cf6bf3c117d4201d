import { randomUUID } from 'node:crypto';
import { HINT_NAMES, type ClaimedHints, type ToolHints } from '../policy/hints.js';
import { pinHash, type PinnedDefinition, type ToolPin } from '../policy/tool-pin.js';
import { normalizeTag, type ToolTag } from '../policy/tool-tags.js';
import { capText, textDigest } from '../util/cap-text.js';
import { migrate } from './migrations.js';

/**
 * hintbox's state: the tool definitions a person approved (pins) and the audit trail of every
 * call. This module holds the port (`StateStore`), and the one SQL implementation of it
 * (`SqlStateStore`) that both adapters share: Postgres through pg (`pg-state-store.ts`) and the
 * embedded PGlite (`pglite-state-store.ts`) differ only in how they run a query.
 */

// ---------------------------------------------------------------------------------------------
// Injected time and ids

/** The store's source of time; tests pass a fixed or stepping clock. */
export interface Clock {
  now(): Date;
}

/** Ids of audit records; tests pass a counter. */
export type IdGenerator = () => string;

export const systemClock: Clock = { now: () => new Date() };
export const randomIds: IdGenerator = () => randomUUID();

/** Options every store takes. */
export interface StateStoreOptions {
  /** Default: the system clock. */
  clock?: Clock;
  /** Default: random UUIDs. */
  ids?: IdGenerator;
}

// ---------------------------------------------------------------------------------------------
// Pins

/** A tool definition a person (or a trusted first run) approved. */
export interface ApprovedPin {
  server: string;
  tool: string;
  /** SHA-256 (hex) of the canonical definition, see `policy/tool-pin.ts`. */
  hash: string;
  /** The approved canonical definition, for the diff `hintbox approve` shows. */
  definition: PinnedDefinition;
  approvedAt: Date;
  /** Who or what approved: e.g. `hintbox approve`, `hintbox approve --all`, `first run (trusted)`. */
  approvedBy: string;
}

/** What `approve` takes. */
export interface PinApproval {
  server: string;
  tool: string;
  /** From `pinTool()`; the hash must be the definition's, or `approve` throws. */
  pin: ToolPin;
  approvedBy: string;
}

export interface PinStore {
  /** The approved pin of a tool, or undefined if none was ever approved. */
  get(server: string, tool: string): Promise<ApprovedPin | undefined>;
  /** Approves a definition, replacing the tool's earlier pin; the time comes from the clock. */
  approve(approval: PinApproval): Promise<ApprovedPin>;
  /** Approved pins, of one server or of all, ordered by server then tool. */
  list(server?: string): Promise<ApprovedPin[]>;
}

// ---------------------------------------------------------------------------------------------
// Audit

/** Whether the call went ahead. */
export type AuditDecision = 'allowed' | 'denied' | 'blocked';

/**
 * Who or what decided:
 * - allowed by `auto` (the policy), `rule` (an operator allow rule), `pre-approval` (a matching
 *   pre-approval rule) or `person` (a confirmation);
 * - denied by `rule` (a deny rule), `person`, `timeout` (no answer in time) or
 *   `no-elicitation` (the client cannot be asked);
 * - blocked by `pin` (the definition is not the approved one).
 */
export type AuditDecider = 'auto' | 'rule' | 'pre-approval' | 'person' | 'timeout' | 'no-elicitation' | 'pin';

/** Which deciders may give which decision (the database checks the same). */
export const DECIDERS_OF: Readonly<Record<AuditDecision, readonly AuditDecider[]>> = Object.freeze({
  allowed: ['auto', 'rule', 'pre-approval', 'person'],
  denied: ['rule', 'person', 'timeout', 'no-elicitation'],
  blocked: ['pin'],
});

/**
 * How a call ended:
 * - `ok`: a result without `isError`;
 * - `tool-error`: a result with `isError: true` (the tool failed, the protocol did not);
 * - `error`: a protocol or hintbox error (including a timeout after the last retry);
 * - `cancelled`: the client cancelled;
 * - `sandbox-died`: the sandbox's connection ended during the call;
 * - `not-run`: the call was denied or blocked, so never forwarded.
 * A record without an outcome is an intent whose end was never recorded (hintbox stopped
 * between forwarding the call and its answer).
 */
export type AuditOutcome = 'ok' | 'tool-error' | 'error' | 'cancelled' | 'sandbox-died' | 'not-run';

export const AUDIT_OUTCOMES: readonly AuditOutcome[] = [
  'ok',
  'tool-error',
  'error',
  'cancelled',
  'sandbox-died',
  'not-run',
];

/** What is known before the call is forwarded. Recorded first. */
export interface AuditIntent {
  /** The hintbox session (the id on the sandboxes' labels). */
  session: string;
  server: string;
  tool: string;
  /** Profile tags and the server's claimed tags, as from `toolTags()`. */
  tags: readonly ToolTag[];
  /** What the server said. */
  claimedHints: ClaimedHints;
  /** What hintbox acted on (after defaults and the operator's overrides). */
  effectiveHints: ToolHints;
  /** The sandbox the call is routed to; null when it was not routed (blocked). */
  sandbox: string | null;
  decision: AuditDecision;
  decidedBy: AuditDecider;
  /** The call's arguments exactly as received; undefined when the call had none. */
  arguments?: unknown;
  /** The pin hash of the definition the call was made against; null when unpinned. */
  pinHash: string | null;
}

/** How the call ended. Recorded once, after the answer (or right away for `not-run`). */
export interface AuditOutcomeReport {
  outcome: AuditOutcome;
  /** A short explanation: the error message, the sandbox's last words. Default none. */
  detail?: string;
  /** A hint the call was seen to break, e.g. a read-only tool's write failing (EROFS). Default none. */
  hintViolation?: string;
  /** How many times the call was sent (more than 1 after retries on timeout). Default 1. */
  attempts?: number;
}

/** One call as the audit trail has it. */
export interface AuditRecord extends Omit<AuditIntent, 'tags'> {
  id: string;
  /** When the intent was recorded (from the store's clock). */
  time: Date;
  tags: ToolTag[];
  /** Null: no outcome was recorded (intent only). */
  outcome: AuditOutcome | null;
  detail: string | null;
  hintViolation: string | null;
  /** Null while there is no outcome. */
  attempts: number | null;
  endedAt: Date | null;
  /** From intent to outcome, in ms; null while there is no outcome. */
  durationMs: number | null;
}

/** A filter on the audit trail; every field given must match. */
export interface AuditQuery {
  server?: string;
  tool?: string;
  /** Matches a profile tag or a server-claimed one (case-insensitive). */
  tag?: string;
  decision?: AuditDecision;
  decidedBy?: AuditDecider;
  /** `null` selects intents without an outcome. */
  outcome?: AuditOutcome | null;
  session?: string;
  /** Records at or after this time. */
  since?: Date;
  /** Records before this time. */
  until?: Date;
  /** At most this many records (the newest). Default 100, at most {@link MAX_AUDIT_LIMIT}. */
  limit?: number;
}

export const DEFAULT_AUDIT_LIMIT = 100;
export const MAX_AUDIT_LIMIT = 10_000;

export interface AuditLog {
  /** Records the intent before the call is forwarded; returns the record's id. */
  recordIntent(intent: AuditIntent): Promise<string>;
  /**
   * Records how the call ended. Throws when there is no such record, when it already has an
   * outcome (the first one stands), or when the outcome contradicts the decision (`not-run` is
   * the only outcome of a denied or blocked call, and only theirs).
   */
  recordOutcome(id: string, report: AuditOutcomeReport): Promise<void>;
  get(id: string): Promise<AuditRecord | undefined>;
  /** Matching records, newest first (by time, then by order of recording). */
  query(filter?: AuditQuery): Promise<AuditRecord[]>;
}

/**
 * One audit entry with its id and time already fixed, as the write-ahead journal keeps it
 * (`audit-journal.ts`): an intent (`at`: when it was recorded) or an outcome (`at`: when the
 * call ended), checked and normalised (see {@link auditIntentRow}, {@link auditOutcomeRow});
 * `at` is an ISO time as `Date.toISOString()` writes it.
 */
export type AuditBatchEntry =
  | { kind: 'intent'; id: string; at: string; intent: AuditIntentRow }
  | { kind: 'outcome'; id: string; at: string; outcome: AuditOutcomeRow };

/** The store's audit trail, with the batch write that the journal flushes through. */
export interface BatchAuditLog extends AuditLog {
  /**
   * Writes entries whose id and time are already fixed, in one or two statements (new records
   * with COPY where the store can, then the outcomes of earlier records). Not all or nothing,
   * but idempotent, so that a batch that failed half way is written whole by its retry, and a
   * journal can be replayed: an intent whose id is already
   * recorded is left as it is; an outcome only fills a record that has none and whose decision
   * it fits; an outcome whose record is missing or complete changes nothing. Entries must come
   * from {@link auditIntentRow} / {@link auditOutcomeRow} or, when read back from a file,
   * {@link checkAuditBatchEntry}: they are not checked again here (the database's constraints
   * still refuse a malformed one, and the whole batch with it).
   */
  recordBatch(entries: readonly AuditBatchEntry[]): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// The store

/** The schema as the store found and left it. */
export interface SchemaInfo {
  /** The schema version after opening. */
  version: number;
  /** The migrations this open applied (empty when the schema was current). */
  appliedNow: readonly number[];
}

export interface StateStore extends AsyncDisposable {
  readonly pins: PinStore;
  readonly audit: AuditLog;
  readonly schema: SchemaInfo;
  /** Closes the connection(s); the store is unusable afterwards. */
  close(): Promise<void>;
}

/** A store call that cannot be carried out as asked (not a database failure). */
export class StateStoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StateStoreError';
  }
}

// ---------------------------------------------------------------------------------------------
// Checking audit entries: pure, shared by the store and by the journal in front of it, so that
// an entry the journal accepts is one the store accepts.

/** The four known hints, each a boolean: the record says what was decided on, nothing else. */
export type RecordedHints = { [K in (typeof HINT_NAMES)[number]]?: boolean };

/** An intent as the store keeps it: checked, tags split by source and normalised, hints reduced. */
export interface AuditIntentRow {
  session: string;
  server: string;
  tool: string;
  /** Profile tags, normalised, in order. */
  tags: string[];
  /** The server's claimed tags, normalised, in order. */
  claimedTags: string[];
  claimedHints: RecordedHints;
  effectiveHints: RecordedHints;
  sandbox: string | null;
  decision: AuditDecision;
  decidedBy: AuditDecider;
  /** The arguments as the JSON text that is stored; null when the call had none. */
  arguments: string | null;
  pinHash: string | null;
}

/** An outcome as the store keeps it: checked, defaults filled in. */
export interface AuditOutcomeRow {
  outcome: AuditOutcome;
  detail: string | null;
  hintViolation: string | null;
  attempts: number;
}

function oneOf<T extends string>(value: unknown, allowed: readonly T[], what: string): T {
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  throw new StateStoreError(`${what}: expected one of ${allowed.join(', ')}, got ${JSON.stringify(value)}`);
}

function nonEmpty(value: unknown, what: string): string {
  if (typeof value !== 'string' || value === '') throw new StateStoreError(`${what}: expected a non-empty string`);
  return value;
}

function textOrNull(value: unknown, what: string): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== 'string') throw new StateStoreError(`${what}: expected a string or null`);
  return value;
}

const DECISIONS = Object.keys(DECIDERS_OF) as AuditDecision[];
const DECIDERS: AuditDecider[] = [...new Set(Object.values(DECIDERS_OF).flat())];

function recordedHints(hints: unknown, what: string): RecordedHints {
  if (hints === null || typeof hints !== 'object' || Array.isArray(hints)) {
    throw new StateStoreError(`${what}: expected an object`);
  }
  const out: RecordedHints = {};
  for (const name of HINT_NAMES) {
    const value = (hints as Record<string, unknown>)[name];
    if (typeof value === 'boolean') out[name] = value;
  }
  return out;
}

function tagNames(names: unknown, what: string): string[] {
  if (!Array.isArray(names) || !names.every((n): n is string => typeof n === 'string')) {
    throw new StateStoreError(`${what}: expected an array of strings`);
  }
  return names.map((n) => storable(normalizeTag(n)));
}

// eslint-disable-next-line no-control-regex -- NUL is what is looked for
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * At most this many bytes (UTF-8) of any text of an audit record are stored: tool names, tags,
 * error details, the sandbox's last words — mostly what a server controls. What is longer keeps
 * its beginning and ends in a note with the size and SHA-256 of the whole (see {@link storable}).
 * Not the arguments: they are the client's, and kept exactly (JSON text, where NUL and lone
 * surrogates are escapes).
 */
export const MAX_STORED_TEXT_BYTES = 8 * 1024;
/** Room kept for the note that ends a cut text: ` … [cut by hintbox: <bytes> bytes in all, SHA-256 <hex>]`. */
const CUT_NOTE_BYTES = 160;

/**
 * Text as the audit trail keeps it. Postgres text holds no NUL and only well-formed Unicode, so a
 * NUL or a lone surrogate (in a server's error message, a tool's name, …) becomes U+FFFD: without
 * this one such record made its whole batch fail, again at each retry, and the journal then
 * refused every call (fail closed) and a replay never got past it. And text longer than
 * {@link MAX_STORED_TEXT_BYTES} keeps only its beginning, then the size and SHA-256 of the whole
 * (as the server sent it): a 40 MB error message stored whole made its batch outlast the
 * store's answer time, so the trail stopped the same way. At most MAX_STORED_TEXT_BYTES come out,
 * so text that was stored once is stored unchanged again (a journal replayed).
 */
export function storable<T extends string | null>(text: T): T {
  if (text === null) return text;
  const clean = text.replace(UNSTORABLE, '\ufffd');
  const fits = capText(clean, MAX_STORED_TEXT_BYTES);
  if (!fits.whole) return clean as T;
  const { kept } = capText(clean, MAX_STORED_TEXT_BYTES - CUT_NOTE_BYTES);
  const whole = textDigest(text);
  return `${kept} … [cut by hintbox: ${whole.bytes} bytes in all, SHA-256 ${whole.sha256}]` as T;
}

/** Checks an intent and puts it in the form the store keeps. Throws a {@link StateStoreError}. */
export function auditIntentRow(intent: AuditIntent): AuditIntentRow {
  const decision = oneOf(intent.decision, DECISIONS, 'decision');
  const decidedBy = oneOf(intent.decidedBy, DECIDERS_OF[decision], `decidedBy of a ${decision} call`);
  if (!Array.isArray(intent.tags)) throw new StateStoreError('tags: expected an array');
  const named = (source: ToolTag['source']): unknown[] =>
    intent.tags.filter((t) => t.source === source).map((t) => t.name);
  return {
    session: storable(nonEmpty(intent.session, 'session')),
    server: storable(nonEmpty(intent.server, 'server')),
    tool: storable(nonEmpty(intent.tool, 'tool')),
    tags: tagNames(named('profile'), 'tags'),
    claimedTags: tagNames(named('server'), 'claimed tags'),
    claimedHints: recordedHints(intent.claimedHints, 'claimedHints'),
    effectiveHints: recordedHints(intent.effectiveHints, 'effectiveHints'),
    sandbox: storable(textOrNull(intent.sandbox, 'sandbox')),
    decision,
    decidedBy,
    arguments: intent.arguments === undefined ? null : JSON.stringify(intent.arguments),
    pinHash: storable(textOrNull(intent.pinHash, 'pinHash')),
  };
}

/** Checks an outcome and fills in its defaults. Throws a {@link StateStoreError}. */
export function auditOutcomeRow(report: AuditOutcomeReport): AuditOutcomeRow {
  const outcome = oneOf(report.outcome, AUDIT_OUTCOMES, 'outcome');
  const attempts = report.attempts ?? 1;
  if (!Number.isInteger(attempts) || attempts < 1) throw new StateStoreError('attempts: expected an integer ≥ 1');
  return {
    outcome,
    detail: storable(textOrNull(report.detail, 'detail')),
    hintViolation: storable(textOrNull(report.hintViolation, 'hintViolation')),
    attempts,
  };
}

/** `not-run` is the outcome of a denied or blocked call, and only theirs (the database checks the same). */
export function outcomeFitsDecision(outcome: AuditOutcome, decision: AuditDecision): boolean {
  return (decision === 'allowed') === (outcome !== 'not-run');
}

/** Why an outcome is refused when it contradicts its record's decision. */
export function contradictionMessage(id: string, outcome: AuditOutcome, decision: AuditDecision): string {
  return `audit record ${id}: outcome ${outcome} contradicts decision ${decision}`;
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * Checks a batch entry that comes from outside the process (a journal file): every field of
 * the right type and within its allowed values, as {@link auditIntentRow} and
 * {@link auditOutcomeRow} would have made it. Returns the entry rebuilt from the checked
 * fields only; throws a {@link StateStoreError} naming what is wrong.
 */
export function checkAuditBatchEntry(value: unknown): AuditBatchEntry {
  if (value === null || typeof value !== 'object') throw new StateStoreError('entry: expected an object');
  const entry = value as Record<string, unknown>;
  const id = nonEmpty(entry.id, 'id');
  const at = entry.at;
  if (typeof at !== 'string' || !ISO_TIME.test(at) || Number.isNaN(Date.parse(at))) {
    throw new StateStoreError('at: expected an ISO time such as 2026-03-01T12:00:00.000Z');
  }
  if (entry.kind === 'intent') {
    const row = entry.intent as Record<string, unknown> | null | undefined;
    if (row === null || typeof row !== 'object') throw new StateStoreError('intent: expected an object');
    const decision = oneOf(row.decision, DECISIONS, 'decision');
    const args = textOrNull(row.arguments, 'arguments');
    if (args !== null) {
      try {
        JSON.parse(args);
      } catch {
        throw new StateStoreError('arguments: expected JSON text');
      }
    }
    const intent: AuditIntentRow = {
      session: storable(nonEmpty(row.session, 'session')),
      server: storable(nonEmpty(row.server, 'server')),
      tool: storable(nonEmpty(row.tool, 'tool')),
      tags: tagNames(row.tags, 'tags'),
      claimedTags: tagNames(row.claimedTags, 'claimedTags'),
      claimedHints: recordedHints(row.claimedHints, 'claimedHints'),
      effectiveHints: recordedHints(row.effectiveHints, 'effectiveHints'),
      sandbox: storable(textOrNull(row.sandbox, 'sandbox')),
      decision,
      decidedBy: oneOf(row.decidedBy, DECIDERS_OF[decision], `decidedBy of a ${decision} call`),
      arguments: args,
      pinHash: storable(textOrNull(row.pinHash, 'pinHash')),
    };
    return { kind: 'intent', id, at, intent };
  }
  if (entry.kind === 'outcome') {
    const row = entry.outcome as Record<string, unknown> | null | undefined;
    if (row === null || typeof row !== 'object') throw new StateStoreError('outcome: expected an object');
    const outcome = auditOutcomeRow({
      outcome: row.outcome as AuditOutcome,
      detail: textOrNull(row.detail, 'detail') ?? undefined,
      hintViolation: textOrNull(row.hintViolation, 'hintViolation') ?? undefined,
      attempts: row.attempts as number,
    });
    return { kind: 'outcome', id, at, outcome };
  }
  throw new StateStoreError(`kind: expected intent or outcome, got ${JSON.stringify(entry.kind)}`);
}

// ---------------------------------------------------------------------------------------------
// The query adapter both databases implement

/**
 * Parameters are plain text or numbers, cast in the SQL (`$1::text::json`), so that pg and
 * PGlite, whose serializers differ for arrays, dates and JSON, receive the same thing.
 */
export type SqlParam = string | number | null;
export type SqlRow = Record<string, unknown>;

export interface SqlExecutor {
  /** Runs one statement. */
  query(sql: string, params?: readonly SqlParam[]): Promise<SqlRow[]>;
}

export interface SqlAdapter extends SqlExecutor {
  /** Runs `work` in a transaction on one connection: committed if it resolves, else rolled back. */
  transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /**
   * `COPY table (columns) FROM …` with `data` as its input, in COPY's text format: one
   * statement, all rows or none. Only where the driver can feed COPY its data (PGlite, and the
   * state daemon's client for it); the Postgres adapter has none.
   */
  copyRows?(table: string, columns: readonly string[], data: string): Promise<void>;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// The SQL implementation
//
// Columns come back only as text, int4 or float8 (json as ::text, timestamps as epoch ms in
// float8, arrays as JSON text): pg and PGlite parse int8, json, arrays and dates differently;
// on these they agree.

/** The columns of `hintbox.audit_calls` that a batch's COPY fills, in the order of its text. */
const AUDIT_COPY_COLUMNS = [
  'id',
  'started_at',
  'session',
  'server',
  'tool',
  'tags',
  'claimed_tags',
  'claimed_hints',
  'effective_hints',
  'sandbox',
  'decision',
  'decided_by',
  'arguments',
  'pin_hash',
  'outcome',
  'detail',
  'hint_violation',
  'attempts',
  'ended_at',
] as const;

/** A value in COPY's text format: `\N` for null; backslash, newline, return and tab escaped. */
function copyField(value: unknown): string {
  if (value === null || value === undefined) return '\\N';
  const text = Array.isArray(value)
    ? `{${(value as string[]).map((v) => `"${v.replace(/["\\]/g, '\\$&')}"`).join(',')}}`
    : typeof value === 'string'
      ? value
      : JSON.stringify(value); // numbers
  return text.replace(/[\\\n\r\t]/g, (c) => COPY_ESCAPES[c] ?? c);
}
const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** The rows of a batch's new records (as `recordBatch` builds them) in COPY's text format. */
function auditCopyText(rows: Iterable<Record<string, unknown>>): string {
  let text = '';
  for (const row of rows) text += AUDIT_COPY_COLUMNS.map((c) => copyField(row[c])).join('\t') + '\n';
  return text;
}

const PIN_COLUMNS = `server, tool, hash, definition::text AS definition,
  (extract(epoch FROM approved_at) * 1000)::float8 AS approved_ms, approved_by`;

const AUDIT_COLUMNS = `id, (extract(epoch FROM started_at) * 1000)::float8 AS started_ms, session, server, tool,
  array_to_json(tags)::text AS tags, array_to_json(claimed_tags)::text AS claimed_tags,
  claimed_hints::text AS claimed_hints, effective_hints::text AS effective_hints, sandbox,
  decision, decided_by, arguments::text AS arguments, pin_hash, outcome, detail, hint_violation, attempts,
  (extract(epoch FROM ended_at) * 1000)::float8 AS ended_ms`;

/** A JSON array text → text[], keeping the order. */
const TEXT_ARRAY = (param: string) =>
  `ARRAY(SELECT e FROM json_array_elements_text(${param}::text::json) WITH ORDINALITY AS a(e, i) ORDER BY i)`;

function text(row: SqlRow, column: string): string {
  const value = row[column];
  if (typeof value !== 'string') throw new StateStoreError(`expected text in column ${column}`);
  return value;
}

function nullableText(row: SqlRow, column: string): string | null {
  return row[column] === null || row[column] === undefined ? null : text(row, column);
}

function nullableNumber(row: SqlRow, column: string): number | null {
  const value = row[column];
  if (value === null || value === undefined) return null;
  // float8 and int4 arrive as numbers from both drivers; a string would mean a driver change.
  if (typeof value !== 'number') throw new StateStoreError(`expected a number in column ${column}`);
  return value;
}

function toPin(row: SqlRow): ApprovedPin {
  return {
    server: text(row, 'server'),
    tool: text(row, 'tool'),
    hash: text(row, 'hash'),
    definition: JSON.parse(text(row, 'definition')) as PinnedDefinition,
    approvedAt: new Date(nullableNumber(row, 'approved_ms') ?? Number.NaN),
    approvedBy: text(row, 'approved_by'),
  };
}

function toRecord(row: SqlRow): AuditRecord {
  const startedMs = nullableNumber(row, 'started_ms') ?? Number.NaN;
  const endedMs = nullableNumber(row, 'ended_ms');
  const args = nullableText(row, 'arguments');
  const tags = (JSON.parse(text(row, 'tags')) as string[]).map((name): ToolTag => ({ name, source: 'profile' }));
  const claimed = (JSON.parse(text(row, 'claimed_tags')) as string[]).map((name): ToolTag => ({
    name,
    source: 'server',
  }));
  const outcome = nullableText(row, 'outcome');
  return {
    id: text(row, 'id'),
    time: new Date(startedMs),
    session: text(row, 'session'),
    server: text(row, 'server'),
    tool: text(row, 'tool'),
    tags: [...tags, ...claimed],
    claimedHints: JSON.parse(text(row, 'claimed_hints')) as ClaimedHints,
    effectiveHints: JSON.parse(text(row, 'effective_hints')) as ToolHints,
    sandbox: nullableText(row, 'sandbox'),
    decision: oneOf(row.decision, DECISIONS, 'decision'),
    decidedBy: oneOf(row.decided_by, DECIDERS, 'decided_by'),
    ...(args !== null ? { arguments: JSON.parse(args) as unknown } : {}),
    pinHash: nullableText(row, 'pin_hash'),
    outcome: outcome === null ? null : oneOf(outcome, AUDIT_OUTCOMES, 'outcome'),
    detail: nullableText(row, 'detail'),
    hintViolation: nullableText(row, 'hint_violation'),
    attempts: nullableNumber(row, 'attempts'),
    endedAt: endedMs === null ? null : new Date(endedMs),
    durationMs: endedMs === null ? null : endedMs - startedMs,
  };
}

/**
 * The state store over any {@link SqlAdapter}. Open it with {@link SqlStateStore.open}, which
 * brings the schema up to date first.
 */
export class SqlStateStore implements StateStore {
  readonly pins: PinStore;
  readonly audit: BatchAuditLog;
  private closed = false;

  private constructor(
    private readonly db: SqlAdapter,
    readonly schema: SchemaInfo,
    private readonly clock: Clock,
    private readonly ids: IdGenerator,
    private readonly onClose: () => Promise<void>,
  ) {
    this.pins = {
      get: (server, tool) => this.getPin(server, tool),
      approve: (approval) => this.approvePin(approval),
      list: (server) => this.listPins(server),
    };
    this.audit = {
      recordIntent: (intent) => this.recordIntent(intent),
      recordOutcome: (id, report) => this.recordOutcome(id, report),
      recordBatch: (entries) => this.recordBatch(entries),
      get: (id) => this.getRecord(id),
      query: (filter) => this.queryRecords(filter ?? {}),
    };
  }

  /**
   * Migrates the database, then returns the store. On a migration failure the adapter is
   * closed and the error thrown. `onClose` runs after the adapter is closed (e.g. to release
   * a lock).
   */
  static async open(
    db: SqlAdapter,
    options: StateStoreOptions = {},
    onClose: () => Promise<void> = async () => {},
  ): Promise<SqlStateStore> {
    let schema: SchemaInfo;
    try {
      schema = await migrate(db);
    } catch (error) {
      await db.close().catch(() => undefined);
      await onClose().catch(() => undefined);
      throw error;
    }
    return new SqlStateStore(db, schema, options.clock ?? systemClock, options.ids ?? randomIds, onClose);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.db.close();
    } finally {
      await this.onClose();
    }
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private now(): string {
    return this.clock.now().toISOString();
  }

  private async getPin(server: string, tool: string): Promise<ApprovedPin | undefined> {
    const rows = await this.db.query(
      `SELECT ${PIN_COLUMNS} FROM hintbox.tool_pins WHERE server = $1::text AND tool = $2::text`,
      [server, tool],
    );
    return rows[0] ? toPin(rows[0]) : undefined;
  }

  private async approvePin(approval: PinApproval): Promise<ApprovedPin> {
    nonEmpty(approval.server, 'server');
    nonEmpty(approval.tool, 'tool');
    nonEmpty(approval.approvedBy, 'approvedBy');
    if (pinHash(approval.pin.definition) !== approval.pin.hash) {
      throw new StateStoreError(`pin of ${approval.server}/${approval.tool}: the hash is not the definition's`);
    }
    const rows = await this.db.query(
      `INSERT INTO hintbox.tool_pins (server, tool, hash, definition, approved_at, approved_by)
       VALUES ($1::text, $2::text, $3::text, $4::text::json, $5::text::timestamptz, $6::text)
       ON CONFLICT (server, tool) DO UPDATE SET hash = EXCLUDED.hash, definition = EXCLUDED.definition,
         approved_at = EXCLUDED.approved_at, approved_by = EXCLUDED.approved_by
       RETURNING ${PIN_COLUMNS}`,
      [
        approval.server,
        approval.tool,
        approval.pin.hash,
        JSON.stringify(approval.pin.definition),
        this.now(),
        approval.approvedBy,
      ],
    );
    return toPin(rows[0]!);
  }

  private async listPins(server?: string): Promise<ApprovedPin[]> {
    const rows = await this.db.query(
      `SELECT ${PIN_COLUMNS} FROM hintbox.tool_pins WHERE $1::text IS NULL OR server = $1::text ORDER BY server, tool`,
      [server ?? null],
    );
    return rows.map(toPin);
  }

  private async recordIntent(intent: AuditIntent): Promise<string> {
    const row = auditIntentRow(intent);
    const id = nonEmpty(this.ids(), 'generated id');
    await this.db.query(
      `INSERT INTO hintbox.audit_calls (id, started_at, session, server, tool, tags, claimed_tags, claimed_hints,
         effective_hints, sandbox, decision, decided_by, arguments, pin_hash)
       VALUES ($1::text, $2::text::timestamptz, $3::text, $4::text, $5::text, ${TEXT_ARRAY('$6')}, ${TEXT_ARRAY('$7')},
         $8::text::json, $9::text::json, $10::text, $11::text, $12::text, $13::text::json, $14::text)`,
      [
        id,
        this.now(),
        row.session,
        row.server,
        row.tool,
        JSON.stringify(row.tags),
        JSON.stringify(row.claimedTags),
        JSON.stringify(row.claimedHints),
        JSON.stringify(row.effectiveHints),
        row.sandbox,
        row.decision,
        row.decidedBy,
        row.arguments,
        row.pinHash,
      ],
    );
    return id;
  }

  private async recordOutcome(id: string, report: AuditOutcomeReport): Promise<void> {
    const row = auditOutcomeRow(report);
    const updated = await this.db.query(
      `UPDATE hintbox.audit_calls
       SET outcome = $2::text, detail = $3::text, hint_violation = $4::text, attempts = $5::int,
           ended_at = $6::text::timestamptz
       WHERE id = $1::text AND outcome IS NULL AND (decision = 'allowed') = ($2::text <> 'not-run')
       RETURNING id`,
      [id, row.outcome, row.detail, row.hintViolation, row.attempts, this.now()],
    );
    if (updated.length === 1) return;
    const existing = await this.getRecord(id);
    if (!existing) throw new StateStoreError(`no audit record ${id}`);
    if (existing.outcome !== null) {
      throw new StateStoreError(`audit record ${id} already has its outcome (${existing.outcome})`);
    }
    throw new StateStoreError(contradictionMessage(id, row.outcome, existing.decision));
  }

  private async recordBatch(entries: readonly AuditBatchEntry[]): Promise<void> {
    // Intents become rows to insert; an outcome in the same batch goes into its intent's row
    // (one statement cannot insert a row and then update it). Other outcomes update rows
    // recorded earlier. The first of two entries with the same id and kind stands.
    const intents = new Map<string, Record<string, unknown>>();
    const outcomes = new Map<string, Record<string, unknown>>();
    for (const entry of entries) {
      if (entry.kind !== 'intent' || intents.has(entry.id)) continue;
      const i = entry.intent;
      intents.set(entry.id, {
        n: intents.size,
        id: entry.id,
        started_at: entry.at,
        session: i.session,
        server: i.server,
        tool: i.tool,
        tags: i.tags,
        claimed_tags: i.claimedTags,
        // As text, cast to json by the statement: the stored text is exactly this.
        claimed_hints: JSON.stringify(i.claimedHints),
        effective_hints: JSON.stringify(i.effectiveHints),
        sandbox: i.sandbox,
        decision: i.decision,
        decided_by: i.decidedBy,
        arguments: i.arguments,
        pin_hash: i.pinHash,
      });
    }
    for (const entry of entries) {
      if (entry.kind !== 'outcome' || outcomes.has(entry.id)) continue;
      const o = entry.outcome;
      const ended = {
        outcome: o.outcome,
        detail: o.detail,
        hint_violation: o.hintViolation,
        attempts: o.attempts,
        ended_at: entry.at,
      };
      outcomes.set(entry.id, ended);
      const row = intents.get(entry.id);
      // An outcome that contradicts its decision is dropped, as `recordOutcome` would refuse it.
      if (row && outcomeFitsDecision(o.outcome, row.decision as AuditDecision)) Object.assign(row, ended);
    }
    const updates = [...outcomes].filter(([id]) => !intents.has(id)).map(([id, o]) => ({ id, ...o }));
    if (intents.size === 0 && updates.length === 0) return;
    // Where the store can, new records go in with COPY: about half the CPU per record of the
    // statement below (~25 against ~45 µs in the embedded store), whose CPU the calls share.
    // COPY cannot skip records that are there already (a replayed journal, a batch retried
    // after a lost answer): then it fails as a whole and the statement below, which can, does
    // the batch. The outcomes of earlier records are updated by the statement either way.
    if (intents.size > 0 && this.db.copyRows) {
      try {
        await this.db.copyRows('hintbox.audit_calls', AUDIT_COPY_COLUMNS, auditCopyText(intents.values()));
        intents.clear();
      } catch {
        // the statement below writes the batch, or says why it cannot
      }
      if (intents.size === 0 && updates.length === 0) return;
    }
    if (intents.size === 0) {
      // Outcomes only (calls that ended after their intent's batch): an UPDATE alone, which the
      // embedded store plans in a fraction of the time of the whole statement below (~1.7 ms).
      await this.db.query(
        `UPDATE hintbox.audit_calls AS c
         SET outcome = o.outcome, detail = o.detail, hint_violation = o.hint_violation,
             attempts = o.attempts, ended_at = o.ended_at
         FROM json_to_recordset($1::text::json) AS o(id text, outcome text, detail text, hint_violation text,
           attempts int, ended_at timestamptz)
         WHERE c.id = o.id AND c.outcome IS NULL AND (c.decision = 'allowed') = (o.outcome <> 'not-run')`,
        [JSON.stringify(updates)],
      );
      return;
    }
    // Each batch is parsed once into typed rows (`json_to_recordset`), not field by field: the
    // `->>` operator on a `json` value parses the element again for each field, which cost the
    // embedded store ~100 µs per call (against ~50 µs this way), CPU the sandboxes share.
    await this.db.query(
      `WITH inserted AS (
         INSERT INTO hintbox.audit_calls AS c (id, started_at, session, server, tool, tags, claimed_tags,
           claimed_hints, effective_hints, sandbox, decision, decided_by, arguments, pin_hash,
           outcome, detail, hint_violation, attempts, ended_at)
         SELECT r.id, r.started_at, r.session, r.server, r.tool, r.tags, r.claimed_tags, r.claimed_hints::json,
           r.effective_hints::json, r.sandbox, r.decision, r.decided_by, r.arguments::json, r.pin_hash,
           r.outcome, r.detail, r.hint_violation, r.attempts, r.ended_at
         FROM json_to_recordset($1::text::json) AS r(n int, id text, started_at timestamptz, session text,
           server text, tool text, tags text[], claimed_tags text[], claimed_hints text, effective_hints text,
           sandbox text, decision text, decided_by text, arguments text, pin_hash text, outcome text, detail text,
           hint_violation text, attempts int, ended_at timestamptz)
         ORDER BY r.n
         ON CONFLICT (id) DO UPDATE
           SET outcome = EXCLUDED.outcome, detail = EXCLUDED.detail, hint_violation = EXCLUDED.hint_violation,
               attempts = EXCLUDED.attempts, ended_at = EXCLUDED.ended_at
           WHERE c.outcome IS NULL AND EXCLUDED.outcome IS NOT NULL
             AND (c.decision = 'allowed') = (EXCLUDED.outcome <> 'not-run')
       ), updated AS (
         UPDATE hintbox.audit_calls AS c
         SET outcome = o.outcome, detail = o.detail, hint_violation = o.hint_violation,
             attempts = o.attempts, ended_at = o.ended_at
         FROM json_to_recordset($2::text::json) AS o(id text, outcome text, detail text, hint_violation text,
           attempts int, ended_at timestamptz)
         WHERE c.id = o.id AND c.outcome IS NULL AND (c.decision = 'allowed') = (o.outcome <> 'not-run')
       )
       SELECT 1`,
      [JSON.stringify([...intents.values()]), JSON.stringify(updates)],
    );
  }

  private async getRecord(id: string): Promise<AuditRecord | undefined> {
    const rows = await this.db.query(`SELECT ${AUDIT_COLUMNS} FROM hintbox.audit_calls WHERE id = $1::text`, [id]);
    return rows[0] ? toRecord(rows[0]) : undefined;
  }

  private async queryRecords(filter: AuditQuery): Promise<AuditRecord[]> {
    const limit = filter.limit ?? DEFAULT_AUDIT_LIMIT;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_AUDIT_LIMIT) {
      throw new StateStoreError(`limit: expected an integer from 1 to ${MAX_AUDIT_LIMIT}`);
    }
    const where: string[] = [];
    const params: SqlParam[] = [];
    const param = (value: SqlParam): string => {
      params.push(value);
      return `$${params.length}`;
    };
    if (filter.server !== undefined) where.push(`server = ${param(filter.server)}::text`);
    if (filter.tool !== undefined) where.push(`tool = ${param(filter.tool)}::text`);
    if (filter.session !== undefined) where.push(`session = ${param(filter.session)}::text`);
    if (filter.tag !== undefined) {
      const tag = param(normalizeTag(filter.tag));
      where.push(`(${tag}::text = ANY(tags) OR ${tag}::text = ANY(claimed_tags))`);
    }
    if (filter.decision !== undefined) {
      where.push(`decision = ${param(oneOf(filter.decision, DECISIONS, 'decision'))}::text`);
    }
    if (filter.decidedBy !== undefined) {
      where.push(`decided_by = ${param(oneOf(filter.decidedBy, DECIDERS, 'decidedBy'))}::text`);
    }
    if (filter.outcome === null) where.push('outcome IS NULL');
    else if (filter.outcome !== undefined) {
      where.push(`outcome = ${param(oneOf(filter.outcome, AUDIT_OUTCOMES, 'outcome'))}::text`);
    }
    if (filter.since !== undefined) where.push(`started_at >= ${param(filter.since.toISOString())}::text::timestamptz`);
    if (filter.until !== undefined) where.push(`started_at < ${param(filter.until.toISOString())}::text::timestamptz`);
    const rows = await this.db.query(
      `SELECT ${AUDIT_COLUMNS} FROM hintbox.audit_calls
       ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY started_at DESC, seq DESC
       LIMIT ${param(limit)}::int`,
      params,
    );
    return rows.map(toRecord);
  }
}
