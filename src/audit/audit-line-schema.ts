import { z } from 'zod';

/**
 * The audit log's lines as zod schemas, one per `type`; the line types are derived from them
 * (`audit-record.ts` re-exports them), and `parseAuditLine` reads every line through them, so
 * the format, its types, its reader and its documentation (`audit-line-fields.ts`) are one.
 *
 * Schema version 1. Every line has `v`, `id`, `time`, `type` and, last, `prev`: the SHA-256
 * (hex) of the line before it in its chain (see `audit-chain.ts`). A field added after its
 * kind was first written is optional, so that lines of every earlier hintbox still read; a
 * reader requires only the fields it relies on and checks the others when present
 * (`REQUIRED_ON_READ` in `audit-record.ts`), and fields nobody declared pass as written.
 */

/** The schema version every line carries (`v`). A reader refuses lines of a version it does not know. */
export const AUDIT_SCHEMA_VERSION = 1;

// — Field types, each with the one-line message a refused line gets —

const text = z.string({ error: 'expected a string' });
const textOrNull = z.string({ error: 'expected a string or null' }).nullable();
const texts = z.array(text, { error: 'expected an array' });
const count = z.number({ error: 'expected an integer ≥ 0' }).int({ error: 'expected an integer ≥ 0' }).min(0);
const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `expected ${values.join(' | ')}` });
const hint = z.boolean({ error: 'expected a boolean' });

/** Whether the call went ahead. */
export const AuditDecisionSchema = oneOf(['allowed', 'denied', 'blocked']);

/** Who or what decided (see `DECIDERS_OF` for which may give which decision). */
export const AuditDeciderSchema = oneOf([
  'auto',
  'rule',
  'pre-approval',
  'standing',
  'person',
  'console',
  'timeout',
  'no-elicitation',
  'pin',
  'request-state',
]);

/** How a call ended (see `AuditOutcome` in `audit-record.ts`). */
export const AuditOutcomeSchema = oneOf(['ok', 'tool-error', 'error', 'cancelled', 'sandbox-died', 'not-run']);

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const SHA256 = /^[0-9a-f]{64}$/;

/** Fields every line has before its own, in the order they are written. */
const HEAD = {
  v: z.literal(AUDIT_SCHEMA_VERSION).describe('The schema version.'),
  id: z
    .string({ error: 'expected a non-empty string' })
    .min(1, { error: 'expected a non-empty string' })
    .describe("Unique per record; for calls the call's id, which the outcome names as `callId`."),
  time: z
    .string({ error: 'expected an ISO time' })
    .regex(ISO_TIME, { error: 'expected an ISO time' })
    .describe('ISO 8601 UTC with milliseconds.'),
};
const PREV = z
  .string({ error: 'expected a SHA-256 (hex) or null' })
  .regex(SHA256, { error: 'expected a SHA-256 (hex) or null' })
  .nullable()
  .describe('SHA-256 (hex) of the line before in the chain; null on the first line of a chain. Written last.');
/** The fields every line has, so a message names them without the line's type. */
export const AUDIT_HEAD_FIELDS: readonly string[] = ['v', 'id', 'time', 'type', 'prev'];

/** A kind's fields (its `type` first), as the writer's input: without the head and `prev`. */
const kind = <const T extends string, S extends z.ZodRawShape>(type: T, description: string, shape: S) =>
  z.object({ type: z.literal(type), ...shape }).describe(description);

// — Events: things that happen besides calls; the writer takes them as `AuditEvent` —

/** Who was asked, or read: the client's subject and client (serve with credentials); absent otherwise. */
const asker = {
  caller: text.optional().describe('The subject of the client (serve with credentials); absent otherwise.'),
  client: text.optional().describe('The client its credentials named, when they named one.'),
};
const approval = text.optional().describe("The console's confirmation, when the person may answer on its page too.");

