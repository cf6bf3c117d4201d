import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConcurrencyLimit } from '../../src/util/concurrency-limit.js';

describe('a concurrency limit', () => {
  it('runs at most its limit at once, every task in turn, a failure only its own', async () => {
    const limit = new ConcurrencyLimit(3);
    let now = 0;
    let most = 0;
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) =>
        limit.run(async () => {
          most = Math.max(most, ++now);
          await new Promise((r) => setTimeout(r, 5));
          now--;
          if (i === 4) throw new Error('four failed');
          return i;
        }),
      ),
    );
    assert.equal(most, 3);
    assert.deepEqual(
      results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message)),
      [0, 1, 2, 3, 'four failed', 5, 6, 7, 8, 9],
    );
  });

  it('refuses a limit below one', () => {
    assert.throws(() => new ConcurrencyLimit(0), /^Error: concurrency limit must be a whole number ≥ 1, not 0$/);
  });
});
