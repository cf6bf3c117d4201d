import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { backendHolds, sessionsToEnd, type BackendState } from '../../src/database/call-end-sessions.js';
import { SessionActivity, leftBehindBy } from '../../src/database/session-activity.js';

const idle = (pid: number, more: Partial<BackendState> = {}): BackendState => ({
  pid,
  state: 'idle',
  inTransaction: false,
  locks: 0,
  ...more,
});

describe('which sessions end at a call end', () => {
  it('ends a backend that holds a lock, an open transaction or a statement, and keeps a clean idle one', () => {
    assert.equal(backendHolds(idle(1)), undefined);
    assert.match(backendHolds(idle(1, { locks: 1 }))!, /1 lock/); // an advisory lock while idle
    assert.match(backendHolds(idle(1, { inTransaction: true }))!, /transaction/);
    assert.match(backendHolds(idle(1, { state: 'active' }))!, /active/);
    assert.match(backendHolds(idle(1, { state: null }))!, /unknown/);
  });

  // proves: DB-CALL-END
  it("joins the relay's view and Postgres's: either one ends a session, and what neither accounts for ends too", () => {
    const result = sessionsToEnd(
      [
        { connectionId: 1, pid: 11 }, // clean in both: kept
        { connectionId: 2, pid: 12, holds: 'it ran LISTEN, which may leave something in the session' },
        { connectionId: 3, pid: 13 }, // Postgres: a lock
        { connectionId: 4 }, // no pid yet
        { connectionId: 5, pid: 15 }, // its backend is not listed
      ],
      [idle(11), idle(12), idle(13, { locks: 1 }), idle(99)],
    );
    assert.deepEqual(result.cut, [2, 3, 4, 5]);
    assert.deepEqual(result.terminate, [12, 13, 99]);
    assert.equal(result.kept, 1);
    assert.equal(result.reasons.length, 5);
    assert.match(result.reasons.at(-1)!, /pid 99: no session of the relay owns it/);
  });

  it('lets the call end wait only while every session to end is running a statement: anything else it holds, or a backend no relay session owns, ends them now', () => {
    const running = { holds: 'a statement is running', running: true };
    assert.equal(
      sessionsToEnd([{ connectionId: 1, pid: 11, ...running }], [idle(11, { state: 'active' })]).onlyRunning,
      true,
    );
    assert.equal(
      sessionsToEnd(
        [
          { connectionId: 1, pid: 11, ...running },
          { connectionId: 2, pid: 12, holds: 'it is idle in a transaction' },
        ],
        [idle(11, { state: 'active' }), idle(12, { inTransaction: true })],
      ).onlyRunning,
      false,
    );
    assert.equal(
      sessionsToEnd([{ connectionId: 1, pid: 11, ...running }], [idle(11, { state: 'active' }), idle(99)]).onlyRunning,
      false,
    );
    assert.equal(sessionsToEnd([{ connectionId: 1, pid: 11 }], [idle(11)]).onlyRunning, false, 'nothing to end');
  });

  // proves: DB-CALL-END
  it('marks a session by the tags of what it ran: reads, writes and transaction control leave nothing; LISTEN, DO, CALL, DECLARE and unknown tags do', () => {
    for (const tag of ['SELECT 2', 'INSERT 0 1', 'UPDATE 3', 'BEGIN', 'COMMIT', 'ROLLBACK', 'SET', 'SHOW', 'FETCH 5']) {
      assert.equal(leftBehindBy(tag), undefined, tag);
    }
    for (const tag of [
      'LISTEN',
      'DO',
      'CALL',
      'DECLARE CURSOR',
      'CREATE TABLE',
      'PREPARE TRANSACTION',
      'SOMETHING NEW',
      '',
    ]) {
      assert.ok(leftBehindBy(tag), tag);
    }
    const activity = new SessionActivity(0);
    assert.match(activity.holdsSomething()!, /startup/);
    activity.readyForQuery('I', 1);
    assert.equal(activity.holdsSomething(), undefined);
    activity.clientSent(Buffer.from('Q'), 2);
    assert.match(activity.holdsSomething()!, /statement is running/);
    activity.commandComplete('BEGIN');
    activity.readyForQuery('T', 3);
    assert.match(activity.holdsSomething()!, /idle in a transaction/);
    activity.readyForQuery('E', 4);
    assert.match(activity.holdsSomething()!, /failed transaction/);
    activity.commandComplete('LISTEN');
    activity.readyForQuery('I', 5);
    assert.match(activity.holdsSomething()!, /LISTEN/, 'a LISTEN outlives its transaction');
  });
});
