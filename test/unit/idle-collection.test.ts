import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import {
  collectCompacting,
  IdleCollection,
  idleCollection,
  LARGEST_COLLECTED_HEAP,
} from '../../src/util/idle-collection.js';

const QUIET = 1000;
/** Moves the mocked clock in small steps: a timer armed in a callback counts from its own moment. */
const advance = (ms: number): void => {
  for (let done = 0; done < ms; done += 50) mock.timers.tick(Math.min(50, ms - done));
};

describe('IdleCollection', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }));
  afterEach(() => mock.timers.reset());

  it('never collects while messages keep coming, then once when they stop', () => {
    let collections = 0;
    const collection = new IdleCollection(() => collections++, QUIET);
    for (let i = 0; i < 40; i++) {
      collection.activity();
      advance(QUIET / 4);
    }
    assert.equal(collections, 0, 'a collection ran during the burst');
    advance(QUIET * 2);
    assert.equal(collections, 1);
    advance(QUIET * 10);
    assert.equal(collections, 1, 'collected again with no new message');
  });

  it('waits for a whole quiet spell after the last message', () => {
    let collections = 0;
    const collection = new IdleCollection(() => collections++, QUIET);
    collection.activity();
    advance(QUIET - 1);
    collection.activity();
    advance(QUIET);
    assert.equal(collections, 0, 'collected less than a quiet spell after a message');
    advance(QUIET);
    assert.equal(collections, 1);
  });

  it('collects once per quiet spell: the next burst earns the next collection', () => {
    let collections = 0;
    const collection = new IdleCollection(() => collections++, QUIET);
    collection.activity();
    advance(QUIET * 3);
    collection.activity();
    collection.activity();
    advance(QUIET * 3);
    assert.equal(collections, 2);
  });

  it('collects nothing once stopped', () => {
    let collections = 0;
    const collection = new IdleCollection(() => collections++, QUIET);
    collection.activity();
    collection.stop();
    collection.activity();
    advance(QUIET * 3);
    assert.equal(collections, 0);
  });

  it('is off where V8 does not expose gc (node without the bin’s --expose-gc)', () => {
    assert.equal(typeof (globalThis as { gc?: unknown }).gc, 'undefined');
    assert.equal(idleCollection(), undefined);
  });
});

describe('collectCompacting', () => {
  const recorder = (heap: number, gcThrows = false) => {
    const calls: string[] = [];
    const collector = {
      gc: () => {
        calls.push('gc');
        if (gcThrows) throw new Error('gc failed');
      },
      setFlags: (flags: string) => void calls.push(flags),
      heapUsed: () => heap,
    };
    return { calls, collector };
  };

  it('collects with compaction switched on for that collection alone', () => {
    const { calls, collector } = recorder(10 * 1024 * 1024);
    collectCompacting(collector);
    assert.deepEqual(calls, ['--compact-on-every-full-gc', 'gc', '--no-compact-on-every-full-gc']);
  });

  it('switches compaction off again when the collection throws', () => {
    const { calls, collector } = recorder(10 * 1024 * 1024, true);
    assert.throws(() => collectCompacting(collector), /gc failed/);
    assert.deepEqual(calls, ['--compact-on-every-full-gc', 'gc', '--no-compact-on-every-full-gc']);
  });

  it('leaves a large heap (a large message being handled) to V8', () => {
    const { calls, collector } = recorder(LARGEST_COLLECTED_HEAP + 1);
    collectCompacting(collector);
    assert.deepEqual(calls, []);
  });
});
