import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SessionBounds } from '../../src/database/role-grants.js';
import { SessionActivity, boundsCheckInterval } from '../../src/database/session-activity.js';

const BOUNDS: SessionBounds = {
  statementTimeoutMs: 1_000,
  idleInTransactionTimeoutMs: 500,
  idleSessionTimeoutMs: 2_000,
};

/** A frontend message: type byte, then its length (itself included) and body. */
function message(type: string, body = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}
const QUERY = message('Q', Buffer.from('SELECT 1\0'));
const TERMINATE = message('X');

/** A session through its startup at t = 0, idle outside a transaction. */
function started(): SessionActivity {
  const activity = new SessionActivity(0);
  activity.readyForQuery('I', 0);
  return activity;
}

describe('SessionActivity', () => {
  it('holds no bound before the startup is done: what the client sends then is authentication', () => {
    const activity = new SessionActivity(0);
    activity.clientSent(Buffer.from('p-password-message'), 10);
    assert.equal(activity.started, false);
    assert.equal(activity.busy, false);
    assert.equal(activity.crossedBound(BOUNDS, 1_000_000), undefined);
  });

  it('a statement is busy from the first bytes after ReadyForQuery until the next one', () => {
    const activity = started();
    activity.clientSent(QUERY, 100);
    activity.clientSent(QUERY, 900); // a pipelined second message does not restart the clock
    assert.equal(activity.busySince, 100);
    assert.equal(activity.crossedBound(BOUNDS, 1_100), undefined);
    assert.equal(activity.crossedBound(BOUNDS, 1_101), 'a statement ran longer than 1000 ms');
    activity.readyForQuery('I', 1_050);
    assert.equal(activity.busy, false);
    assert.equal(activity.idleSince, 1_050);
  });

  it('a Terminate is the end of an idle session, not a statement', () => {
    const activity = started();
    activity.clientSent(TERMINATE, 100);
    assert.equal(activity.busy, false);
    // Only a lone Terminate: one sent with other bytes in the same chunk is something running.
    activity.clientSent(Buffer.concat([QUERY, TERMINATE]), 200);
    assert.equal(activity.busySince, 200);
  });

  it('idle outside a transaction is held to the session bound, inside one to the transaction bound', () => {
    const idle = started();
    assert.equal(idle.crossedBound(BOUNDS, 2_000), undefined);
    assert.equal(idle.crossedBound(BOUNDS, 2_001), 'the session was idle longer than 2000 ms');

    for (const status of ['T', 'E']) {
      const inTransaction = new SessionActivity(0);
      inTransaction.readyForQuery(status, 0);
      assert.equal(inTransaction.crossedBound(BOUNDS, 500), undefined, status);
      assert.equal(inTransaction.crossedBound(BOUNDS, 501), 'a transaction was idle longer than 500 ms', status);
    }
  });
});

describe('boundsCheckInterval', () => {
  it('looks four times per shortest bound, at least every second and at most every 0.1 s', () => {
    assert.equal(boundsCheckInterval(BOUNDS), 125);
    assert.equal(boundsCheckInterval({ ...BOUNDS, idleInTransactionTimeoutMs: 60_000 }), 250);
    assert.equal(
      boundsCheckInterval({
        statementTimeoutMs: 600_000,
        idleInTransactionTimeoutMs: 60_000,
        idleSessionTimeoutMs: 600_000,
      }),
      1_000,
    );
    assert.equal(boundsCheckInterval({ ...BOUNDS, statementTimeoutMs: 50 }), 100);
  });
});
