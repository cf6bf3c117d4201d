import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { refusedByDatabase } from '../../src/audit/audit-sink-rows.js';

describe('refusedByDatabase: whose fault an insert error is', () => {
  it('a SQLSTATE of the data (22…, 23…, 42…, 54…) is the rows being refused', () => {
    for (const code of ['22P05', '23505', '42P01', '54000', '22021'])
      assert.equal(refusedByDatabase({ code }), true, code);
  });

  it('the session ended, the connection lost, a restart, resources, a retryable transaction: the database failing', () => {
    for (const code of ['57P01', '57P02', '57P03', '08006', '08003', '53300', '40001', '40P01', '58030', 'XX000']) {
      assert.equal(refusedByDatabase({ code }), false, code);
    }
  });

  it('an error without a SQLSTATE (a closed socket, a Node errno) is the database failing', () => {
    assert.equal(refusedByDatabase(new Error('Connection terminated unexpectedly')), false);
    assert.equal(refusedByDatabase(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })), false);
    assert.equal(refusedByDatabase(undefined), false);
    assert.equal(refusedByDatabase(null), false);
  });
});
