import assert from 'node:assert/strict';
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { openDaemonStateStore } from '../../src/store/open-state-store.js';
import { openLockedPglite } from '../../src/store/pglite-state-store.js';
import {
  connectStateDaemon,
  serveStateDaemon,
  STATE_SOCKET,
  type RunningStateDaemon,
} from '../../src/store/state-daemon.js';
import { silentLogger } from '../../src/util/logger.js';
import { pgliteFolders } from '../integration/support/pglite-folders.js';
import { stateStoreContract, type StoreHarness } from '../integration/support/state-store-contract.js';

/**
 * The embedded store as hintbox processes use it: PGlite in the state daemon, SQL over its Unix
 * socket. The daemon runs in this process; clients connect as another process would.
 */

const { newFolder } = pgliteFolders('hintbox-daemon-test-');

async function daemonOn(dir: string, idleMs?: number): Promise<RunningStateDaemon & { released: Promise<void> }> {
  let release: () => Promise<void> = async () => {};
  const daemon = await serveStateDaemon({
    dir,
    log: silentLogger,
    ...(idleMs ? { idleMs } : {}),
    openDatabase: async (d) => {
      const opened = await openLockedPglite(d);
      release = opened.release;
      return opened.adapter;
    },
  });
  return { ...daemon, released: daemon.stopped.then(() => release()) };
}

const noSpawn = (): void => {
  throw new Error('the test daemon should be running');
};

async function newHarness(): Promise<StoreHarness> {
  const dir = await newFolder();
  const daemon = await daemonOn(dir);
  return {
    open: (options) => openDaemonStateStore({ ...options, dir, startDaemon: noSpawn }),
    rawAdapter: () => connectStateDaemon({ dir, startDaemon: noSpawn }),
    child: {
      module: fileURLToPath(new URL('../../src/store/open-state-store.ts', import.meta.url)),
      exportName: 'openDaemonStateStore',
      options: { dir },
    },
    dispose: async () => {
      await daemon.stop();
      await daemon.released;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

stateStoreContract('embedded store through the state daemon', newHarness);

describe('the state daemon', () => {
  it('serves several clients at once, and a client gone inside a transaction blocks nobody', async () => {
    const harness = await newHarness();
    try {
      const a = await harness.rawAdapter();
      const b = await harness.rawAdapter();
      await a.query('CREATE TABLE t (n int)');
      const stuck = a.transaction(async (tx) => {
        await tx.query('INSERT INTO t VALUES (1)');
        await a.close(); // the client dies with its transaction open
        await new Promise((r) => setTimeout(r, 50));
      });
      await assert.rejects(stuck, 'the dead client’s transaction fails');
      await b.query('INSERT INTO t VALUES (2)');
      const rows = await b.query('SELECT n FROM t ORDER BY n');
      assert.deepEqual(rows, [{ n: 2 }], 'the dead client’s insert was rolled back; the other client went on');
      await b.close();
    } finally {
      await harness.dispose();
    }
  });

  it('stops after its idle time without clients, removing its socket and lock', async () => {
    const dir = await newFolder('idle-');
    const daemon = await daemonOn(dir, 200);
    const client = await connectStateDaemon({ dir, startDaemon: noSpawn });
    await new Promise((r) => setTimeout(r, 400));
    assert.ok(existsSync(path.join(dir, STATE_SOCKET)), 'a connected client keeps it running');
    await client.close();
    await daemon.released;
    assert.equal(existsSync(path.join(dir, STATE_SOCKET)), false, 'the socket is gone');
    assert.equal(existsSync(path.join(dir, 'hintbox.lock')), false, 'the lock is released');
  });

  it('refuses a second daemon on the same folder', async () => {
    const dir = await newFolder('twice-');
    const first = await daemonOn(dir);
    try {
      await assert.rejects(daemonOn(dir), /in use by process/);
    } finally {
      await first.stop();
      await first.released;
    }
  });
});
