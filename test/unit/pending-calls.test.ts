import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PendingCalls, type PendingCall } from '../../src/gateway/forwarded-call.js';

/** A pending call with what `toolsDuring` reads; the rest is never touched by PendingCalls. */
function call(upstreamId: string, sandbox: string, tool: string, startedAt: number, seq: number): PendingCall {
  return { upstreamId, clientId: upstreamId, sandbox, what: tool, startedAt, seq } as unknown as PendingCall;
}

describe('PendingCalls.toolsDuring: which calls ran when a sandbox did something', () => {
  it('finds a call settled before the report came, by the time the sandbox acted', () => {
    let now = 1_000;
    const calls = new PendingCalls(() => now);
    const fetch = call('u1', 'egress', 'fetch', 1_000, 1);
    calls.add(fetch);
    now = 1_200;
    calls.delete(fetch); // answered at 1200; the proxy's log line of 1100 arrives later
    const tunnel = call('u2', 'egress', 'tunnel', 1_300, 2);
    calls.add(tunnel);
    now = 1_500;
    calls.delete(tunnel);
    assert.deepEqual(calls.toolsDuring('egress', 1_100, 1_100), ['fetch']);
    assert.deepEqual(calls.toolsDuring('egress', 1_350, 1_360), ['tunnel']);
    assert.deepEqual(calls.toolsDuring('egress', 1_150, 1_350), ['fetch', 'tunnel']);
    assert.deepEqual(calls.toolsDuring('egress', 1_600, 1_700), [], 'after both: none');
    assert.deepEqual(calls.toolsDuring('egress', 900, 950), [], 'before both: none');
    assert.deepEqual(calls.toolsDuring('other', 1_100, 1_100), [], 'another sandbox: none');
  });

  it('includes calls still in flight that started by the end of the window, oldest first, each tool once', () => {
    const calls = new PendingCalls(() => 5_000);
    calls.add(call('u1', 's', 'b', 2_000, 2));
    calls.add(call('u2', 's', 'a', 1_000, 1));
    calls.add(call('u3', 's', 'a', 1_500, 3));
    calls.add(call('u4', 's', 'late', 4_000, 4));
    assert.deepEqual(calls.toolsDuring('s', 2_500, 3_000), ['a', 'b']);
  });

  it('forgets settled calls after a minute', () => {
    let now = 0;
    const calls = new PendingCalls(() => now);
    const old = call('u1', 's', 'old', 0, 1);
    calls.add(old);
    now = 10;
    calls.delete(old);
    now = 70_000;
    const next = call('u2', 's', 'next', 69_000, 2);
    calls.add(next);
    calls.delete(next);
    assert.deepEqual(calls.toolsDuring('s', 0, 70_000), ['next']);
  });
});
