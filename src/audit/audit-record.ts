import type { Caller } from '../util/caller-identity.js';
import { randomUUID } from 'node:crypto';
import type { ClaimedHints, ToolHints } from '../policy/hints.js';
import type { ToolTag } from '../policy/tool-tags.js';
import { capText, textDigest } from '../util/cap-text.js';

/**
 * The audit trail's records, as they are written, one JSON object per line, to the audit log
 * (`audit-log-writer.ts`). This module holds the types, the port the call guard writes through
 * (`AuditLog`), and the pure checks; README documents the schema ("Audit record schema").
 *
 * Schema version 1. Every line has `v`, `id`, `time`, `type` and, last, `prev`: the SHA-256
 * (hex) of the line before it in its chain (see `audit-chain.ts`).
 */

/** The schema version every line carries (`v`). A reader refuses lines of a version it does not know. */
export const AUDIT_SCHEMA_VERSION = 1;

// — Injected time and ids —

/** The audit log's source of time (wall time); tests pass a fixed or stepping clock. */
export { systemClock, type Clock } from '../util/clock.js';

/** Ids of audit records; tests pass a counter. */
export type IdGenerator = () => string;

export const randomIds: IdGenerator = () => randomUUID();

// — Calls —

/** Whether the call went ahead. */
export type AuditDecision = 'allowed' | 'denied' | 'blocked';

/**
 * Who or what decided:
 * - allowed by `auto` (the policy), `rule` (an operator allow rule), `pre-approval` (a matching
 *   pre-approval rule), `person` (a confirmation through the client) or `console` (a person's
 *   answer on hintbox's console page);
 * - denied by `rule` (a deny rule), `person`, `console`, `timeout` (no answer in time) or
 *   `no-elicitation` (the client cannot be asked);
 * - blocked by `pin` (the definition is not the approved one).
 */
export type AuditDecider =
  'auto' | 'rule' | 'pre-approval' | 'person' | 'console' | 'timeout' | 'no-elicitation' | 'pin';

/** Which deciders may give which decision. */
export const DECIDERS_OF: Readonly<Record<AuditDecision, readonly AuditDecider[]>> = Object.freeze({
  allowed: ['auto', 'rule', 'pre-approval', 'person', 'console'],
  denied: ['rule', 'person', 'console', 'timeout', 'no-elicitation'],
  blocked: ['pin'],
});

export const AUDIT_DECISIONS = Object.keys(DECIDERS_OF) as AuditDecision[];

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

/**
 * Things that happen besides calls. Each is one line of its `type`, with `session` and
 * `server`, and the fields of its kind. `caller` (approvals, reads, a server's requests): the
 * subject of the client whose person was asked, that read, or that was asked (serve with
 * credentials), with `client` when its credentials named one; both absent otherwise.
 */