export const AUDIT_EVENT_SCHEMAS = {
  'approval.asked': kind(
    'approval.asked',
    "A person was asked to confirm a call (through the client, or on the console's page too).",
    {
      session: text,
      server: text,
      tool: text,
      reasons: texts.readonly(),
      ...asker,
      approval,
    },
  ),
  'approval.answered': kind('approval.answered', "The person's answer, or its timeout.", {
    session: text,
    server: text,
    tool: text,
    answer: oneOf(['approved', 'declined', 'timeout']),
    ...asker,
    by: oneOf(['client', 'console'])
      .optional()
      .describe('Where the person answered; absent: through the client (elicitation).'),
    approval,
  }),
  'standing.used': kind(
    'standing.used',
    "A call ran on a person's standing answer (`hintbox approve --always`) instead of a question: its call record, and the answer it used.",
    {
      session: text,
      server: text,
      tool: text,
      callId: text.describe("The call's record (decidedBy `standing`)."),
      pin: text.describe(
        'The SHA-256 of the approved definition the answer was given for (and the call was made against).',
      ),
      givenBy: text.describe('Who gave the standing answer, as the lock file says.'),
      givenAt: text.describe('When it was given, as the lock file says.'),
    },
  ),
  'standing.voided': kind(
    'standing.voided',
    'A standing answer was given for another definition of the tool than the one now served: it no longer applies, and the person is asked again (once per tool and session).',
    {
      session: text,
      server: text,
      tool: text,
      pin: text.describe('The SHA-256 of the definition served now.'),
      givenFor: text.describe('The SHA-256 of the definition the answer was given for.'),
    },
  ),
  'approval.refused': kind(
    'approval.refused',
    "A 2026 client's retry carried a `requestState` that does not redeem for its call, or too many confirmations wait for an answer to ask one more (`too-many`): the call is refused, not run (a `mismatch` of the `question` alone is asked again).",
    {
      session: text,
      server: text,
      tool: text,
      ...asker,
      reason: oneOf(['malformed', 'forged', 'expired', 'mismatch', 'replayed', 'too-many']),
      detail: text.describe('The reason in words (for `mismatch`: the bound fields that differ).'),
    },
  ),
  'hint.violation': kind(
    'hint.violation',
    'A tool was seen to break a hint (a read-only tool writing, a closed-world tool reaching out).',
    {
      session: text,
      server: text,
      tool: textOrNull,
      sandbox: text,
      violation: text,
    },
  ),
  'pin.narrowed': kind(
    'pin.narrowed',
    "A tool's definition changed in ways that only add friction; the pin follows it.",
    { session: text, server: text, tool: text, pin: text, changes: texts.readonly() },
  ),
  'approvals.unreadable': kind(
    'approvals.unreadable',
    'The lock file could not be read at a re-listing: every tool is blocked.',
    { session: text, server: text, error: text },
  ),
  'auth.denied': kind(
    'auth.denied',
    "`hintbox serve` refused a request before any session saw it; a token's text is never recorded.",
    {
      session: z.null({ error: 'expected null' }),
      server: text,
      status: z.union([z.literal(401), z.literal(403)], { error: 'expected 401 | 403' }),
      reason: text,
      caller: textOrNull.describe("The known token's name or subject (a 403); null for a missing or unknown token."),
      client: text.optional(),
      remoteAddress: textOrNull,
    },
  ),
  'denials.skipped': kind(
    'denials.skipped',
    'Refusals over their budget (`denial-budget.ts`), counted: since when, and the addresses with the most.',
    {
      session: z.null({ error: 'expected null' }),
      server: z.null({ error: 'expected null' }),
      since: text,
      skipped: count,
      addresses: z.array(z.object({ address: text, skipped: count }), { error: 'expected an array' }),
    },
  ),
  'sandbox.start': kind('sandbox.start', 'A sandbox (container) started.', {
    session: text,
    server: text,
    sandbox: text,
    container: text,
  }),
  'sandbox.stop': kind('sandbox.stop', 'A sandbox (container) stopped.', {
    session: text,
    server: text,
    sandbox: text,
    container: text,
  }),
  'egress.denied': kind(
    'egress.denied',
    "A sandbox's egress proxy refused a request; `tool`: the tools in flight then, comma-separated, or null.",
    {
      session: text,
      server: text,
      tool: textOrNull,
      sandbox: text,
      host: text,
      port: z.number({ error: 'expected a number' }),
      method: text,
      skipped: count
        .optional()
        .describe("Refusals of the sandbox before this one that were over the audit's budget and left out."),
    },
  ),
  request: kind(
    'request',
    'A read of the client (resources/read, prompts/get, completion/complete, …), once answered.',
    {
      session: text,
      server: text,
      sandbox: textOrNull.describe('Null when it was refused before reaching a sandbox.'),
      method: text,
      subject: textOrNull.describe("The URI, the prompt's name, the completion's reference."),
      outcome: oneOf(['ok', 'error', 'refused', 'cancelled', 'sandbox-died']),
      detail: textOrNull,
      ...asker,
    },
  ),
  'server.request': kind(
    'server.request',
    'A request of the server to the client (sampling, elicitation, roots), before it is passed on.',
    {
      session: text,
      server: text,
      ref: text.describe('Names the request in its `server.request.answered` line.'),
      sandbox: text,
      method: text,
      boundTo: textOrNull.describe('The tool (or read) in flight in that sandbox it was bound to; null when none was.'),
      decision: oneOf(['passed', 'refused', 'answered-by-hintbox']),
      reason: textOrNull,
      ...asker,
    },
  ),
  'server.request.answered': kind('server.request.answered', "How a server's request to the client was answered.", {
    session: text,
    server: text,
    ref: text,
    sandbox: text,
    method: text,
    outcome: oneOf(['ok', 'error']),
    detail: textOrNull,
  }),
};

// — Lines —

/** A line of a kind: the head, the kind's fields, then `prev`. */
const line = <S extends z.ZodRawShape>(body: z.ZodObject<S>) =>
  z.object({ ...HEAD, ...body.shape, prev: PREV }).describe(body.description ?? '');

const hints = { readOnlyHint: hint, destructiveHint: hint, idempotentHint: hint, openWorldHint: hint };
const claimed = {
  readOnlyHint: hint.optional(),
  destructiveHint: hint.optional(),
  idempotentHint: hint.optional(),
  openWorldHint: hint.optional(),
};

