import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { ApprovalDesk, type ApprovalDeskOptions, type ApprovalRequest } from '../../src/console/approval-desk.js';
import { approvalRequest } from './support/approval-request.js';

const ORIGIN = 'http://127.0.0.1:40001';

const request = approvalRequest;

/** The call a repeated request is matched on (what `takeAnswer` and `waitingFor` are given). */
function callOf(r: ApprovalRequest): Parameters<ApprovalDesk['takeAnswer']>[0] {
  return {
    server: r.server,
    session: r.session,
    caller: r.caller,
    tool: r.tool,
    pinHash: r.pinHash,
    arguments: r.arguments,
  };
}

/** A desk on a clock the test moves. */
function deskWithClock(options: Partial<ApprovalDeskOptions> = {}): { desk: ApprovalDesk; clock: { t: number } } {
  const clock = { t: 1_000_000 };
  const desk = new ApprovalDesk({ origin: ORIGIN, secret: randomBytes(32), now: () => clock.t, ...options });
  return { desk, clock };
}

const tokenOf = (link: string): string => new URL(link).searchParams.get('token') ?? '';

/** Awaits a desk's answer that a timer settles: the desk's timers are unref'd, so the test holds the loop open. */
async function settled<T>(answer: Promise<T>): Promise<T> {
  const hold = setInterval(() => undefined, 1_000);
  try {
    return await answer;
  } finally {
    clearInterval(hold);
  }
}

