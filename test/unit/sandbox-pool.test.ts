import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SandboxPool, type Upstream } from '../../src/gateway/sandbox-pool.js';
import type { SandboxFreezer } from '../../src/gateway/sandbox-activity.js';
import type { SplitTransport } from '../../src/mcp/split-transport.js';
import { silentLogger } from '../../src/util/logger.js';

/** An upstream of a held sandbox whose freezer records what it is asked (pure: no sandbox). */
function heldUpstream(log: string[]): Upstream {
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
  };
}

const turn = () => new Promise((r) => setImmediate(r));

describe("SandboxPool: hintbox's own requests to a sandbox", () => {
  // proves: DB-CALL-END-LISTING
  it('thaws a held sandbox for a listing, freezes it after, and runs the idle work (ending database sessions) only once the listing is over', async () => {
    const log: string[] = [];
    const pool = new SandboxPool({
      upstreams: () => Promise.reject(new Error('not started here')),
      log: silentLogger,
      onSandboxIdle: () => void log.push('idle'),
    });
    const upstream = heldUpstream(log);
    pool.adopt('rw', upstream);
    // A call ran and left: frozen, idle work done.
    const activity = pool.activityOf(upstream, 'rw');
    await activity.enter();
    activity.leave();
    await turn();
    assert.deepEqual(log, ['freeze', 'idle']);

    let finishListing!: () => void;
    const listing = pool.serving(upstream, async () => {
      log.push('list');
      // A call enters and leaves while the listing runs: the sandbox is not idle yet.
      await activity.enter();
      activity.leave();
      await new Promise<void>((resolve) => (finishListing = resolve));
    });
    await turn();
    assert.deepEqual(log.slice(2), ['thaw', 'list'], 'thawed before the listing is sent');
    await turn();
    assert.deepEqual(log.slice(2), ['thaw', 'list'], 'no freeze and no idle work while the listing runs');
    finishListing();
    await listing;
    await turn();
    assert.deepEqual(log.slice(2), ['thaw', 'list', 'freeze', 'idle']);
  });

  it('runs the work of an upstream it does not serve as it is', async () => {
    const log: string[] = [];
    const pool = new SandboxPool({ upstreams: () => Promise.reject(new Error('none')), log: silentLogger });
    assert.equal(await pool.serving(heldUpstream(log), () => Promise.resolve(7)), 7);
    assert.deepEqual(log, []);
  });
});