export type AuditEvent =
  | {
      type: 'approval.asked';
      session: string;
      server: string;
      tool: string;
      reasons: readonly string[];
      caller?: string;
      client?: string;
      /** The console's confirmation, when the person may answer on its page too. */
      approval?: string;
    }
  | {
      type: 'approval.answered';
      session: string;
      server: string;
      tool: string;
      answer: 'approved' | 'declined' | 'timeout';
      caller?: string;
      client?: string;
      /** Where the person answered: through the client (elicitation) or on the console's page. Absent: the client. */
      by?: 'client' | 'console';
      approval?: string;
    }
  | { type: 'hint.violation'; session: string; server: string; tool: string | null; sandbox: string; violation: string }
  | { type: 'pin.narrowed'; session: string; server: string; tool: string; pin: string; changes: readonly string[] }
  | { type: 'approvals.unreadable'; session: string; server: string; error: string }
  | {
      /**
       * `hintbox serve` refused a request before any session saw it (401, 403). The token's
       * text is never recorded: only the name of a known token that was not allowed.
       */
      type: 'auth.denied';
      session: null;
      server: string;
      status: 401 | 403;
      reason: string;
      /** The known token's name or subject (a 403); null for a missing or unknown token. */
      caller: string | null;
      /** The client its credentials named (a 403 of an OAuth token with one). */
      client?: string;
      remoteAddress: string | null;
    }
  | {
      /**
       * Refusals over their budget (`denial-budget.ts`: per remote address and overall), not
       * written down one by one: how many since `since`, and the addresses with the most (at
       * most 10). Written when the window closes (every minute, and when hintbox stops).
       */
      type: 'denials.skipped';
      session: null;
      server: null;
      since: string;
      skipped: number;
      addresses: { address: string; skipped: number }[];
    }
  | { type: 'sandbox.start'; session: string; server: string; sandbox: string; container: string }
  | { type: 'sandbox.stop'; session: string; server: string; sandbox: string; container: string }
  | {
      /**
       * A sandbox's egress proxy refused a request (a host and port not in its list, or an
       * address no sandbox may reach). `tool`: the tools with calls in flight in the sandbox then,
       * comma-separated; null when none was.
       */
      type: 'egress.denied';
      session: string;
      server: string;
      tool: string | null;
      sandbox: string;
      host: string;
      port: number;
      method: string;
      /** Refusals of the sandbox before this one that were over the audit's budget and left out. */
      skipped?: number;
    }
  | {
      /** A read of the client (resources/read, prompts/get, completion/complete, …), once answered. */
      type: 'request';
      session: string;
      server: string;
      /** The sandbox that served it; null when it was refused before. */
      sandbox: string | null;
      method: string;
      /** The URI, the prompt's name, the completion's reference. */
      subject: string | null;
      outcome: 'ok' | 'error' | 'refused' | 'cancelled' | 'sandbox-died';
      detail: string | null;
      caller?: string;
      client?: string;
    }
  | {
      /** A request of the server to the client (sampling, elicitation, roots), before it is passed on. */
      type: 'server.request';
      session: string;
      server: string;
      /** Names the request in its `server.request.answered` line. */
      ref: string;
      sandbox: string;
      method: string;
      /** The tool (or read) in flight in that sandbox it was bound to; null when none was. */
      boundTo: string | null;
      decision: 'passed' | 'refused' | 'answered-by-hintbox';
      reason: string | null;
      caller?: string;
      client?: string;
    }
  | {
      type: 'server.request.answered';
      session: string;
      server: string;
      ref: string;
      sandbox: string;
      method: string;
      outcome: 'ok' | 'error';
      detail: string | null;
    };

export type AuditEventType = AuditEvent['type'];

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

/** Fields every line has, in the order they are written (`prev` comes last). */
export interface AuditLineBase {
  v: number;
  /** Unique per record; for calls the call's id, which the outcome names as `callId`. */
  id: string;
  /** ISO 8601 UTC with milliseconds. */
  time: string;
  type: string;
  /** SHA-256 (hex) of the line before in the chain; null on the first line of a chain. */
  prev: string | null;
}

/** The first line of every file. */
export interface LogOpenLine extends AuditLineBase {
  type: 'log.open';
  /** The chain: one per hintbox process. */
  chain: string;
  /** The file's position in its chain, from 0. */
  seq: number;
  host: string;
  pid: number;
  /** The operating-system user hintbox runs as. */
  subject: string;
  hintbox: string;
}

/** The last line of a chain whose process closed it (a chain without one was cut short). */
export interface LogCloseLine extends AuditLineBase {
  type: 'log.close';
}

export interface CallIntentLine extends AuditLineBase {
  type: 'call.intent';
  session: string;
  server: string;
  tool: string;
  /** Profile tags (normalised). */
  tags: string[];
  /** Tags the server claimed in the tool's `_meta`. */
  claimedTags: string[];
  claimedHints: ClaimedHints;
  effectiveHints: ToolHints;
  sandbox: string | null;
  decision: AuditDecision;
  decidedBy: AuditDecider;
  /** The arguments as received; null when the call had none. */
  arguments: unknown;
  /** The pin hash (SHA-256 of the approved definition) the call was made against; null when unpinned. */
  pin: string | null;
  traceId: string | null;
  /** The caller's subject (a bearer token's name, a JWT's `sub`); null when none; absent from lines written before it was added. */
  caller?: string | null;
  /**
   * The client its credentials named (OAuth's `client_id` or `azp`); null when none. Absent from
   * lines written before it was added, whose `caller` held both as `sub (client id)`.
   */
  client?: string | null;
}

