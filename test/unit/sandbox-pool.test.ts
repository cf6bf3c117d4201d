import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SandboxPool, type Upstream } from '../../src/gateway/sandbox-pool.js';
import type { SandboxFreezer } from '../../src/gateway/sandbox-activity.js';
import type { SplitTransport } from '../../src/mcp/split-transport.js';
import { silentLogger } from '../../src/util/logger.js';

/** An upstream whose freezer records what it is asked (pure: no sandbox); `held`: frozen between calls. */
function upstreamOf(log: string[], held: boolean): Upstream {
  const freezer: SandboxFreezer = {
    freeze: () => Promise.resolve(void log.push('freeze')),
    thaw: () => Promise.resolve(void log.push('thaw')),
  };
  return {
    client: {} as Client,
    forwarded: { connected: true } as SplitTransport,
    closed: new Promise(() => undefined),
    diagnostics: () => '',
    close: () => Promise.resolve(),
    freezer,
    holdBetweenCalls: held,
  };
}

const turn = () => new Promise((r) => setImmediate(r));

/** A pool serving one upstream as sandbox 'box', logging its idle work. */
function poolWith(log: string[], upstream: Upstream): SandboxPool {
  const pool = new SandboxPool({
    upstreams: () => Promise.reject(new Error('not started here')),
    log: silentLogger,
    onSandboxIdle: () => void log.push('idle'),
  });
  pool.adopt('box', upstream);
  return pool;
}

describe("SandboxPool: hintbox's own requests to a sandbox", () => {
  // proves: DB-CALL-END-LISTING
  it('counts a listing in a sandbox that runs free as a call in flight: the idle work (ending database sessions) waits until it is over', async () => {
    const log: string[] = [];
    const upstream = upstreamOf(log, false);
    const pool = poolWith(log, upstream);
    const activity = pool.activityOf(upstream, 'box');
    let finishListing!: () => void;
    const listing = pool.serving(upstream, async () => {
      log.push('list');
      // A call enters and leaves while the listing runs: the sandbox is not idle yet.
      await activity.enter();
      activity.leave();
      await new Promise<void>((resolve) => (finishListing = resolve));
    });
    await turn();
    await turn();
    assert.deepEqual(log, ['list'], 'no idle work while the listing runs');
    finishListing();
    await listing;
    await turn();
    assert.deepEqual(log, ['list', 'idle']);
  });

  // proves: HELD-UNTIL-CALLED
  it('never thaws a held sandbox for a listing, nor keeps it thawed: a call ending during the listing freezes it', async () => {
    const log: string[] = [];
    const upstream = upstreamOf(log, true);
    const pool = poolWith(log, upstream);
    const activity = pool.activityOf(upstream, 'box');
    await activity.enter();
    activity.leave();
    await turn();
    assert.deepEqual(log, ['freeze', 'idle']);
    let finishListing!: () => void;
    const listing = pool.serving(upstream, async () => {
      log.push('list');
      await activity.enter(); // a call runs there meanwhile (the listing is answered then)
      activity.leave();
      await turn();
      await new Promise<void>((resolve) => (finishListing = resolve));
    });
    await turn();
    await turn();
    assert.deepEqual(log, ['freeze', 'idle', 'list', 'thaw', 'freeze', 'idle'], 'frozen again as the call left');
    finishListing();
    await listing;
    await turn();
    assert.deepEqual(log, ['freeze', 'idle', 'list', 'thaw', 'freeze', 'idle'], 'the listing thawed nothing');
  });

  it('runs the work of an upstream it does not serve as it is', async () => {
    const log: string[] = [];
    const pool = new SandboxPool({ upstreams: () => Promise.reject(new Error('none')), log: silentLogger });
    assert.equal(await pool.serving(upstreamOf(log, true), () => Promise.resolve(7)), 7);
    assert.deepEqual(log, []);
  });
});
