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

  // proves: MRTR-STATE
  it('keeps time on a monotonic clock: a wall clock stepped forward then back neither revives a used state nor expires a fresh one', (t) => {
    const wall = { now: Date.now() };
    t.mock.method(Date, 'now', () => wall.now);
    const states = new RequestStates();
    const used = states.mint(call, 60_000);
    assert.equal(states.redeem(used, call), undefined);
    wall.now += 3_600_000; // NTP, or an administrator, steps the clock forward an hour
    const fresh = states.mint(call, 60_000);
    assert.equal(states.redeem(fresh, call), undefined, 'a state minted after the step is not expired');
    wall.now -= 3_600_000; // ... and back
    assert.deepEqual(states.redeem(used, call), { reason: 'replayed' });
    const another = states.mint(call, 60_000);
    wall.now -= 86_400_000;
    assert.equal(states.redeem(another, call), undefined, 'a step back does not stretch or cut a state');
  });

  // proves: MRTR-STATE-BOUNDED
  it('keeps nothing of a redeemed state and stays linear under a flood of used states, yet refuses each replay', () => {
    const states = new RequestStates();
    const chunks = 6;
    const chunk = 5000;
    const used: string[] = [];
    const ms: number[] = [];
    for (let c = 0; c < chunks; c++) {
      const t0 = performance.now();
      for (let i = 0; i < chunk; i++) {
        const state = states.mint(call, 86_400_000);
        assert.equal(states.redeem(state, call), undefined);
        if (i === 0) used.push(state);
      }
      ms.push(performance.now() - t0);
    }
    // Linear: the last thousands cost what the first did (a sweep of every used state on each
    // redemption made them several times slower: quadratic). A ratio, so a busy machine does not matter.
    const [first = 0, ...rest] = ms;
    assert.ok(Math.max(...rest) < 2 * first, `ms per ${chunk} states: ${ms.map(Math.round).join(', ')}`);
    assert.equal(states.size, 0, 'no record is kept of a redeemed state');
    for (const state of used) assert.deepEqual(states.redeem(state, call), { reason: 'replayed' });
  });

  // proves: MRTR-STATE-BOUNDED
  it('caps the life of a state at 10 minutes, whatever the approval timeout', () => {
    const { states, clock } = statesAt();
    const state = states.mint(call, 86_400_000); // approval.timeout at its largest: a day
    clock.now += 10 * 60_000;
    assert.deepEqual(states.redeem(state, call), { reason: 'expired' });
  });

  // proves: MRTR-STATE-BOUNDED
  it('mints no state past the outstanding cap of a caller or of the process; a redeemed or expired one frees its place', () => {
    const clock = { now: 1_000_000 };
    const states = new RequestStates({ now: () => clock.now, maxPerCaller: 2, maxTotal: 3 });
    const bob = { ...call, caller: '["bob",null]' };
    const a1 = states.tryMint(call, 60_000);
    const a2 = states.tryMint(call, 60_000);
    assert.deepEqual(states.tryMint(call, 60_000), { refused: { reason: 'too-many', cap: 'caller', limit: 2 } });
    assert.ok('state' in states.tryMint(bob, 60_000), 'another caller still has room');
    assert.deepEqual(states.tryMint(bob, 60_000), { refused: { reason: 'too-many', cap: 'total', limit: 3 } });
    assert.equal(states.size, 3);
    assert.ok('state' in a1 && 'state' in a2);
    assert.equal(states.redeem(a1.state, call), undefined);
    assert.ok('state' in states.tryMint(call, 60_000), 'a redeemed state frees its place');
    clock.now += 60_000;
    assert.ok('state' in states.tryMint(call, 60_000), 'expired states free theirs');
    assert.equal(states.size, 1);
    assert.throws(
      () => new RequestStates({ maxPerCaller: 0 }).mint(call, 60_000),
      /already has 0 confirmations waiting/,
    );
  });
});