export interface CallOutcomeLine extends AuditLineBase {
  type: 'call.outcome';
  /** The `id` of the call's intent. */
  callId: string;
  outcome: AuditOutcome;
  detail: string | null;
  hintViolation: string | null;
  attempts: number;
  /** From the intent's time to this line's. */
  durationMs: number;
}

export type AuditEventLine = AuditLineBase & AuditEvent;

export type AuditLine = LogOpenLine | LogCloseLine | CallIntentLine | CallOutcomeLine | AuditEventLine;

export const AUDIT_LINE_TYPES: readonly AuditLine['type'][] = [
  'log.open',
  'log.close',
  'call.intent',
  'call.outcome',
  'approval.asked',
  'approval.answered',
  'hint.violation',
  'pin.narrowed',
  'approvals.unreadable',
  'auth.denied',
  'denials.skipped',
  'sandbox.start',
  'sandbox.stop',
  'egress.denied',
  'request',
  'server.request',
  'server.request.answered',
];

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const SHA256 = /^[0-9a-f]{64}$/;

/**
 * Parses one line and checks what every reader relies on: the version, the common fields, and
 * per type the fields `hintbox audit` reads. Throws an {@link AuditRecordError} naming the problem.
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
  const line = value as Record<string, unknown>;
  if (line.v !== AUDIT_SCHEMA_VERSION) {
    throw new AuditRecordError(
      `schema version ${JSON.stringify(line.v)}: this hintbox reads version ${AUDIT_SCHEMA_VERSION}`,
    );
  }
  if (typeof line.id !== 'string' || line.id === '') throw new AuditRecordError('id: expected a non-empty string');
  if (typeof line.time !== 'string' || !ISO_TIME.test(line.time))
    throw new AuditRecordError('time: expected an ISO time');
  if (!(AUDIT_LINE_TYPES as readonly unknown[]).includes(line.type)) {
    throw new AuditRecordError(`type: unknown type ${JSON.stringify(line.type)}`);
  }
  if (line.prev !== null && (typeof line.prev !== 'string' || !SHA256.test(line.prev))) {
    throw new AuditRecordError('prev: expected a SHA-256 (hex) or null');
  }
  const need = (field: string, ok: (v: unknown) => boolean, what: string): void => {
    if (!ok(line[field])) throw new AuditRecordError(`${String(line.type)}: ${field}: expected ${what}`);
  };
  const str = (v: unknown): boolean => typeof v === 'string';
  switch (line.type) {
    case 'log.open':
      need('chain', str, 'a string');
      need('seq', (v) => Number.isInteger(v) && (v as number) >= 0, 'an integer ≥ 0');
      break;
    case 'call.intent':
      need('server', str, 'a string');
      need('tool', str, 'a string');
      need('session', str, 'a string');
      need('decision', (v) => (AUDIT_DECISIONS as unknown[]).includes(v), AUDIT_DECISIONS.join(' | '));
      need('tags', (v) => Array.isArray(v), 'an array');
      need('claimedTags', (v) => Array.isArray(v), 'an array');
      need('caller', (v) => v === undefined || v === null || typeof v === 'string', 'a string or null');
      need('client', (v) => v === undefined || v === null || typeof v === 'string', 'a string or null');
      break;
    case 'call.outcome':
      need('callId', str, 'a string');
      need('outcome', (v) => (AUDIT_OUTCOMES as unknown[]).includes(v), AUDIT_OUTCOMES.join(' | '));
      break;
    default:
      break;
  }
  return line as unknown as AuditLine;
}
