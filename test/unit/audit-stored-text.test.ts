import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { formatAudit } from '../../src/cli/audit-command.js';
import { HINT_DEFAULTS } from '../../src/policy/hints.js';
import { lineSplitter } from '../../src/store/state-daemon.js';
import {
  auditIntentRow,
  auditOutcomeRow,
  checkAuditBatchEntry,
  MAX_STORED_TEXT_BYTES,
  storable,
  type AuditRecord,
} from '../../src/store/state-store.js';
import { sampleIntent } from '../integration/support/state-store-contract.js';

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

describe('server text in the audit trail', () => {
  it('stores at most 8 KiB of a 40 MB error message: its beginning, its size and the SHA-256 of the whole', () => {
    const whole = `boom ${'x'.repeat(40 * 1024 * 1024)}`;
    const { detail } = auditOutcomeRow({ outcome: 'error', detail: whole });
    assert.ok(detail !== null && Buffer.byteLength(detail) <= MAX_STORED_TEXT_BYTES, `${detail?.length} characters`);
    assert.ok(detail.startsWith('boom xxxx'));
    assert.match(
      detail,
      new RegExp(` … \\[cut by hintbox: ${Buffer.byteLength(whole)} bytes in all, SHA-256 ${sha256(whole)}\\]$`),
    );
  });

  it('stores text that fits as it is, and a cut text unchanged when it is stored again (a replay)', () => {
    const fits = 'é'.repeat(MAX_STORED_TEXT_BYTES / 2);
    assert.equal(storable(fits), fits);
    const cut = storable('é'.repeat(MAX_STORED_TEXT_BYTES));
    assert.notEqual(cut, 'é'.repeat(MAX_STORED_TEXT_BYTES));
    assert.equal(storable(cut), cut);
    const entry = {
      kind: 'outcome',
      id: 'a',
      at: '2026-01-01T00:00:00.000Z',
      outcome: auditOutcomeRow({ outcome: 'error', detail: 'y'.repeat(1e6) }),
    };
    assert.deepEqual(checkAuditBatchEntry(JSON.parse(JSON.stringify(entry))), entry);
  });

  it('caps every text of a record, and still stores NUL and lone surrogates as U+FFFD', () => {
    const long = `a\u0000\ud800${'n'.repeat(100_000)}`;
    const row = auditIntentRow(sampleIntent({ tool: long, server: long, sandbox: long }));
    for (const text of [row.tool, row.server, row.sandbox ?? '']) {
      assert.ok(Buffer.byteLength(text) <= MAX_STORED_TEXT_BYTES);
      assert.ok(text.startsWith('a\ufffd\ufffdnnn'));
      assert.ok(text.endsWith(`SHA-256 ${sha256(long)}]`), 'the hash is of the text as the server sent it');
    }
    const violation = auditOutcomeRow({ outcome: 'error', hintViolation: 'x'.repeat(9000) }).hintViolation ?? '';
    assert.ok(Buffer.byteLength(violation) <= MAX_STORED_TEXT_BYTES);
    assert.match(violation, /cut by hintbox: 9000 bytes in all/);
  });
});

describe('the state daemon line splitter', () => {
  it('joins a line sent in many chunks, splits many lines of one chunk, and stops when told', () => {
    const got: string[] = [];
    const feed = lineSplitter((line) => (got.push(line), line !== 'stop'));
    for (const chunk of ['a', 'b', 'c\nd', '', '\n\ne\nstop\nnever\n']) feed(chunk);
    assert.deepEqual(got, ['abc', 'd', '', 'e', 'stop']);
  });

  it('splits a 40 MB line in 64 KiB chunks in linear time', () => {
    const got: number[] = [];
    const feed = lineSplitter((line) => (got.push(line.length), true));
    const chunk = 'x'.repeat(64 * 1024);
    const started = performance.now();
    for (let i = 0; i < 640; i++) feed(chunk);
    feed('\n');
    assert.deepEqual(got, [640 * 64 * 1024]);
    assert.ok(performance.now() - started < 2000, `${Math.round(performance.now() - started)} ms`);
  });
});

describe('formatAudit', () => {
  const record = (partial: Partial<AuditRecord>): AuditRecord => ({
    id: '1',
    time: new Date('2026-03-01T12:00:00.000Z'),
    session: 's',
    server: 'srv',
    tool: 'read',
    tags: [],
    claimedHints: {},
    effectiveHints: HINT_DEFAULTS,
    sandbox: 'ro-offline',
    decision: 'allowed',
    decidedBy: 'auto',
    arguments: {},
    pinHash: null,
    outcome: 'ok',
    detail: null,
    hintViolation: null,
    attempts: 1,
    endedAt: new Date('2026-03-01T12:00:00.010Z'),
    durationMs: 10,
    ...partial,
  });

  it('shows each record on one line, whatever its server-made text holds', () => {
    const forged = '2026-03-01T12:00:00.000Z  srv/delete_all  allowed by person  ok';
    const text = formatAudit([
      record({ tool: `read\n${forged}` }),
      record({ tool: 'wipe\u001b[2K\u001b[1A', tags: [{ name: 'x\u2028y', source: 'server' }] }),
      record({ arguments: { path: `a\u2028${forged}\u202e` } }),
    ]);
    const lines = text.split(/\r\n|[\n\r\u2028\u2029]/u);
    assert.equal(lines.length, 3, text);
    for (const line of lines) assert.match(line, /^2026-03-01T12:00:00\.000Z {2}srv\//);
    assert.doesNotMatch(text, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u); // eslint-disable-line no-control-regex
  });
});
