import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { SharedApprovals } from '../../src/console/shared-approvals.js';
import { approvalRequest } from './support/approval-request.js';
import { scratchFolder } from '../support/scratch-folder.js';

const ORIGIN = 'http://127.0.0.1:40002';

/** The run's side and the console's side of one state folder, on a clock the test moves. */
function sides(): { run: SharedApprovals; console: SharedApprovals; clock: { t: number }; dir: string } {
  const dir = path.join(scratchFolder('hintbox-shared-console-'), 'console');
  const secret = randomBytes(32);
  const clock = { t: 1_000_000 };
  const make = () => new SharedApprovals({ dir, origin: ORIGIN, secret, now: () => clock.t });
  return { run: make(), console: make(), clock, dir };
}

describe('confirmations kept for a console that outlives the runs', () => {
  // proves: CONSOLE-OUTLIVES-RUNS
  it('an answer given after its run ended holds for the same call of another session, once, within its window', () => {
    const { run, console, clock } = sides();
    const asked = approvalRequest();
    const pending = run.open(asked, 'repeat', 1000);
    const id = pending.id;
    assert.equal(run.waitingFor(asked), pending.link, 'the same link while it waits');
    // Its link opens its page, and no other.
    const token = new URL(pending.link).searchParams.get('token') ?? '';
    assert.ok(console.opens(id, token));
    assert.equal(console.opens('other', token), false);
    assert.equal(console.list()[0]?.state, 'pending');
    assert.ok(console.answer(id, 'approved'));
    assert.equal(console.answer(id, 'declined'), false, 'answered once');

    const nextRun = { ...asked, session: 'session-2' };
    // Another call (other arguments, another definition, another caller) does not take it.
    assert.equal(run.takeAnswer({ ...nextRun, arguments: { path: '/workspace/b.txt', content: 'x' } }), undefined);
    assert.equal(run.takeAnswer({ ...nextRun, pinHash: 'pin-2' }), undefined);
    assert.equal(run.takeAnswer({ ...nextRun, caller: { subject: 'mallory' } }), undefined);
    assert.deepEqual(run.takeAnswer(nextRun), { id, answer: 'approved' });
    assert.equal(run.takeAnswer(nextRun), undefined, 'used once');

    // Past its window an answer holds for nothing; a decline is kept as a decline.
    const late = run.open(approvalRequest({ arguments: { path: '/workspace/c.txt' } }), 'repeat', 1000);
    assert.ok(console.answer(late.id, 'declined'));
    assert.deepEqual(run.takeAnswer(approvalRequest({ arguments: { path: '/workspace/c.txt' } })), {
      id: late.id,
      answer: 'declined',
    });
    const expired = run.open(approvalRequest({ arguments: { path: '/workspace/d.txt' } }), 'repeat', 1000);
    assert.ok(console.answer(expired.id, 'approved'));
    clock.t += 5 * 60_000 + 1;
    assert.equal(run.takeAnswer(approvalRequest({ arguments: { path: '/workspace/d.txt' } })), undefined);
  });

  it('a confirmation past its wait cannot be answered; a held one withdrawn is not answerable', async () => {
    const { run, console, clock, dir } = sides();
    const waiting = run.open(approvalRequest(), 'repeat', 1000);
    clock.t += 10 * 60_000 + 1;
    assert.equal(console.get(waiting.id)?.state, 'timeout');
    assert.equal(console.answer(waiting.id, 'approved'), false);
    assert.deepEqual(readdirSync(path.join(dir, 'grants')), [], 'no grant written');
    const held = run.open(approvalRequest({ tool: 'edit_file' }), 'held', 60_000);
    held.withdraw('answered in the client');
    assert.equal(await held.answer, 'timeout');
    assert.equal(console.answer(held.id, 'approved'), false);
    assert.equal(console.get('../../etc/passwd'), undefined, 'an id is a name, never a path');
  });
});
