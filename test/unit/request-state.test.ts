import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RequestStates, refusalText, type CallBinding } from '../../src/confirmation/request-state.js';

const call: CallBinding = {
  caller: '["alice","ide"]',
  server: 'notes',
  tool: 'write_note',
  pinHash: 'a'.repeat(64),
  arguments: { path: '/data/a.txt', content: 'hello', options: { append: false, mode: 420 } },
};

/** States under a clock the test moves. */
function statesAt(start = 1_000_000): { states: RequestStates; clock: { now: number } } {
  const clock = { now: start };
  return { states: new RequestStates({ now: () => clock.now }), clock };
}

describe('RequestStates', () => {
  // proves: MRTR-STATE
  it('redeems a state once, for exactly the call it was minted for', () => {
    const { states } = statesAt();
    const state = states.mint(call, 60_000);
    assert.equal(states.redeem(state, call), undefined);
    assert.deepEqual(states.redeem(state, call), { reason: 'replayed' });
  });

  // proves: MRTR-STATE
  it('refuses a state carried to another caller, server, tool, pin or arguments, naming what differs', () => {
    const { states } = statesAt();
    const state = states.mint(call, 60_000);
    const others: [Partial<CallBinding>, string][] = [
      [{ caller: '["mallory","ide"]' }, 'caller'],
      [{ caller: 'null' }, 'caller'],
      [{ server: 'other' }, 'server'],
      [{ tool: 'delete_note' }, 'tool'],
      [{ pinHash: 'b'.repeat(64) }, 'pin'],
      [{ arguments: { ...call.arguments, path: '/data/b.txt' } }, 'arguments'],
      [{ arguments: { ...call.arguments, options: { append: true, mode: 420 } } }, 'arguments'],
      [{ arguments: undefined }, 'arguments'],
    ];
    for (const [changed, field] of others) {
      assert.deepEqual(states.redeem(state, { ...call, ...changed }), { reason: 'mismatch', fields: [field] });
    }
    // A refused attempt does not use the state up: the call it was minted for still runs, once.
    assert.equal(states.redeem(state, call), undefined);
  });

  it('binds the arguments canonically: key order does not matter', () => {
    const { states } = statesAt();
    const state = states.mint(call, 60_000);
    const reordered = { options: { mode: 420, append: false }, content: 'hello', path: '/data/a.txt' };
    assert.equal(states.redeem(state, { ...call, arguments: reordered }), undefined);
  });

  // proves: MRTR-STATE
  it('refuses a state altered in any part, signed under another key (another process), or malformed', () => {
    const { states } = statesAt();
    const state = states.mint(call, 60_000);
    const [prefix, body, mac] = state.split('.') as [string, string, string];
    const decoded = JSON.parse(Buffer.from(body, 'base64url').toString()) as { exp: number; b: { tool: string } };
    const longer = Buffer.from(JSON.stringify({ ...decoded, exp: decoded.exp + 3_600_000 })).toString('base64url');
    assert.deepEqual(states.redeem(`${prefix}.${longer}.${mac}`, call), { reason: 'forged' });
    const flipped = `${mac.slice(0, -2)}${mac.at(-2) === 'A' ? 'B' : 'A'}${mac.at(-1)}`;
    assert.deepEqual(states.redeem(`${prefix}.${body}.${flipped}`, call), { reason: 'forged' });
    const otherProcess = new RequestStates().mint(call, 60_000);
    assert.deepEqual(states.redeem(otherProcess, call), { reason: 'forged' });
    for (const bad of [
      undefined,
      42,
      {},
      '',
      'hbx1',
      `${prefix}.${body}`,
      `${state}.x`,
      `v1.${body}.${mac}`,
      'x'.repeat(5000),
    ]) {
      assert.deepEqual(states.redeem(bad, call), { reason: 'malformed' }, JSON.stringify(bad)?.slice(0, 40));
    }
    assert.equal(states.redeem(state, call), undefined, 'the genuine state still redeems');
  });

  // proves: MRTR-STATE
  it('refuses a state once its time has passed', () => {
    const { states, clock } = statesAt();
    const state = states.mint(call, 30_000);
    clock.now += 30_000;
    assert.deepEqual(states.redeem(state, call), { reason: 'expired' });
  });

  it('takes a key of at least 32 bytes, and says each refusal in words', () => {
    assert.throws(() => new RequestStates({ key: new Uint8Array(16) }), /at least 32 bytes/);
    assert.match(refusalText({ reason: 'mismatch', fields: ['tool', 'pin'] }), /another call \(different tool, pin\)/);
    assert.match(refusalText({ reason: 'replayed' }), /already used/);
  });
});
