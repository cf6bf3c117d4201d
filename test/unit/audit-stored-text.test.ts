import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { AuditLogWriter } from '../../src/audit/audit-log-writer.js';
import type { AuditCallRecord } from '../../src/audit/audit-reader.js';
import { MAX_STORED_TEXT_BYTES, storedText, type AuditIntent } from '../../src/audit/audit-record.js';
import { formatAuditEntry } from '../../src/cli/audit-command.js';
import { effectiveHints, HINT_DEFAULTS } from '../../src/policy/hints.js';
import { silentLogger } from '../../src/util/logger.js';
import { scratchFolder } from '../support/scratch-folder.js';

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

function writer(): { writer: AuditLogWriter; lines: () => Record<string, unknown>[] } {
  const dir = path.join(scratchFolder('hintbox-stored-text-'), 'audit');
  return {
    writer: AuditLogWriter.open({ dir, log: silentLogger }),
    lines: () =>
      readdirSync(dir).flatMap((f) =>
        readFileSync(path.join(dir, f), 'utf8')
          .trimEnd()
          .split('\n')
          .map((l) => JSON.parse(l) as Record<string, unknown>),
      ),
  };
}

const intent = (partial: Partial<AuditIntent> = {}): AuditIntent => ({
  session: 's',
  server: 'srv',
  tool: 'read',
  tags: [],
  claimedHints: {},
  effectiveHints: effectiveHints({}),
  sandbox: 'ro-offline',
  decision: 'allowed',
  decidedBy: 'auto',
  arguments: {},
  pinHash: null,
  ...partial,
});

describe('server text in the audit log', () => {
  // proves: AUDIT-NO-WEDGE
  it('keeps at most 8 KiB of a 40 MB error message: its beginning, its size and the SHA-256 of the whole', () => {
    const whole = `boom ${'x'.repeat(40 * 1024 * 1024)}`;
    const { writer: w, lines } = writer();
    w.appendOutcome(w.appendIntent(intent()), { outcome: 'error', detail: whole });
    w.close();
    const detail = String(lines().find((l) => l.type === 'call.outcome')?.detail);
    assert.ok(Buffer.byteLength(detail) <= MAX_STORED_TEXT_BYTES, `${detail.length} characters`);
    assert.ok(detail.startsWith('boom xxxx'));
    assert.match(
      detail,
      new RegExp(` … \\[cut by hintbox: ${Buffer.byteLength(whole)} bytes in all, SHA-256 ${sha256(whole)}\\]$`),
    );
  });

  it('keeps text that fits as it is, and a cut text unchanged when it is kept again', () => {
    const fits = 'é'.repeat(MAX_STORED_TEXT_BYTES / 2);
    assert.equal(storedText(fits), fits);
    const cut = storedText('é'.repeat(MAX_STORED_TEXT_BYTES));
    assert.notEqual(cut, 'é'.repeat(MAX_STORED_TEXT_BYTES));
    assert.equal(storedText(cut), cut);
  });

  // proves: AUDIT-NO-WEDGE
  it('caps every text of a record (events too), and keeps NUL and lone surrogates as JSON escapes', () => {
    const long = `a\u0000\ud800${'n'.repeat(100_000)}`;
    const { writer: w, lines } = writer();
    const id = w.appendIntent(intent({ tool: long, server: long, sandbox: long }));
    w.appendOutcome(id, { outcome: 'error', hintViolation: 'x'.repeat(9000), detail: 'short \u0000 \ud800' });
    w.recordEvent({ type: 'hint.violation', session: 's', server: 'srv', tool: null, sandbox: 'x', violation: long });
    w.close();
    const all = lines();
    const call = all.find((l) => l.type === 'call.intent')!;
    for (const text of [
      call.tool,
      call.server,
      call.sandbox,
      all.find((l) => l.type === 'hint.violation')?.violation,
    ]) {
      assert.ok(typeof text === 'string' && Buffer.byteLength(text) <= MAX_STORED_TEXT_BYTES);
      // NUL read back as it was; the kept part of a cut text is UTF-8's, where a lone surrogate is U+FFFD.
      assert.ok(text.startsWith('a\u0000\ufffdnnn'), JSON.stringify(text.slice(0, 8)));
      assert.ok(text.endsWith(`SHA-256 ${sha256(long)}]`), 'the hash is of the text as the server sent it');
    }
    const outcome = all.find((l) => l.type === 'call.outcome');
    assert.match(String(outcome?.hintViolation), /cut by hintbox: 9000 bytes in all/);
    assert.equal(outcome?.detail, 'short \u0000 \ud800', 'text that fits is kept exactly, as JSON escapes');
  });
});

describe('formatAuditEntry', () => {
  const record = (partial: Partial<AuditCallRecord>): AuditCallRecord => ({
    kind: 'call',
    id: '1',
    time: '2026-03-01T12:00:00.000Z',
    subject: 'root (uid 0)',
    session: 's',
    server: 'srv',
    tool: 'read',
    tags: [],
    claimedTags: [],
    claimedHints: {},
    effectiveHints: HINT_DEFAULTS,
    sandbox: 'ro-offline',
    decision: 'allowed',
    decidedBy: 'auto',
    arguments: {},
    pin: null,
    traceId: null,
    outcome: 'ok',
    detail: null,
    hintViolation: null,
    attempts: 1,
    endedAt: '2026-03-01T12:00:00.010Z',
    durationMs: 10,
    ...partial,
  });

  // proves: SERVER-TEXT
  it('shows each record on one line, whatever its server-made text holds', () => {
    const forged = '2026-03-01T12:00:00.000Z  srv/delete_all  allowed by person  ok';
    const text = [
      record({ tool: `read\n${forged}` }),
      record({ tool: 'wipe\u001b[2K\u001b[1A', claimedTags: ['x\u2028y'] }),
      record({ arguments: { path: `a\u2028${forged}\u202e` } }),
    ]
      .map(formatAuditEntry)
      .join('\n');
    const lines = text.split(/\r\n|[\n\r\u2028\u2029]/u);
    assert.equal(lines.length, 3, text);
    for (const line of lines) assert.match(line, /^2026-03-01T12:00:00\.000Z {2}srv\//);
    assert.doesNotMatch(text, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u); // eslint-disable-line no-control-regex
  });

  it("says why a call did not end ok, on its line (a server's long text cut)", () => {
    const denied = formatAuditEntry(
      record({
        decision: 'denied',
        decidedBy: 'person',
        outcome: 'not-run',
        detail: 'declined by the person\nat 12:00',
      }),
    );
    assert.match(denied, / {2}not-run: declined by the person at 12:00 {2}/);
    const long = formatAuditEntry(record({ outcome: 'sandbox-died', detail: `last words: ${'x'.repeat(500)}` }));
    assert.match(long, /sandbox-died: last words: x+\.\.\. {2}/);
    assert.ok(long.length < 400, long);
    assert.doesNotMatch(formatAuditEntry(record({ outcome: 'ok', detail: 'fine' })), /fine/);
  });
});
