import type { Caller } from '../util/caller-identity.js';
import { randomUUID } from 'node:crypto';
import type { ClaimedHints, ToolHints } from '../policy/hints.js';
import type { ToolTag } from '../policy/tool-tags.js';
import { capText, textDigest } from '../util/cap-text.js';
import type { z } from 'zod';
import {
  AUDIT_HEAD_FIELDS,
  AUDIT_LINE_SCHEMAS,
  AUDIT_LINE_TYPES,
  AUDIT_SCHEMA_VERSION,
  AuditDecisionSchema,
  AuditOutcomeSchema,
  type AuditDeciderSchema,
  type AuditEvent,
  type AuditLine,
  type AuditLineOf,
  type AuditLineType,
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
  type AuditEvent,
  type AuditEventType,
  type AuditLine,
  type AuditLineType,
} from './audit-line-schema.js';
export { auditLineFields, type AuditFieldDoc } from './audit-line-fields.js';

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
 *   pre-approval rule), `standing` (the person's standing answer in the lock file, `hintbox approve
 *   --always`; a `standing.used` event names it), `person` (a confirmation through the client) or `console` (a person's
 *   answer on hintbox's console page);
 * - denied by `rule` (a deny rule), `person`, `console`, `timeout` (no answer in time) or
 *   `no-elicitation` (the client cannot be asked), or `request-state` (a 2026 client's retry carried
 *   a `requestState` that does not redeem for the call: `approval.refused` says why);
 * - blocked by `pin` (the definition is not the approved one).
 */
export type AuditDecider = z.infer<typeof AuditDeciderSchema>;

/** Which deciders may give which decision. */
export const DECIDERS_OF: Readonly<Record<AuditDecision, readonly AuditDecider[]>> = Object.freeze({
  allowed: ['auto', 'rule', 'pre-approval', 'standing', 'person', 'console'],
  denied: ['rule', 'person', 'console', 'timeout', 'no-elicitation', 'request-state'],
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
  /** The client's whole `traceparent`: the parent of the call's span (not written to the log). */
  traceparent?: string;
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
 * The fields a reader relies on, by type, required on every line read (the head is, always).
 * The others are checked when present and may be absent: a line without them, written by hand
 * or by a tool, reads as it always did; every line hintbox writes has them all.
 */
const REQUIRED_ON_READ: { readonly [T in AuditLineType]?: readonly (keyof (typeof AUDIT_LINE_SCHEMAS)[T]['shape'])[] } =
  {
    'log.open': ['chain', 'seq'],
    'call.intent': ['session', 'server', 'tool', 'tags', 'claimedTags', 'decision'],
    'call.outcome': ['callId', 'outcome'],
  };

/** The schemas a line is read with (a field nobody declared passes: the line is returned as written). */
const READ_SCHEMAS: ReadonlyMap<string, z.ZodType> = new Map(
  AUDIT_LINE_TYPES.map((type) => {
    const schema: z.ZodObject = AUDIT_LINE_SCHEMAS[type];
    const required = new Set<string>([...AUDIT_HEAD_FIELDS, ...(REQUIRED_ON_READ[type] ?? [])]);
    const mask: Record<string, true> = {};
    for (const key of Object.keys(schema.shape)) if (!required.has(key)) mask[key] = true;
    return [type, schema.partial(mask as Record<never, true>)];
  }),
);

/**
 * Parses one line with its type's schema (`audit-line-schema.ts`): the version, the fields every
 * line has, and the fields of its type; returns it as written (fields nobody declared too). Throws an
 * {@link AuditRecordError} naming the problem in one line: the field (its path), after the
 * line's type unless every line has that field.
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
  const { v, type } = value as Record<string, unknown>;
  if (v !== AUDIT_SCHEMA_VERSION) {
    throw new AuditRecordError(
      `schema version ${JSON.stringify(v)}: this hintbox reads version ${AUDIT_SCHEMA_VERSION}`,
    );
  }
  const schema = typeof type === 'string' ? READ_SCHEMAS.get(type) : undefined;
  if (!schema) throw new AuditRecordError(`type: unknown type ${JSON.stringify(type)}`);
  const parsed = schema.safeParse(value);
  // The line as written, in its order (the schemas change no value: their output is the line).
  // Cast: a field not required on read may be absent (see REQUIRED_ON_READ), as it could before.
  if (parsed.success) return value as AuditLine;
  const { issues } = parsed.error;
  // The head first, in its order: a reader relies on it before any field of the kind.
  const head = AUDIT_HEAD_FIELDS.map((field) => issues.find((i) => i.path[0] === field)).find(Boolean);
  const issue = head ?? issues[0]!;
  const where = `${head ? '' : `${String(type)}: `}${issue.path.map(String).join('.')}`;
  throw new AuditRecordError(`${where}: ${issue.message}`);
}
