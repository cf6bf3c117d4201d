import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { AuditLogWriter } from '../../src/audit/audit-log-writer.js';
import { parseAuditLine, type AuditIntent } from '../../src/audit/audit-record.js';
import { effectiveHints } from '../../src/policy/hints.js';
import { silentLogger } from '../../src/util/logger.js';
import { scratchFolder } from '../support/scratch-folder.js';

/** Who called (`hintbox serve`'s token names) is part of every intent; schema version 1 stays readable. */

function intent(partial: Partial<AuditIntent> = {}): AuditIntent {
  return {
    session: 's1',
    server: 'fs',
    tool: 'read_file',
    tags: [],
    claimedHints: { readOnlyHint: true },
    effectiveHints: effectiveHints({ readOnlyHint: true }),
    sandbox: 'ro-offline',
    decision: 'allowed',
    decidedBy: 'auto',
    pinHash: null,
    ...partial,
  };
}

describe('callers', () => {
  it("records the caller's identity with the intent; a line written before the field existed still parses", () => {
    const dir = path.join(scratchFolder('hintbox-audit-caller-'), 'audit');
    const writer = AuditLogWriter.open({ dir, log: silentLogger });
    writer.appendIntent(intent({ caller: { subject: 'ci-bot' } }));
    writer.appendIntent(intent({}));
    writer.close();
    const [file] = readdirSync(dir).map((f) => path.join(dir, f));
    const lines = readFileSync(file!, 'utf8').trimEnd().split('\n');
    const [, named, unnamed] = lines.map(
      (line) => parseAuditLine(line) as { caller?: string | null; client?: string | null },
    );
    assert.deepEqual([named?.caller, named?.client], ['ci-bot', null]);
    assert.deepEqual([unnamed?.caller, unnamed?.client], [null, null]);
    const old = JSON.parse(lines[2]!) as Record<string, unknown>;
    delete old.caller;
    delete old.client;
    assert.equal((parseAuditLine(JSON.stringify(old)) as { caller?: unknown }).caller, undefined);
    assert.throws(() => parseAuditLine(JSON.stringify({ ...old, caller: 7 })), /caller: expected a string or null/);
    assert.throws(() => parseAuditLine(JSON.stringify({ ...old, client: 7 })), /client: expected a string or null/);
  });

  // proves: CALLER-IDENTITY
  it('records the subject and the client as two fields; a line of before, with both in caller, reads as it was', () => {
    const dir = path.join(scratchFolder('hintbox-audit-caller-'), 'audit');
    const writer = AuditLogWriter.open({ dir, log: silentLogger });
    writer.appendIntent(intent({ caller: { subject: 'alice', client: 'ide' } }));
    writer.appendIntent(intent({ caller: { subject: 'alice (client ide)' } }));
    writer.close();
    const [file] = readdirSync(dir).map((f) => path.join(dir, f));
    const lines = readFileSync(file!, 'utf8').trimEnd().split('\n');
    const [, pair, lookalike] = lines.map(
      (line) => parseAuditLine(line) as { caller?: string | null; client?: string | null },
    );
    assert.deepEqual([pair?.caller, pair?.client], ['alice', 'ide']);
    assert.deepEqual([lookalike?.caller, lookalike?.client], ['alice (client ide)', null]);
    // Written before `client` existed: the subject and client joined in `caller`, no `client`.
    const before = JSON.parse(lines[1]!) as Record<string, unknown>;
    delete before.client;
    const old = parseAuditLine(JSON.stringify({ ...before, caller: 'alice (client ide)' })) as { client?: unknown };
    assert.equal(old.client, undefined);
  });
});
