import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AuditEvent } from '../../src/audit/audit-record.js';
import { DenialRecorder } from '../../src/audit/denial-recorder.js';
import { DenialBudget } from '../../src/util/denial-budget.js';
import { createLogger } from '../../src/util/logger.js';

describe('DenialBudget', () => {
  it('lets a burst per key through, then one per refill; counts the rest per key in the window', () => {
    let now = 0;
    const budget = new DenialBudget({ perKeyBurst: 2, perKeyPerSecond: 0.5, overallBurst: 100, now: () => now });
    const taken = [...Array(5).keys()].map(() => budget.take('a'));
    assert.deepEqual(taken, [true, true, false, false, false]);
    assert.equal(budget.take('b'), true, 'another key has a budget of its own');
    now = 2000;
    assert.equal(budget.take('a'), true);
    assert.deepEqual(budget.closeWindow(), { since: 0, skipped: 3, top: [{ key: 'a', skipped: 3 }] });
    assert.equal(budget.closeWindow(), undefined, 'a window without refusals left out says nothing');
  });

  // proves: DENIAL-BUDGET
  it('bounds all keys together: many addresses get no more than the overall budget', () => {
    const budget = new DenialBudget({ perKeyBurst: 10, overallBurst: 50, overallPerSecond: 0, now: () => 0 });
    let recorded = 0;
    for (let i = 0; i < 100_000; i++) if (budget.take(`10.0.${i >> 8}.${i & 255}`)) recorded++;
    assert.equal(recorded, 50);
    const window = budget.closeWindow();
    assert.equal(window?.skipped, 100_000 - 50);
    assert.ok((window?.top.length ?? 0) <= 10);
  });

  it('remembers at most maxKeys keys', () => {
    const budget = new DenialBudget({ perKeyBurst: 1, overallBurst: 1e9, maxKeys: 3, now: () => 0 });
    for (const key of ['a', 'b', 'c', 'd']) budget.take(key);
    assert.equal(budget.take('a'), true, 'a was forgotten: its bucket starts again (the overall one still bounds it)');
    assert.equal(budget.take('d'), false);
  });
});

describe('DenialRecorder', () => {
  const denied = (i: number): AuditEvent => ({
    type: 'auth.denied',
    session: null,
    server: 'fs',
    status: 401,
    reason: 'unknown token',
    caller: null,
    remoteAddress: `192.0.2.${i % 2}`,
  });

  // proves: DENIAL-BUDGET
  it('writes down and logs within the budget, counts every refusal, and records what it left out when the window closes', () => {
    const recorded: AuditEvent[] = [];
    const counted: AuditEvent[] = [];
    const lines: string[] = [];
    const recorder = new DenialRecorder({
      audit: { recordEvent: (e) => recorded.push(e), countEvent: (e) => counted.push(e) },
      log: createLogger('debug', (line) => lines.push(line)),
      perKeyBurst: 3,
      now: () => 0,
    });
    for (let i = 0; i < 1000; i++) {
      const event = denied(i);
      recorder.deny({
        remoteAddress: event.type === 'auth.denied' ? event.remoteAddress : null,
        event,
        message: `refused ${i}`,
      });
    }
    recorder.deny({ remoteAddress: '192.0.2.0', message: 'a refusal only logged' });
    assert.equal(recorded.length, 6, 'three per address');
    assert.equal(recorded.length + counted.length, 1000, 'every refusal with a record is counted');
    assert.equal(lines.length, 6);
    recorder.close();
    const summary = recorded.at(-1);
    assert.equal(summary?.type, 'denials.skipped');
    assert.deepEqual(summary?.type === 'denials.skipped' && summary.addresses, [
      { address: '192.0.2.0', skipped: 498 },
      { address: '192.0.2.1', skipped: 497 },
    ]);
    assert.equal(summary?.type === 'denials.skipped' && summary.skipped, 995);
    assert.match(lines.at(-1) ?? '', /995 refused request\(s\) since .* over the budget.*192\.0\.2\.0 498/);
  });
});
