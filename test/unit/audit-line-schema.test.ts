import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ChainVerifier, frameLine, lineHash } from '../../src/audit/audit-chain.js';
import { AuditLogWriter } from '../../src/audit/audit-log-writer.js';
import {
  AUDIT_LINE_TYPES,
  auditLineFields,
  AuditRecordError,
  parseAuditLine,
  type AuditEvent,
} from '../../src/audit/audit-record.js';
import { silentLogger } from '../../src/util/logger.js';
import { scratchFolder } from '../support/scratch-folder.js';

/**
 * The audit line schemas (`audit-line-schema.ts`) against what the writer writes, what earlier
 * hintbox versions wrote, and lines no hintbox wrote.
 */

/** One event of each kind, every field the kind has (typed: the writer's input type). */
const EVENTS: AuditEvent[] = [
  {
    type: 'approval.asked',
    session: 's',
    server: 'fs',
    tool: 'write_file',
    reasons: ['destructive'],
    caller: 'alice',
    client: 'ide',
    approval: 'a1',
  },
  {
    type: 'approval.answered',
    session: 's',
    server: 'fs',
    tool: 'write_file',
    answer: 'approved',
    caller: 'alice',
    client: 'ide',
    by: 'console',
    approval: 'a1',
  },
  {
    type: 'standing.used',
    session: 's',
    server: 'fs',
    tool: 'write_file',
    callId: 'c1',
    pin: 'p',
    givenBy: 'alice',
    givenAt: '2026-12-03T17:00:00.000Z',
  },
  { type: 'standing.voided', session: 's', server: 'fs', tool: 'write_file', pin: 'p2', givenFor: 'p' },
  {
    type: 'approval.refused',
    session: 's',
    server: 'fs',
    tool: 'write_file',
    caller: 'alice',
    reason: 'mismatch',
    detail: 'its requestState was issued for another call (different arguments)',
  },
  { type: 'hint.violation', session: 's', server: 'fs', tool: null, sandbox: 'ro', violation: 'EROFS' },
  { type: 'pin.narrowed', session: 's', server: 'fs', tool: 't', pin: 'p', changes: ['readOnlyHint'] },
  { type: 'approvals.unreadable', session: 's', server: 'fs', error: 'not JSON' },
  {
    type: 'auth.denied',
    session: null,
    server: '/mcp',
    status: 403,
    reason: 'scope',
    caller: 'bob',
    client: 'cli',
    remoteAddress: '127.0.0.1',
  },
  {
    type: 'denials.skipped',
    session: null,
    server: null,
    since: '2026-12-03T12:00:00.000Z',
    skipped: 3,
    addresses: [{ address: '127.0.0.1', skipped: 3 }],
  },
  { type: 'sandbox.start', session: 's', server: 'fs', sandbox: 'ro', container: 'c1' },
  { type: 'sandbox.stop', session: 's', server: 'fs', sandbox: 'ro', container: 'c1' },
  {
    type: 'egress.denied',
    session: 's',
    server: 'fs',
    tool: 'fetch',
    sandbox: 'net',
    host: 'example.com',
    port: 443,
    method: 'CONNECT',
    skipped: 2,
  },
  {
    type: 'request',
    session: 's',
    server: 'fs',
    sandbox: 'ro',
    method: 'resources/read',
    subject: 'file:///a',
    outcome: 'ok',
    detail: null,
    caller: 'alice',
    client: 'ide',
  },
  {
    type: 'server.request',
    session: 's',
    server: 'fs',
    ref: 'r1',
    sandbox: 'ro',
    method: 'sampling/createMessage',
    boundTo: 'read_file',
    decision: 'passed',
    reason: null,
    caller: 'alice',
    client: 'ide',
  },
  {
    type: 'server.request.answered',
    session: 's',
    server: 'fs',
    ref: 'r1',
    sandbox: 'ro',
    method: 'sampling/createMessage',
    outcome: 'ok',
    detail: null,
  },
];

const HEAD = { v: 1, id: 'x', time: '2026-12-03T12:00:00.000Z' };
const line = (fields: Record<string, unknown>): string => JSON.stringify({ ...HEAD, ...fields, prev: null });
const refusal = (text: string): string => {
  try {
    parseAuditLine(text);
  } catch (error) {
    assert.ok(error instanceof AuditRecordError);
    return error.message;
  }
  return assert.fail(`read: ${text}`);
};