describe('ApprovalDesk', () => {
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
      const { desk } = deskWithClock();
      const pending = desk.open(base, 'repeat', 60_000);
      assert.equal(desk.answer(pending.id, 'approved'), true);
      assert.equal(desk.takeAnswer(callOf(request(over))), undefined, `${what}: no grant`);
      // The grant of the call itself is still there (the other call did not use it up).
      assert.deepEqual(desk.takeAnswer(callOf(base)), { id: pending.id, answer: 'approved' }, what);
    }
  });

  it('matches arguments by value, whatever the order of their keys', () => {
    const { desk } = deskWithClock();
    const pending = desk.open(request({ arguments: { path: '/w/a', content: 'x' } }), 'repeat', 60_000);
    desk.answer(pending.id, 'approved');
    assert.equal(desk.takeAnswer(callOf(request({ arguments: { content: 'x', path: '/w/a' } })))?.answer, 'approved');
  });

  // proves: CONSOLE
  it('lets an approval be used once', () => {
    const { desk } = deskWithClock();
    const r = request();
    const pending = desk.open(r, 'repeat', 60_000);
    desk.answer(pending.id, 'approved');
    assert.equal(desk.takeAnswer(callOf(r))?.answer, 'approved');
    assert.equal(desk.takeAnswer(callOf(r)), undefined, 'the second repeat is not granted');
  });

  it('keeps an answer for the grant window only', () => {
    const { desk, clock } = deskWithClock({ grantWindowMs: 5_000 });
    const r = request();
    const first = desk.open(r, 'repeat', 60_000);
    desk.answer(first.id, 'approved');
    clock.t += 5_000;
    assert.equal(desk.takeAnswer(callOf(r))?.answer, 'approved', 'at the end of the window it still holds');

    const second = desk.open(r, 'repeat', 60_000);
    desk.answer(second.id, 'approved');
    clock.t += 5_001;
    assert.equal(desk.takeAnswer(callOf(r)), undefined, 'after the window: no grant');
  });

  it('drops expired grants when the next call asks (no unbounded map)', () => {
    const { desk, clock } = deskWithClock({ grantWindowMs: 1_000 });
    const r = request();
    const p = desk.open(r, 'repeat', 60_000);
    desk.answer(p.id, 'approved');
    clock.t += 2_000;
    desk.open(request({ tool: 'other' }), 'repeat', 60_000);
    clock.t -= 2_000; // even back inside the window, the expired grant is gone
    assert.equal(desk.takeAnswer(callOf(r)), undefined);
  });

  it('keeps a decline the same way: once, for the same call, within the window', () => {
    const { desk, clock } = deskWithClock({ grantWindowMs: 5_000 });
    const r = request();
    const pending = desk.open(r, 'repeat', 60_000);
    assert.equal(desk.answer(pending.id, 'declined'), true);
    assert.equal(desk.takeAnswer(callOf(request({ caller: { subject: 'mallory' } }))), undefined);
    assert.deepEqual(desk.takeAnswer(callOf(r)), { id: pending.id, answer: 'declined' });
    assert.equal(desk.takeAnswer(callOf(r)), undefined, 'used once');

    const again = desk.open(r, 'repeat', 60_000);
    desk.answer(again.id, 'declined');
    clock.t += 5_001;
    assert.equal(desk.takeAnswer(callOf(r)), undefined, 'expired');
  });

  it('gives no grant for a held confirmation (its call was waiting, and is answered directly)', async () => {
    const { desk } = deskWithClock();
    const r = request();
    const pending = desk.open(r, 'held', 60_000);
    desk.answer(pending.id, 'approved');
    assert.equal(await pending.answer, 'approved');
    assert.equal(desk.takeAnswer(callOf(r)), undefined);
    assert.equal(desk.waitingFor(callOf(r)), undefined, 'a held call is not given again as a link');
  });

  it('gives the same link again while the same call waits, and none once answered', () => {
    const { desk } = deskWithClock();
    const r = request();
    const pending = desk.open(r, 'repeat', 60_000);
    assert.equal(desk.waitingFor(callOf(r)), pending.link);
    assert.equal(desk.waitingFor(callOf(r)), pending.link);
    assert.equal(desk.waitingFor(callOf(request({ arguments: { path: '/other' } }))), undefined);
    assert.equal(desk.waitingFor(callOf(request({ caller: { subject: 'mallory' } }))), undefined);
    desk.answer(pending.id, 'approved');
    assert.equal(desk.waitingFor(callOf(r)), undefined);
  });

  it('makes links to its own origin, with the token of that confirmation', () => {
    const { desk } = deskWithClock();
    const pending = desk.open(request(), 'repeat', 60_000);
    const url = new URL(pending.link);
    assert.equal(url.origin, ORIGIN);
    assert.equal(url.pathname, `/approvals/${pending.id}`);
    assert.equal(tokenOf(pending.link), desk.tokenFor(pending.id));
  });

  it('times out a held confirmation after its timeout, a repeat one after repeatWaitMs', async () => {
    const { desk } = deskWithClock({ repeatWaitMs: 30 });
    const held = desk.open(request(), 'held', 20);
    const repeat = desk.open(request({ tool: 'other' }), 'repeat', 60_000);
    const started = Date.now();
    assert.equal(await settled(held.answer), 'timeout');
    assert.equal(desk.get(held.id)?.state, 'timeout');
    assert.equal(desk.get(repeat.id)?.state, 'pending', 'the repeat one still waits');
    assert.equal(await settled(repeat.answer), 'timeout', 'a repeat one waits repeatWaitMs, not the held timeout');
    assert.equal(desk.get(repeat.id)?.state, 'timeout');
    assert.ok(Date.now() - started >= 25, 'not before its time');
    assert.equal(desk.answer(held.id, 'approved'), false, 'too late');
    assert.equal(desk.answer(repeat.id, 'approved'), false, 'too late');
    assert.equal(desk.takeAnswer(callOf(request({ tool: 'other' }))), undefined, 'a timeout grants nothing');
  });

  it('records the time of asking, of expiry and of the answer from the injected clock', () => {
    const { desk, clock } = deskWithClock({ repeatWaitMs: 10_000 });
    const pending = desk.open(request(), 'repeat', 60_000);
    const entry = desk.get(pending.id)!;
    assert.equal(entry.askedAt.getTime(), 1_000_000);
    assert.equal(entry.expiresAt.getTime(), 1_010_000);
    clock.t += 1234;
    desk.answer(pending.id, 'declined');
    assert.equal(desk.get(pending.id)?.answeredAt?.getTime(), 1_001_234);
  });

  it('withdraws: the page says why, the wait ends as a timeout, and no answer is taken after', async () => {
    const answered: string[] = [];
    const { desk } = deskWithClock({ onAnswered: (e) => answered.push(e.state) });
    const r = request();
    const pending = desk.open(r, 'repeat', 60_000);
    pending.withdraw('answered through the client');
    assert.equal(await pending.answer, 'timeout');
    const entry = desk.get(pending.id)!;
    assert.equal(entry.state, 'withdrawn');
    assert.equal(entry.note, 'answered through the client');
    assert.equal(desk.answer(pending.id, 'approved'), false, 'a withdrawn confirmation cannot be approved');
    assert.equal(desk.takeAnswer(callOf(r)), undefined);
    pending.withdraw('again');
    assert.equal(desk.get(pending.id)?.note, 'answered through the client', 'a second withdraw changes nothing');
    assert.deepEqual(answered, [], 'a withdrawal is not an answer given on the page');
  });

  it('does not withdraw an answered confirmation', async () => {
    const { desk } = deskWithClock();
    const pending = desk.open(request(), 'held', 60_000);
    desk.answer(pending.id, 'approved');
    pending.withdraw('late');
    assert.equal(desk.get(pending.id)?.state, 'approved');
    assert.equal(await pending.answer, 'approved');
  });

  it('takes one answer: a second answer, or another for an unknown id, is refused', async () => {
    const answered: string[] = [];
    const { desk } = deskWithClock({ onAnswered: (e) => answered.push(`${e.id}:${e.state}`) });
    const pending = desk.open(request(), 'held', 60_000);
    assert.equal(desk.answer('no-such-id', 'approved'), false);
    assert.equal(desk.answer(pending.id, 'declined'), true);
    assert.equal(desk.answer(pending.id, 'approved'), false);
    assert.equal(await pending.answer, 'declined');
    assert.deepEqual(answered, [`${pending.id}:declined`]);
  });

  it("opens a page with that confirmation's token only", () => {
    const { desk } = deskWithClock();
    const a = desk.open(request(), 'repeat', 60_000);
    const b = desk.open(request({ tool: 'other' }), 'repeat', 60_000);
    assert.equal(desk.opens(a.id, tokenOf(a.link)), true);
    assert.equal(desk.opens(a.id, tokenOf(b.link)), false, "another confirmation's token");
    assert.equal(desk.opens(a.id, desk.tokenFor(b.id)), false);
    assert.equal(desk.opens(a.id, ''), false);
    assert.equal(desk.opens(a.id, tokenOf(a.link).slice(0, -1)), false, 'a prefix of the token');
    assert.equal(desk.opens(a.id, `${tokenOf(a.link)}x`), false, 'the token with more');
    const other = new ApprovalDesk({ origin: ORIGIN, secret: randomBytes(32) });
    assert.notEqual(other.tokenFor(a.id), desk.tokenFor(a.id), "another console's secret makes other tokens");
  });

  it('makes ids that are fresh and fit in a path', () => {
    const { desk } = deskWithClock();
    const ids = new Set<string>();
    for (let i = 0; i < 50; i++) ids.add(desk.open(request({ tool: `t${i}` }), 'repeat', 60_000).id);
    assert.equal(ids.size, 50);
    for (const id of ids) assert.match(id, /^[A-Za-z0-9_-]{12,64}$/);
  });

  it('keeps at most maxPending waiting: the oldest repeat one times out for a new one', async () => {
    const { desk } = deskWithClock({ maxPending: 3 });
    const first = desk.open(request({ tool: 'a' }), 'repeat', 60_000);
    const held = desk.open(request({ tool: 'b' }), 'held', 60_000);
    const third = desk.open(request({ tool: 'c' }), 'repeat', 60_000);
    assert.equal(desk.list().filter((e) => e.state === 'pending').length, 3);
    const fourth = desk.open(request({ tool: 'd' }), 'repeat', 60_000);
    assert.equal(desk.get(first.id)?.state, 'timeout', 'the oldest repeat one made room');
    assert.equal(await first.answer, 'timeout');
    const states = new Map(desk.list().map((e) => [e.id, e.state]));
    assert.equal(states.get(held.id), 'pending', 'a held call (a call waiting) is not dropped for it');
    assert.equal(states.get(third.id), 'pending');
    assert.equal(states.get(fourth.id), 'pending');
    assert.equal(desk.list().filter((e) => e.state === 'pending').length, 3);
    assert.equal(desk.waitingFor(callOf(request({ tool: 'a' }))), undefined);
  });

  it('keeps keepAnswered answered confirmations, newest first in the list', () => {
    const { desk } = deskWithClock({ keepAnswered: 2 });
    const ids: string[] = [];
    for (const tool of ['a', 'b', 'c']) {
      const p = desk.open(request({ tool }), 'repeat', 60_000);
      desk.answer(p.id, 'declined');
      ids.push(p.id);
    }
    const waiting = desk.open(request({ tool: 'd' }), 'repeat', 60_000);
    assert.deepEqual(
      desk.list().map((e) => e.id),
      [waiting.id, ids[2], ids[1]],
    );
    assert.equal(desk.get(ids[0]!), undefined, 'the oldest answered one is no longer kept');
  });

  it('ends every wait on close', async () => {
    const { desk } = deskWithClock();
    const held = desk.open(request(), 'held', 60_000);
    const repeat = desk.open(request({ tool: 'x' }), 'repeat', 60_000);
    desk.close();
    assert.equal(await held.answer, 'timeout');
    assert.equal(await repeat.answer, 'timeout');
    assert.equal(desk.answer(held.id, 'approved'), false);
  });
});
