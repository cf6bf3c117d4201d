import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isoTime } from '../../src/util/iso-time.js';

/** What V8 writes: the text isoTime must equal. */
const v8Iso = (ms: number): string => new Date(ms).toISOString();

describe('isoTime', () => {
  it('writes what toISOString writes, at the edges of days, months, leap years, centuries and its range', () => {
    const edges = [
      0,
      1,
      999,
      86_399_999,
      86_400_000,
      Date.UTC(1972, 1, 29, 12),
      Date.UTC(1972, 11, 31, 23, 59, 59, 999),
      Date.UTC(2000, 1, 29),
      Date.UTC(2000, 2, 1),
      Date.UTC(2100, 1, 28, 23, 59, 59, 999),
      Date.UTC(2100, 2, 1),
      Date.UTC(2400, 1, 29),
      Date.UTC(2026, 11, 5, 2, 18, 31, 7),
      Date.UTC(9999, 11, 31, 23, 59, 59, 999),
    ];
    for (const ms of edges) {
      assert.equal(isoTime(ms), v8Iso(ms), `at ${ms}`);
      assert.equal(isoTime(new Date(ms)), v8Iso(ms), `a Date at ${ms}`);
    }
  });

  it('writes what toISOString writes for 200 000 times spread over 1970–9999', () => {
    let seed = 0x2545f491;
    const next = (): number => {
      seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
      return seed / 2 ** 32;
    };
    for (let i = 0; i < 200_000; i++) {
      const ms = Math.floor((next() + next() * 2 ** -32) * Date.UTC(10000, 0, 1));
      assert.equal(isoTime(ms), v8Iso(ms), `at ${ms}`);
    }
  });

  it('drops a fraction of a millisecond as Date does, leaves times outside 1970–9999 to Date, and throws its RangeError for an invalid one', () => {
    for (const ms of [-1, -86_400_001, Date.UTC(1, 0, 1), Date.UTC(10000, 0, 1), 8.64e15, -8.64e15, 1.9, -0.5]) {
      assert.equal(isoTime(ms), v8Iso(ms), `at ${ms}`);
    }
    assert.throws(() => isoTime(Number.NaN), RangeError);
    assert.throws(() => isoTime(new Date('not a date')), RangeError);
    assert.throws(() => isoTime(8.64e15 + 1), RangeError);
  });
});
