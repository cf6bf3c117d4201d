import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FREEZE_CANCEL_WINDOW_MS, SandboxActivity, type SandboxFreezer } from '../../src/gateway/sandbox-activity.js';

/**
 * A freezer that records what it was asked and finishes each step when told to. `cancellable`:
 * a freeze whose signal aborts before it was finished is undone at once (as the cgroup freezer
 * does), logged `cancelled`; else the signal is ignored (as the gate does).
 */
function recordingFreezer({ cancellable = false } = {}) {
  const log: string[] = [];
  const waiting: (() => void)[] = [];
  let failNext: Error | undefined;
  const step =
    (what: string) =>
    (cancel?: AbortSignal): Promise<void | 'cancelled'> =>
      new Promise<void | 'cancelled'>((resolve, reject) => {
        log.push(what);
        const error = failNext;
        failNext = undefined;
        const finish = () => (error ? reject(error) : resolve());
        waiting.push(finish);
        if (!cancellable || !cancel) return;
        cancel.addEventListener('abort', () => {
          waiting.splice(waiting.indexOf(finish), 1);
          log.push('cancelled');
          resolve('cancelled');
        });
      });
  const thaw = step('thaw');
  const freezer: SandboxFreezer = { freeze: step('freeze'), thaw: async () => void (await thaw()) };
  return {
    freezer,
    log,
    failNextStep: (error: Error) => (failNext = error),
    /** Steps asked and not yet answered. */
    unanswered: () => waiting.length,
    /** Finishes every step asked so far, then lets the promise chain run. */
    async finish(): Promise<void> {
      await new Promise((r) => setImmediate(r));
      while (waiting.length) {
        waiting.shift()?.();
        await new Promise((r) => setImmediate(r));
      }
    },
  };
}

const settled = () => new Promise((r) => setImmediate(r));

/** A held sandbox's activity over a freezer that can cancel (the cgroup freezer's kind), counting its idle work. */
function cancellableActivity() {
  const f = recordingFreezer({ cancellable: true });
  const counts = { idle: 0 };
  const activity = new SandboxActivity({
    freezer: f.freezer,
    onFreezeFailed: assert.fail,
    onIdle: () => void counts.idle++,
  });
  return { f, activity, counts };
}

