import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  ConsoleApprovals,
  type ConsoleApprovalsOptions,
  type ApprovalRequest,
} from '../../src/console/console-approvals.js';
import { approvalRequest } from './support/approval-request.js';

const ORIGIN = 'http://127.0.0.1:40001';

const request = approvalRequest;

/** The call a repeated request is matched on (what `takeAnswer` and `waitingFor` are given). */
function callOf(r: ApprovalRequest): Parameters<ConsoleApprovals['takeAnswer']>[0] {
  return {
    server: r.server,
    session: r.session,
    caller: r.caller,
    tool: r.tool,
    pinHash: r.pinHash,
    arguments: r.arguments,
  };
}

/** Console approvals on a clock the test moves. */
function approvalsWithClock(options: Partial<ConsoleApprovalsOptions> = {}): {
  approvals: ConsoleApprovals;
  clock: { t: number };
} {
  const clock = { t: 1_000_000 };
  const approvals = new ConsoleApprovals({ origin: ORIGIN, secret: randomBytes(32), now: () => clock.t, ...options });
  return { approvals, clock };
}

const tokenOf = (link: string): string => new URL(link).searchParams.get('token') ?? '';

/** Awaits an answer that a timer settles: their timers are unref'd, so the test holds the loop open. */
async function settled<T>(answer: Promise<T>): Promise<T> {
  const hold = setInterval(() => undefined, 1_000);
  try {
    return await answer;
  } finally {
    clearInterval(hold);
  }
}

