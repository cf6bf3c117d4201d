import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventBudget } from '../../src/util/event-budget.js';

describe('EventBudget', () => {
  it('records a burst, then counts what is over and says so with the next record', () => {
    let now = 0;
    const budget = new EventBudget(3, 2, () => now);
    assert.deepEqual(
      [budget.take(), budget.take(), budget.take()],
      [
        { record: true, skipped: 0 },
        { record: true, skipped: 0 },
        { record: true, skipped: 0 },
      ],
    );
    assert.deepEqual([budget.take(), budget.take()], [{ record: false }, { record: false }]);
    now = 500; // one token back at 2 per second
    assert.deepEqual(budget.take(), { record: true, skipped: 2 });
    assert.deepEqual(budget.take(), { record: false });
  });

  it('refills no further than the burst', () => {
    let now = 0;
    const budget = new EventBudget(2, 10, () => now);
    now = 60_000;
    assert.equal([budget.take(), budget.take(), budget.take()].filter((t) => t.record).length, 2);
  });
});
