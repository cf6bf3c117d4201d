import type { Caller } from '../util/caller-identity.js';
import { randomUUID } from 'node:crypto';
import type { ClaimedHints, ToolHints } from '../policy/hints.js';
import type { ToolTag } from '../policy/tool-tags.js';
import { capText, textDigest } from '../util/cap-text.js';
import type { z } from 'zod';
import type { AuditDeciderSchema } from './audit-line-schema.js';
import {
  AuditDecisionSchema,
  AuditOutcomeSchema,
  readAuditLine,
  type AuditEvent,
  type AuditLine,
  type AuditLineOf,
} from './audit-line-schema.js';

/**
 * The audit trail's records, as they are written, one JSON object per line, to the audit log
 * (`audit-log-writer.ts`). This module holds the port the call guard writes through
 * (`AuditLog`), what it takes, and the pure checks; the lines themselves are zod schemas, their
 * types derived from them (`audit-line-schema.ts`, re-exported here).
 */

export {
  AUDIT_LINE_TYPES,
  AUDIT_SCHEMA_VERSION,
  auditLineFields,
  type AuditEvent,
  type AuditEventType,
  type AuditFieldDoc,
  type AuditLine,
  type AuditLineType,
} from './audit-line-schema.js';

// — Injected time and ids —

/** The audit log's source of time (wall time); tests pass a fixed or stepping clock. */
export { systemClock, type Clock } from '../util/clock.js';

/** Ids of audit records; tests pass a counter. */
export type IdGenerator = () => string;

export const randomIds: IdGenerator = () => randomUUID();

// — Calls —

/** Whether the call went ahead. */
export type AuditDecision = z.infer<typeof AuditDecisionSchema>;

/**
 * Who or what decided:
 * - allowed by `auto` (the policy), `rule` (an operator allow rule), `pre-approval` (a matching
 *   pre-approval rule), `person` (a confirmation through the client) or `console` (a person's
 *   answer on hintbox's console page);
 * - denied by `rule` (a deny rule), `person`, `console`, `timeout` (no answer in time) or
 *   `no-elicitation` (the client cannot be asked);
 * - blocked by `pin` (the definition is not the approved one).
 */
export type AuditDecider = z.infer<typeof AuditDeciderSchema>;

/** Which deciders may give which decision. */
export const DECIDERS_OF: Readonly<Record<AuditDecision, readonly AuditDecider[]>> = Object.freeze({
  allowed: ['auto', 'rule', 'pre-approval', 'person', 'console'],
  denied: ['rule', 'person', 'console', 'timeout', 'no-elicitation'],
  blocked: ['pin'],
});

export const AUDIT_DECISIONS: readonly AuditDecision[] = AuditDecisionSchema.options;

/**
 * How a call ended:
 * - `ok`: a result without `isError`;
 * - `tool-error`: a result with `isError: true` (the tool failed, the protocol did not);
 * - `error`: a protocol or hintbox error (including a timeout after the last retry);
 * - `cancelled`: the client cancelled;
 * - `sandbox-died`: the sandbox's connection ended during the call;
 * - `not-run`: the call was denied or blocked, so never forwarded.
 * An intent without an outcome line is a call whose end was never recorded (hintbox stopped
 * between forwarding the call and its answer).
 */
export type AuditOutcome = z.infer<typeof AuditOutcomeSchema>;

export const AUDIT_OUTCOMES: readonly AuditOutcome[] = AuditOutcomeSchema.options;

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
  /** The W3C trace id of the call (from `_meta.traceparent`), when the client sent one. */
  traceId?: string;
  /**
   * Who called under `hintbox serve`: the subject its credentials named (a bearer token's name, a
   * JWT's `sub`) and the client, written as the fields `caller` and `client`; null when nobody was
   * identified (stdio, a serve without credentials). Default null.
   */
  caller?: Caller | null;
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

/** The audit trail as the call guard and the session write it. */
export interface AuditLog {
  /**
   * Records the intent before the call is forwarded; returns the call's id. Throws (rejects)
   * when the intent cannot be recorded: the call must then be refused.
   */
  recordIntent(intent: AuditIntent): Promise<string>;
  /**
   * Records how the call ended. Throws when there is no such call in flight (unknown, or its
   * outcome already recorded: the first one stands), or when the outcome contradicts the
   * decision (`not-run` is the outcome of a denied or blocked call, and only theirs).
   */
  recordOutcome(id: string, report: AuditOutcomeReport): Promise<void>;
  /** Records an event; failures are the writer's to log (an event never refuses a call). */
  recordEvent?(event: AuditEvent): void;
}

/** A call's outcome or an event cannot be recorded as asked (not an I/O failure). */
export class AuditRecordError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AuditRecordError';
  }
}

/** `not-run` is the outcome of a denied or blocked call, and only theirs. */
export function outcomeFitsDecision(outcome: AuditOutcome, decision: AuditDecision): boolean {
  return (decision === 'allowed') === (outcome !== 'not-run');
}

/**
 * At most this many bytes (UTF-8) of any text of a record are kept: tool names, tags, sandbox,
 * error details, the sandbox's last words, hint violations — mostly what a server controls. Not
 * the arguments: they are the client's, and kept exactly.
 */
export const MAX_STORED_TEXT_BYTES = 8 * 1024;
/** Room kept for the note that ends a cut text: ` … [cut by hintbox: <bytes> bytes in all, SHA-256 <hex>]`. */
const CUT_NOTE_BYTES = 160;

/**
 * Text as a record keeps it: whole when it fits in {@link MAX_STORED_TEXT_BYTES}; else its
 * beginning, then the size and SHA-256 of the whole (as the server sent it), so that a copy of
 * the whole can still be matched. A 40 MB error message kept whole would make every reader of
 * the log (and its sink) pay for it. At most MAX_STORED_TEXT_BYTES come out, so a cut text is
 * kept unchanged again. NUL and lone surrogates stay as they are: JSON writes them as escapes.
 */
export function storedText<T extends string | null>(text: T): T {
  if (text === null) return text;
  if (!capText(text, MAX_STORED_TEXT_BYTES).whole) return text;
  const { kept } = capText(text, MAX_STORED_TEXT_BYTES - CUT_NOTE_BYTES);
  const whole = textDigest(text);
  return `${kept} … [cut by hintbox: ${whole.bytes} bytes in all, SHA-256 ${whole.sha256}]` as T;
}

// — Lines —

export type LogOpenLine = AuditLineOf<'log.open'>;
export type LogCloseLine = AuditLineOf<'log.close'>;
export type CallIntentLine = AuditLineOf<'call.intent'>;
export type CallOutcomeLine = AuditLineOf<'call.outcome'>;
/** A line of an event (any type but the log's and the calls'). */
export type AuditEventLine = AuditLineOf<AuditEvent['type']>;

/**
 * Parses one line with its type's schema (`audit-line-schema.ts`): the version, the fields every
 * line has, and the fields of its type. Fields nobody declared are kept. Throws an
 * {@link AuditRecordError} naming the problem, and the field, in one line.
 */
export function parseAuditLine(text: string): AuditLine {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new AuditRecordError('not a JSON object');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new AuditRecordError('not a JSON object');
  }
  const line = readAuditLine(value as Record<string, unknown>);
  if (typeof line === 'string') throw new AuditRecordError(line);
  return line;
}