describe('audit line schemas', () => {
  it('every event kind the writer writes reads back through its schema, every field as written, in its order', () => {
    const events = AUDIT_LINE_TYPES.filter((t) => !t.startsWith('log.') && !t.startsWith('call.'));
    assert.deepEqual(EVENTS.map((e) => e.type).sort(), [...events].sort(), 'one event of every kind');
    const dir = path.join(scratchFolder('hintbox-audit-schema-'), 'audit');
    const writer = AuditLogWriter.open({ dir, log: silentLogger });
    for (const event of EVENTS) writer.recordEvent(event);
    // As the call guard writes it: its fields in another order than the schema's.
    const { type, session, server, tool, caller, client, reasons } = EVENTS[0] as AuditEvent & {
      type: 'approval.asked';
    };
    writer.recordEvent({ type, session, server, caller, client, tool, reasons });
    writer.close();
    const [file] = readdirSync(dir).map((f) => path.join(dir, f));
    const lines = readFileSync(file!, 'utf8').trimEnd().split('\n');
    const read = lines.map(parseAuditLine);
    assert.deepEqual(
      read.map((l) => l.type),
      ['log.open', ...EVENTS.map((e) => e.type), 'approval.asked', 'log.close'],
    );
    assert.deepEqual(
      Object.keys(read.at(-2)!),
      ['v', 'id', 'time', 'type', 'session', 'server', 'caller', 'client', 'tool', 'reasons', 'prev'],
      'as written',
    );
    for (const [i, event] of EVENTS.entries()) {
      const { v, id, time, prev, ...fields } = read[i + 1]!;
      assert.deepEqual([v, typeof id, typeof time], [1, 'string', 'string']);
      assert.equal(prev, lineHash(lines[i]!));
      assert.deepEqual(fields, event, event.type);
    }
  });

  // proves: AUDIT-LINE-SCHEMA
  it('reads lines of earlier versions: without the fields added since, and with fields it does not know', () => {
    const earlier = [
      { type: 'log.open', chain: 'c', seq: 0 },
      { type: 'approval.asked', session: 's', server: 'fs', tool: 't', reasons: [] },
      { type: 'approval.answered', session: 's', server: 'fs', tool: 't', answer: 'declined' },
      {
        type: 'egress.denied',
        session: 's',
        server: 'fs',
        tool: null,
        sandbox: 'n',
        host: 'h',
        port: 80,
        method: 'GET',
      },
      { type: 'request', session: 's', server: 'fs', sandbox: null, method: 'm', subject: null, outcome: 'refused' },
      { type: 'sandbox.start', session: 's', server: 'fs', sandbox: 'ro', container: 'c', later: { kept: true } },
    ];
    for (const fields of earlier) assert.deepEqual(parseAuditLine(line(fields)), { ...HEAD, ...fields, prev: null });
  });

  it('refuses a line whose field is of the wrong type, in one line naming the type and the field', () => {
    const egress = EVENTS.find((e) => e.type === 'egress.denied')!;
    const skipped = EVENTS.find((e) => e.type === 'denials.skipped')!;
    const cases: [Record<string, unknown>, string][] = [
      [{ ...egress, port: '443' }, 'egress.denied: port: expected a number'],
      [{ ...egress, tool: { $ne: null } }, 'egress.denied: tool: expected a string or null'],
      [
        { ...skipped, addresses: [{ address: 'a', skipped: -1 }] },
        'denials.skipped: addresses.0.skipped: expected an integer ≥ 0',
      ],
      [{ type: 'auth.denied', status: 500 }, 'auth.denied: status: expected 401 | 403'],
      [
        { type: 'request', outcome: 'maybe' },
        'request: outcome: expected ok | error | refused | cancelled | sandbox-died',
      ],
      [
        { type: 'call.outcome', callId: 'c' },
        'call.outcome: outcome: expected ok | tool-error | error | cancelled | sandbox-died | not-run',
      ],
      [{ type: 'log.open', chain: 'c', seq: -1 }, 'log.open: seq: expected an integer ≥ 0'],
      [{ type: 'log.close', id: '' }, 'id: expected a non-empty string'],
      [{ type: 'log.close', time: 'yesterday', seq: 'x' }, 'time: expected an ISO time'],
      [{ type: 'log.close', prev: 'abc' }, 'prev: expected a SHA-256 (hex) or null'],
      [{ type: 'log.rotate' }, 'type: unknown type "log.rotate"'],
      [{ type: 'log.close', v: 2 }, 'schema version 2: this hintbox reads version 1'],
    ];
    for (const [fields, message] of cases) {
      assert.equal(refusal(JSON.stringify({ ...HEAD, prev: null, ...fields })), message);
    }
    assert.equal(refusal('[1]'), 'not a JSON object');
  });

  // proves: AUDIT-LINE-SCHEMA
  it('audit verify names a line whose field no hintbox wrote so, though its chain is intact', () => {
    const first = frameLine({ ...HEAD, type: 'log.open', chain: 'c', seq: 0 }, null);
    const forged = frameLine(
      { ...HEAD, id: 'y', type: 'hint.violation', session: 's', server: 'fs', tool: 't', sandbox: ['ro'] },
      lineHash(first),
    );
    const verifier = new ChainVerifier('c');
    verifier.startFile('c.000000.jsonl', 0);
    verifier.line(first);
    verifier.line(forged);
    assert.deepEqual(
      verifier.end().breaks.map((b) => `${b.line}: ${b.message}`),
      ['2: not a valid record: hint.violation: sandbox: expected a string'],
    );
  });

  it('lists for the documentation every line type, its description and each field the writer writes', () => {
    const docs = auditLineFields();
    assert.deepEqual(
      docs.map((d) => d.type),
      [...AUDIT_LINE_TYPES],
    );
    for (const doc of docs) {
      assert.ok(doc.description.length > 0, `${doc.type} is described`);
      const names = doc.fields.map((f) => f.name);
      assert.deepEqual([names[0], names[1], names[2], names[3], names.at(-1)], ['v', 'id', 'time', 'type', 'prev']);
    }
    for (const event of EVENTS) {
      const doc = docs.find((d) => d.type === event.type)!;
      for (const key of Object.keys(event))
        assert.ok(
          doc.fields.some((f) => f.name === key),
          `${event.type}.${key}`,
        );
    }
    const egress = docs.find((d) => d.type === 'egress.denied')!.fields;
    assert.deepEqual(
      egress.find((f) => f.name === 'skipped'),
      {
        name: 'skipped',
        type: 'integer',
        optional: true,
        description: "Refusals of the sandbox before this one that were over the audit's budget and left out.",
      },
    );
    assert.equal(egress.find((f) => f.name === 'tool')?.type, 'string | null');
  });
});