describe('SandboxActivity', () => {
  it('freezes a held sandbox when its last call leaves and thaws it for the next', async () => {
    const f = recordingFreezer();
    let idle = 0;
    const activity = new SandboxActivity({
      freezer: f.freezer,
      onFreezeFailed: assert.fail,
      onIdle: () => void idle++,
    });
    await activity.enter(); // just released: it runs, nothing to do
    const second = activity.enter();
    await second;
    assert.deepEqual(f.log, []);
    activity.leave();
    await settled();
    assert.deepEqual(f.log, [], 'one call is still in flight');
    activity.leave();
    await settled();
    assert.deepEqual(f.log, ['freeze']);
    await f.finish();
    assert.equal(idle, 1, 'idle once frozen');
    const third = activity.enter();
    await settled();
    assert.deepEqual(f.log, ['freeze', 'thaw']);
    // The call goes in once the thaw is sent, before its answer: the gate obeys in order, and a
    // stopped server reads the call only once it runs (the answer is checked when it comes).
    await third;
    assert.equal(f.unanswered(), 1, 'the thaw is not answered yet');
    await f.finish();
    activity.leave();
    await settled();
    assert.deepEqual(f.log, ['freeze', 'thaw', 'freeze']);
  });

  // proves: HELD-UNTIL-CALLED
  it('never leaves a call in a frozen sandbox when it enters while the freeze is under way', async () => {
    const f = recordingFreezer();
    const activity = new SandboxActivity({ freezer: f.freezer, onFreezeFailed: assert.fail });
    await activity.enter();
    activity.leave(); // freeze asked
    await settled();
    const next = activity.enter(); // while the freeze runs
    await f.finish();
    await next;
    assert.deepEqual(f.log, ['freeze', 'thaw'], 'thawed after the freeze, before the call goes in');
  });

  it('skips a freeze that a new call made unneeded', async () => {
    const f = recordingFreezer();
    const activity = new SandboxActivity({ freezer: f.freezer, onFreezeFailed: assert.fail });
    await activity.enter();
    activity.leave(); // freeze 1, under way
    await settled();
    const second = activity.enter(); // a thaw, queued behind it
    activity.leave(); // a freeze, queued
    const third = activity.enter(); // before that freeze step ran
    await f.finish();
    await second;
    await third;
    assert.deepEqual(f.log, ['freeze', 'thaw'], 'the step read the count when it ran: a call was in flight again');
  });

  it('asks the freeze in the turn the last call ended, after the call was recorded and answered', async () => {
    const f = recordingFreezer();
    const activity = new SandboxActivity({ freezer: f.freezer, onFreezeFailed: assert.fail });
    await activity.enter();
    activity.leave();
    assert.deepEqual(f.log, [], 'not within leave(): the answer goes first');
    await Promise.resolve();
    assert.deepEqual(f.log, ['freeze'], 'asked in a microtask of the same turn, not a turn later');
    await f.finish();
  });

  // proves: HELD-UNTIL-CALLED
  it('lets a call that comes in cancel the freeze under way, where the freezer can: no thaw to wait for', async () => {
    const { f, activity, counts } = cancellableActivity();
    await activity.enter();
    activity.leave();
    await settled();
    assert.deepEqual(f.log, ['freeze']);
    await activity.enter(); // while the freeze is under way
    assert.deepEqual(f.log, ['freeze', 'cancelled'], 'the freezer undid the freeze: nothing to thaw');
    assert.equal(counts.idle, 0, 'not idle: a call is in flight');
    // It leaves: frozen again, for real this time.
    activity.leave();
    await settled();
    assert.deepEqual(f.log, ['freeze', 'cancelled', 'freeze']);
    await f.finish();
    assert.equal(counts.idle, 1);
    await activity.enter();
    assert.deepEqual(f.log, ['freeze', 'cancelled', 'freeze', 'thaw'], 'a freeze that held is thawed');
  });

  // proves: HELD-UNTIL-CALLED
  it('stops cancelling once the sandbox went unfrozen for the window: the next freeze is waited for', async () => {
    const f = recordingFreezer({ cancellable: true });
    let clock = 0;
    const activity = new SandboxActivity({ freezer: f.freezer, onFreezeFailed: assert.fail, now: () => clock });
    await activity.enter();
    // Calls come in back to back, each before the freeze after the last one holds.
    for (let i = 0; i < 3; i++) {
      activity.leave();
      await settled();
      clock += FREEZE_CANCEL_WINDOW_MS / 4;
      await activity.enter();
    }
    assert.deepEqual(f.log, ['freeze', 'cancelled', 'freeze', 'cancelled', 'freeze', 'cancelled']);
    clock += FREEZE_CANCEL_WINDOW_MS / 4; // the window is over
    activity.leave();
    await settled();
    const late = activity.enter();
    await settled();
    assert.deepEqual(f.log.slice(6), ['freeze'], 'not cancelled: the call waits for the freeze');
    await f.finish();
    await late;
    assert.deepEqual(f.log.slice(6), ['freeze', 'thaw'], 'frozen, then thawed for the call');
    // Seen frozen: the window starts again.
    activity.leave();
    await settled();
    await activity.enter();
    assert.deepEqual(f.log.slice(8), ['freeze', 'cancelled']);
  });

  // proves: HELD-UNTIL-CALLED
  it('freezes again when a call that cancelled the freeze leaves before its own step ran (cancelled by its client)', async () => {
    const { f, activity, counts } = cancellableActivity();
    await activity.enter();
    activity.leave();
    await settled();
    const cancelling = activity.enter(); // cancels the freeze under way
    activity.leave(); // and leaves at once, never sent
    await settled();
    assert.deepEqual(f.log, ['freeze', 'cancelled', 'freeze'], 'its step read the count: no call, so it froze');
    await f.finish();
    await cancelling;
    // Idle work runs after that freeze and again for the leave (ending database sessions twice is harmless).
    assert.ok(counts.idle >= 1, 'idle once frozen');
    await activity.enter();
    assert.deepEqual(f.log, ['freeze', 'cancelled', 'freeze', 'thaw'], 'it was frozen: the next call thaws it');
  });

  // proves: HELD-UNTIL-CALLED
  it('runs a hold of its own queued behind a cancelled freeze frozen all the same, and the cancelling call after it', async () => {
    const f = recordingFreezer({ cancellable: true });
    const activity = new SandboxActivity({ freezer: f.freezer, onFreezeFailed: assert.fail });
    await activity.enter();
    activity.leave();
    await settled();
    const order: string[] = [];
    const hold = activity.holdFrozenDuring(async () => void order.push(`copied after ${f.log.join(' ')}`));
    const call = activity.enter().then(() => order.push('call sent'));
    await settled();
    await f.finish();
    await hold;
    await call;
    assert.deepEqual(order, ['copied after freeze cancelled freeze', 'call sent'], 'frozen again for the copy');
    assert.deepEqual(f.log, ['freeze', 'cancelled', 'freeze', 'thaw']);
  });

  // proves: HELD-UNTIL-CALLED
  it('lets no call cancel a freeze once the window is over, at its very end included', async () => {
    const f = recordingFreezer({ cancellable: true });
    let clock = 0;
    const activity = new SandboxActivity({ freezer: f.freezer, onFreezeFailed: assert.fail, now: () => clock });
    await activity.enter();
    activity.leave();
    await settled();
    clock = FREEZE_CANCEL_WINDOW_MS;
    const late = activity.enter();
    await settled();
    assert.deepEqual(f.log, ['freeze'], 'not cancelled: the call waits');
    await f.finish();
    await late;
    assert.deepEqual(f.log, ['freeze', 'thaw']);
  });

  it('never cancels the freeze of a hold of its own (the preview copy), nor one the freezer cannot undo', async () => {
    const f = recordingFreezer();
    const activity = new SandboxActivity({ freezer: f.freezer, onFreezeFailed: assert.fail });
    await activity.enter();
    activity.leave();
    await settled();
    const next = activity.enter(); // the gate ignores the signal: the call waits
    await settled();
    assert.deepEqual(f.log, ['freeze']);
    await f.finish();
    await next;
    assert.deepEqual(f.log, ['freeze', 'thaw']);
    const c = recordingFreezer({ cancellable: true });
    const held = new SandboxActivity({ freezer: c.freezer, onFreezeFailed: assert.fail });
    const copied: string[] = [];
    const hold = held.holdFrozenDuring(async () => void copied.push('copied'));
    const during = held.enter(); // comes in during the hold's freeze
    await settled();
    assert.deepEqual(c.log, ['freeze'], "the hold's freeze is not cancelled");
    await c.finish();
    await hold;
    await during;
    assert.deepEqual(copied, ['copied']);
    assert.deepEqual(c.log, ['freeze', 'thaw']);
  });

  // proves: HELD-UNTIL-CALLED
  it('reports a freeze that failed, so the sandbox can be removed (fail closed)', async () => {
    const f = recordingFreezer();
    const failures: string[] = [];
    let idle = 0;
    const activity = new SandboxActivity({
      freezer: f.freezer,
      onFreezeFailed: (e) => failures.push(e.message),
      onIdle: () => void idle++,
    });
    await activity.enter();
    f.failNextStep(new Error('engine said no'));
    activity.leave();
    await f.finish();
    await settled();
    assert.deepEqual(failures, ['engine said no']);
    assert.equal(idle, 0, 'not idle: it was not frozen');
  });

  // proves: HELD-UNTIL-CALLED
  it('removes a sandbox whose thaw failed after its call was sent ahead of the answer, and refuses every later call', async () => {
    const f = recordingFreezer();
    const failures: string[] = [];
    const activity = new SandboxActivity({ freezer: f.freezer, onFreezeFailed: (e) => failures.push(e.message) });
    await activity.enter();
    activity.leave();
    await f.finish();
    f.failNextStep(new Error('the gate answered F'));
    await activity.enter(); // sent ahead of the thaw's answer
    await f.finish();
    assert.deepEqual(failures, ['the gate answered F'], 'reported, so the sandbox (and the call in it) is removed');
    activity.leave();
    await assert.rejects(activity.enter(), /its thaw failed \(the gate answered F\); it is being removed/);
    activity.leave();
    assert.equal(activity.calls, 0);
    await settled();
    assert.deepEqual(f.log, ['freeze', 'thaw'], 'no freeze and no thaw of a broken sandbox');
    assert.deepEqual(failures, ['the gate answered F']);
  });

  // proves: DB-SESSION-BOUNDS
  it('lets a call in only after the idle work (ending database sessions) is done, so it never cuts the new call', async () => {
    const events: string[] = [];
    let finishIdle!: () => void;
    const activity = new SandboxActivity({
      onFreezeFailed: assert.fail,
      onIdle: () =>
        new Promise<void>((resolve) => {
          events.push('idle work starts');
          finishIdle = () => (events.push('idle work done'), resolve());
        }),
    });
    await activity.enter();
    activity.leave();
    await settled();
    const next = activity.enter().then(() => events.push('next call goes in'));
    await settled();
    assert.deepEqual(events, ['idle work starts']);
    finishIdle();
    await next;
    assert.deepEqual(events, ['idle work starts', 'idle work done', 'next call goes in']);
  });

  // proves: HELD-UNTIL-CALLED
  it("holds a sandbox frozen for hintbox's own work, calls in flight included, and lets no call in meanwhile", async () => {
    const f = recordingFreezer();
    const activity = new SandboxActivity({ freezer: f.freezer, onFreezeFailed: assert.fail });
    await activity.enter(); // a call in flight: running
    const events: string[] = [];
    let copyDone!: () => void;
    const held = activity.holdFrozenDuring(async () => {
      events.push('copy starts');
      await new Promise<void>((r) => (copyDone = r));
      events.push('copy done');
      return 'copied';
    });
    await f.finish();
    const next = activity.enter().then(() => events.push('next call goes in'));
    await settled();
    assert.deepEqual(events, ['copy starts'], 'the next call waits for the hold');
    copyDone();
    await f.finish();
    assert.equal(await held, 'copied');
    await next;
    assert.deepEqual(f.log, ['freeze', 'thaw'], 'frozen for the copy, thawed after it: calls are in flight');
    assert.deepEqual(events, ['copy starts', 'copy done', 'next call goes in']);
  });

  it('runs none of the work when the sandbox cannot be frozen for it', async () => {
    const f = recordingFreezer();
    const activity = new SandboxActivity({ freezer: f.freezer, onFreezeFailed: assert.fail });
    await activity.enter();
    f.failNextStep(new Error('no pause'));
    let ran = false;
    const held = activity.holdFrozenDuring(async () => void (ran = true));
    await f.finish();
    await assert.rejects(held, /no pause/);
    assert.equal(ran, false);
  });

  // proves: HELD-UNTIL-CALLED
  it('freezes a sandbox that ran free once it is held between calls (its server lost trust)', async () => {
    const f = recordingFreezer();
    const activity = new SandboxActivity({ freezer: f.freezer, holdBetweenCalls: false, onFreezeFailed: assert.fail });
    await activity.enter();
    activity.leave();
    await f.finish();
    assert.deepEqual(f.log, [], 'hold: false: it runs free between calls');
    assert.equal(activity.held, false);
    const holding = activity.holdBetweenCalls();
    await f.finish();
    await holding;
    assert.deepEqual(f.log, ['freeze']);
    assert.equal(activity.held, true);
  });

  // proves: HELD-UNTIL-CALLED
  it('removes a sandbox whose freeze failed even when a call entered meanwhile, and refuses that call and every later one instead of sending them into a stopped sandbox', async () => {
    const f = recordingFreezer();
    const failures: string[] = [];
    const activity = new SandboxActivity({ freezer: f.freezer, onFreezeFailed: (e) => failures.push(e.message) });
    await activity.enter();
    f.failNextStep(new Error('the gate answered F'));
    activity.leave();
    await settled(); // the freeze is under way
    const next = activity.enter(); // and a call comes in before it fails
    await f.finish();
    await assert.rejects(next, /freeze failed \(the gate answered F\); it is being removed/);
    assert.deepEqual(failures, ['the gate answered F'], 'reported once, though a call is in flight');
    activity.leave();
    await assert.rejects(activity.enter(), /being removed/);
    activity.leave();
    await settled();
    assert.deepEqual(f.log, ['freeze'], 'no thaw of a broken sandbox, no second freeze');
    assert.deepEqual(failures, ['the gate answered F']);
  });

  it('runs a free sandbox without a freezer and still reports idle', async () => {
    let idle = 0;
    const activity = new SandboxActivity({ onFreezeFailed: assert.fail, onIdle: () => void idle++ });
    assert.equal(activity.held, false);
    await activity.enter();
    activity.leave();
    await settled();
    assert.equal(idle, 1);
  });
});