describe('ConsoleApprovals', () => {
  // proves: CONSOLE, CALLER-IDENTITY
  it('binds an approval to the very call: server, session, caller, tool, pin and arguments', () => {
    const base = request();
    const others: [string, Partial<ApprovalRequest>][] = [
      ['another server', { server: 'other' }],
      ['another session', { session: 'session-2' }],
      ['another caller', { caller: { subject: 'mallory' } }],
      ['the same subject through a client', { caller: { subject: 'alice', client: 'ide' } }],
      ['a subject spelled as subject and client', { caller: { subject: 'alice (client ide)' } }],
      ['no caller (stdio)', { caller: null }],
      ['another tool', { tool: 'edit_file' }],
      ['another pin (the definition changed)', { pinHash: 'pin-2' }],
      ['another argument value', { arguments: { path: '/workspace/a.txt', content: 'hellO' } }],
      ['another path', { arguments: { path: '/workspace/b.txt', content: 'hello' } }],
      ['an extra argument', { arguments: { path: '/workspace/a.txt', content: 'hello', mode: 'x' } }],
      ['a missing argument', { arguments: { path: '/workspace/a.txt' } }],
    ];
    for (const [what, over] of others) {
      const { approvals } = approvalsWithClock();
      const pending = approvals.open(base, 'repeat', 60_000);
      assert.equal(approvals.answer(pending.id, 'approved'), true);
      assert.equal(approvals.takeAnswer(callOf(request(over))), undefined, `${what}: no grant`);
      // The grant of the call itself is still there (the other call did not use it up).
      assert.deepEqual(approvals.takeAnswer(callOf(base)), { id: pending.id, answer: 'approved' }, what);
    }
  });

  it('matches arguments by value, whatever the order of their keys', () => {
    const { approvals } = approvalsWithClock();
    const pending = approvals.open(request({ arguments: { path: '/w/a', content: 'x' } }), 'repeat', 60_000);
    approvals.answer(pending.id, 'approved');
    assert.equal(
      approvals.takeAnswer(callOf(request({ arguments: { content: 'x', path: '/w/a' } })))?.answer,
      'approved',
    );
  });

  // proves: CONSOLE
  it('lets an approval be used once', () => {
    const { approvals } = approvalsWithClock();
    const r = request();
    const pending = approvals.open(r, 'repeat', 60_000);
    approvals.answer(pending.id, 'approved');
    assert.equal(approvals.takeAnswer(callOf(r))?.answer, 'approved');
    assert.equal(approvals.takeAnswer(callOf(r)), undefined, 'the second repeat is not granted');
  });

  it('keeps an answer for the grant window only', () => {
    const { approvals, clock } = approvalsWithClock({ grantWindowMs: 5_000 });
    const r = request();
    const first = approvals.open(r, 'repeat', 60_000);
    approvals.answer(first.id, 'approved');
    clock.t += 5_000;
    assert.equal(approvals.takeAnswer(callOf(r))?.answer, 'approved', 'at the end of the window it still holds');

    const second = approvals.open(r, 'repeat', 60_000);
    approvals.answer(second.id, 'approved');
    clock.t += 5_001;
    assert.equal(approvals.takeAnswer(callOf(r)), undefined, 'after the window: no grant');
  });

  it('drops expired grants when the next call asks (no unbounded map)', () => {
    const { approvals, clock } = approvalsWithClock({ grantWindowMs: 1_000 });
    const r = request();
    const p = approvals.open(r, 'repeat', 60_000);
    approvals.answer(p.id, 'approved');
    clock.t += 2_000;
    approvals.open(request({ tool: 'other' }), 'repeat', 60_000);
    clock.t -= 2_000; // even back inside the window, the expired grant is gone
    assert.equal(approvals.takeAnswer(callOf(r)), undefined);
  });

  it('keeps a decline the same way: once, for the same call, within the window', () => {
    const { approvals, clock } = approvalsWithClock({ grantWindowMs: 5_000 });
    const r = request();
    const pending = approvals.open(r, 'repeat', 60_000);
    assert.equal(approvals.answer(pending.id, 'declined'), true);
    assert.equal(approvals.takeAnswer(callOf(request({ caller: { subject: 'mallory' } }))), undefined);
    assert.deepEqual(approvals.takeAnswer(callOf(r)), { id: pending.id, answer: 'declined' });
    assert.equal(approvals.takeAnswer(callOf(r)), undefined, 'used once');

    const again = approvals.open(r, 'repeat', 60_000);
    approvals.answer(again.id, 'declined');
    clock.t += 5_001;
    assert.equal(approvals.takeAnswer(callOf(r)), undefined, 'expired');
  });

  it('gives no grant for a held confirmation (its call was waiting, and is answered directly)', async () => {
    const { approvals } = approvalsWithClock();
    const r = request();
    const pending = approvals.open(r, 'held', 60_000);
    approvals.answer(pending.id, 'approved');
    assert.equal(await pending.answer, 'approved');
    assert.equal(approvals.takeAnswer(callOf(r)), undefined);
    assert.equal(approvals.waitingFor(callOf(r)), undefined, 'a held call is not given again as a link');
  });

  it('gives the same link again while the same call waits, and none once answered', () => {
    const { approvals } = approvalsWithClock();
    const r = request();
    const pending = approvals.open(r, 'repeat', 60_000);
    assert.equal(approvals.waitingFor(callOf(r)), pending.link);
    assert.equal(approvals.waitingFor(callOf(r)), pending.link);
    assert.equal(approvals.waitingFor(callOf(request({ arguments: { path: '/other' } }))), undefined);
    assert.equal(approvals.waitingFor(callOf(request({ caller: { subject: 'mallory' } }))), undefined);
    approvals.answer(pending.id, 'approved');
    assert.equal(approvals.waitingFor(callOf(r)), undefined);
  });

  it('makes links to its own origin, with the token of that confirmation', () => {
    const { approvals } = approvalsWithClock();
    const pending = approvals.open(request(), 'repeat', 60_000);
    const url = new URL(pending.link);
    assert.equal(url.origin, ORIGIN);
    assert.equal(url.pathname, `/approvals/${pending.id}`);
    assert.equal(tokenOf(pending.link), approvals.tokenFor(pending.id));
  });

  it('times out a held confirmation after its timeout, a repeat one after repeatWaitMs', async () => {
    const { approvals } = approvalsWithClock({ repeatWaitMs: 30 });
    const held = approvals.open(request(), 'held', 20);
    const repeat = approvals.open(request({ tool: 'other' }), 'repeat', 60_000);
    const started = Date.now();
    assert.equal(await settled(held.answer), 'timeout');
    assert.equal(approvals.get(held.id)?.state, 'timeout');
    assert.equal(approvals.get(repeat.id)?.state, 'pending', 'the repeat one still waits');
    assert.equal(await settled(repeat.answer), 'timeout', 'a repeat one waits repeatWaitMs, not the held timeout');
    assert.equal(approvals.get(repeat.id)?.state, 'timeout');
    assert.ok(Date.now() - started >= 25, 'not before its time');
    assert.equal(approvals.answer(held.id, 'approved'), false, 'too late');
    assert.equal(approvals.answer(repeat.id, 'approved'), false, 'too late');
    assert.equal(approvals.takeAnswer(callOf(request({ tool: 'other' }))), undefined, 'a timeout grants nothing');
  });

  it('records the time of asking, of expiry and of the answer from the injected clock', () => {
    const { approvals, clock } = approvalsWithClock({ repeatWaitMs: 10_000 });
    const pending = approvals.open(request(), 'repeat', 60_000);
    const entry = approvals.get(pending.id)!;
    assert.equal(entry.askedAt.getTime(), 1_000_000);
    assert.equal(entry.expiresAt.getTime(), 1_010_000);
    clock.t += 1234;
    approvals.answer(pending.id, 'declined');
    assert.equal(approvals.get(pending.id)?.answeredAt?.getTime(), 1_001_234);
  });

  it('withdraws: the page says why, the wait ends as a timeout, and no answer is taken after', async () => {
    const answered: string[] = [];
    const { approvals } = approvalsWithClock({ onAnswered: (e) => answered.push(e.state) });
    const r = request();
    const pending = approvals.open(r, 'repeat', 60_000);
    pending.withdraw('answered through the client');
    assert.equal(await pending.answer, 'timeout');
    const entry = approvals.get(pending.id)!;
    assert.equal(entry.state, 'withdrawn');
    assert.equal(entry.note, 'answered through the client');
    assert.equal(approvals.answer(pending.id, 'approved'), false, 'a withdrawn confirmation cannot be approved');
    assert.equal(approvals.takeAnswer(callOf(r)), undefined);
    pending.withdraw('again');
    assert.equal(approvals.get(pending.id)?.note, 'answered through the client', 'a second withdraw changes nothing');
    assert.deepEqual(answered, [], 'a withdrawal is not an answer given on the page');
  });

  it('does not withdraw an answered confirmation', async () => {
    const { approvals } = approvalsWithClock();
    const pending = approvals.open(request(), 'held', 60_000);
    approvals.answer(pending.id, 'approved');
    pending.withdraw('late');
    assert.equal(approvals.get(pending.id)?.state, 'approved');
    assert.equal(await pending.answer, 'approved');
  });

  it('takes one answer: a second answer, or another for an unknown id, is refused', async () => {
    const answered: string[] = [];
    const { approvals } = approvalsWithClock({ onAnswered: (e) => answered.push(`${e.id}:${e.state}`) });
    const pending = approvals.open(request(), 'held', 60_000);
    assert.equal(approvals.answer('no-such-id', 'approved'), false);
    assert.equal(approvals.answer(pending.id, 'declined'), true);
    assert.equal(approvals.answer(pending.id, 'approved'), false);
    assert.equal(await pending.answer, 'declined');
    assert.deepEqual(answered, [`${pending.id}:declined`]);
  });

  it("opens a page with that confirmation's token only", () => {
    const { approvals } = approvalsWithClock();
    const a = approvals.open(request(), 'repeat', 60_000);
    const b = approvals.open(request({ tool: 'other' }), 'repeat', 60_000);
    assert.equal(approvals.opens(a.id, tokenOf(a.link)), true);
    assert.equal(approvals.opens(a.id, tokenOf(b.link)), false, "another confirmation's token");
    assert.equal(approvals.opens(a.id, approvals.tokenFor(b.id)), false);
    assert.equal(approvals.opens(a.id, ''), false);
    assert.equal(approvals.opens(a.id, tokenOf(a.link).slice(0, -1)), false, 'a prefix of the token');
    assert.equal(approvals.opens(a.id, `${tokenOf(a.link)}x`), false, 'the token with more');
    const other = new ConsoleApprovals({ origin: ORIGIN, secret: randomBytes(32) });
    assert.notEqual(other.tokenFor(a.id), approvals.tokenFor(a.id), "another console's secret makes other tokens");
  });

  it('makes ids that are fresh and fit in a path', () => {
    const { approvals } = approvalsWithClock();
    const ids = new Set<string>();
    for (let i = 0; i < 50; i++) ids.add(approvals.open(request({ tool: `t${i}` }), 'repeat', 60_000).id);
    assert.equal(ids.size, 50);
    for (const id of ids) assert.match(id, /^[A-Za-z0-9_-]{12,64}$/);
  });

  it('keeps at most maxPending waiting: the oldest repeat one times out for a new one', async () => {
    const { approvals } = approvalsWithClock({ maxPending: 3 });
    const first = approvals.open(request({ tool: 'a' }), 'repeat', 60_000);
    const held = approvals.open(request({ tool: 'b' }), 'held', 60_000);
    const third = approvals.open(request({ tool: 'c' }), 'repeat', 60_000);
    assert.equal(approvals.list().filter((e) => e.state === 'pending').length, 3);
    const fourth = approvals.open(request({ tool: 'd' }), 'repeat', 60_000);
    assert.equal(approvals.get(first.id)?.state, 'timeout', 'the oldest repeat one made room');
    assert.equal(await first.answer, 'timeout');
    const states = new Map(approvals.list().map((e) => [e.id, e.state]));
    assert.equal(states.get(held.id), 'pending', 'a held call (a call waiting) is not dropped for it');
    assert.equal(states.get(third.id), 'pending');
    assert.equal(states.get(fourth.id), 'pending');
    assert.equal(approvals.list().filter((e) => e.state === 'pending').length, 3);
    assert.equal(approvals.waitingFor(callOf(request({ tool: 'a' }))), undefined);
  });

  it('keeps keepAnswered answered confirmations, newest first in the list', () => {
    const { approvals } = approvalsWithClock({ keepAnswered: 2 });
    const ids: string[] = [];
    for (const tool of ['a', 'b', 'c']) {
      const p = approvals.open(request({ tool }), 'repeat', 60_000);
      approvals.answer(p.id, 'declined');
      ids.push(p.id);
    }
    const waiting = approvals.open(request({ tool: 'd' }), 'repeat', 60_000);
    assert.deepEqual(
      approvals.list().map((e) => e.id),
      [waiting.id, ids[2], ids[1]],
    );
    assert.equal(approvals.get(ids[0]!), undefined, 'the oldest answered one is no longer kept');
  });

  it('ends every wait on close', async () => {
    const { approvals } = approvalsWithClock();
    const held = approvals.open(request(), 'held', 60_000);
    const repeat = approvals.open(request({ tool: 'x' }), 'repeat', 60_000);
    approvals.close();
    assert.equal(await held.answer, 'timeout');
    assert.equal(await repeat.answer, 'timeout');
    assert.equal(approvals.answer(held.id, 'approved'), false);
  });
});