/** Each line type's schema, by `type`. */
export const AUDIT_LINE_SCHEMAS = {
  'log.open': line(
    kind('log.open', 'The first line of every file.', {
      chain: text.describe('The chain: one per hintbox process.'),
      seq: count.describe("The file's position in its chain, from 0."),
      host: text,
      pid: count,
      subject: text.describe('The operating-system user hintbox runs as.'),
      hintbox: text,
    }),
  ),
  'log.close': line(
    kind('log.close', 'The last line of a chain whose process closed it (a chain without one was cut short).', {}),
  ),
  'call.intent': line(
    kind('call.intent', "What is known before a call is forwarded; its `id` is the call's.", {
      session: text,
      server: text,
      tool: text,
      tags: texts.describe('Profile tags (normalised).'),
      claimedTags: texts.describe("Tags the server claimed in the tool's `_meta`."),
      claimedHints: z
        .object(claimed, { error: 'expected an object' })
        .describe('What the server said: each hint a boolean, or absent.'),
      effectiveHints: z
        .object(hints, { error: 'expected an object' })
        .describe("What hintbox acted on (after defaults and the operator's overrides)."),
      sandbox: textOrNull.describe('The sandbox the call was routed to; null when it was not routed (blocked).'),
      decision: AuditDecisionSchema,
      decidedBy: AuditDeciderSchema,
      arguments: z.unknown().describe('The arguments as received; null when the call had none.'),
      pin: textOrNull.describe(
        'The pin hash (SHA-256 of the approved definition) the call was made against; null when unpinned.',
      ),
      traceId: textOrNull
        .optional()
        .describe('The W3C trace id (from `_meta.traceparent`); null when none; absent from the first lines written.'),
      caller: textOrNull
        .optional()
        .describe("The caller's subject (a token's name, a JWT's `sub`); null when none; absent from lines before it."),
      client: textOrNull
        .optional()
        .describe(
          'The client its credentials named; null when none; absent from lines before it (their `caller` held both).',
        ),
    }),
  ),
  'call.outcome': line(
    kind('call.outcome', 'How a call ended; recorded once, after the answer (or right away for `not-run`).', {
      callId: text.describe("The `id` of the call's intent."),
      outcome: AuditOutcomeSchema,
      detail: textOrNull,
      hintViolation: textOrNull.describe(
        "A hint the call was seen to break, e.g. a read-only tool's write failing (EROFS).",
      ),
      attempts: count.describe('How many times the call was sent (more than 1 after retries on timeout).'),
      durationMs: count.describe("From the intent's time to this line's."),
    }),
  ),
  'approval.asked': line(AUDIT_EVENT_SCHEMAS['approval.asked']),
  'approval.answered': line(AUDIT_EVENT_SCHEMAS['approval.answered']),
  'approval.refused': line(AUDIT_EVENT_SCHEMAS['approval.refused']),
  'standing.used': line(AUDIT_EVENT_SCHEMAS['standing.used']),
  'standing.voided': line(AUDIT_EVENT_SCHEMAS['standing.voided']),
  'hint.violation': line(AUDIT_EVENT_SCHEMAS['hint.violation']),
  'pin.narrowed': line(AUDIT_EVENT_SCHEMAS['pin.narrowed']),
  'approvals.unreadable': line(AUDIT_EVENT_SCHEMAS['approvals.unreadable']),
  'auth.denied': line(AUDIT_EVENT_SCHEMAS['auth.denied']),
  'denials.skipped': line(AUDIT_EVENT_SCHEMAS['denials.skipped']),
  'sandbox.start': line(AUDIT_EVENT_SCHEMAS['sandbox.start']),
  'sandbox.stop': line(AUDIT_EVENT_SCHEMAS['sandbox.stop']),
  'egress.denied': line(AUDIT_EVENT_SCHEMAS['egress.denied']),
  request: line(AUDIT_EVENT_SCHEMAS.request),
  'server.request': line(AUDIT_EVENT_SCHEMAS['server.request']),
  'server.request.answered': line(AUDIT_EVENT_SCHEMAS['server.request.answered']),
};

type LineSchemas = typeof AUDIT_LINE_SCHEMAS;
export type AuditLineType = keyof LineSchemas;
/** The line of one type, as read. */
export type AuditLineOf<T extends AuditLineType> = z.output<LineSchemas[T]>;
export type AuditLine = { [T in AuditLineType]: AuditLineOf<T> }[AuditLineType];

type EventSchemas = typeof AUDIT_EVENT_SCHEMAS;
/** An event as the writer takes it: its `type` and its fields, without the head and `prev`. */
export type AuditEvent = { [T in keyof EventSchemas]: z.input<EventSchemas[T]> }[keyof EventSchemas];
export type AuditEventType = AuditEvent['type'];

export const AUDIT_LINE_TYPES = Object.keys(AUDIT_LINE_SCHEMAS) as readonly AuditLineType[];
