import assert from 'node:assert/strict';
import { existsSync, rmSync } from 'node:fs';
import net from 'node:net';
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
import { auditIntentRow } from '../../src/store/state-store.js';
import { silentLogger } from '../../src/util/logger.js';
import { pgliteFolders } from '../integration/support/pglite-folders.js';
import { sampleIntent, stateStoreContract, type StoreHarness } from '../integration/support/state-store-contract.js';

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

  it("writes audit batches with the statement, at once, through a daemon of an older hintbox that knows no 'copy'", async () => {
    // The daemon of the version before 'copy': it answers queries without saying what it
    // speaks, and answers nothing at all to an op it does not know.
    const dir = await newFolder('older-');
    const { adapter, release } = await openLockedPglite(dir);
    const ops: string[] = [];
    const server = net.createServer((socket) => {
      let buffered = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        buffered += chunk;
        for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
          const request = JSON.parse(buffered.slice(0, nl)) as { id: number; op: string; sql?: string; params?: [] };
          buffered = buffered.slice(nl + 1);
          ops.push(request.op);
          const known: Record<string, string | undefined> = {
            query: request.sql,
            begin: 'BEGIN',
            commit: 'COMMIT',
            rollback: 'ROLLBACK',
          };
          const sql = known[request.op];
          if (sql === undefined) continue;
          void adapter.query(sql, request.op === 'query' ? (request.params ?? []) : []).then(
            (rows) => socket.write(JSON.stringify({ id: request.id, rows }) + '\n'),
            (error: Error) => socket.write(JSON.stringify({ id: request.id, error: error.message }) + '\n'),
          );
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(path.join(dir, STATE_SOCKET), resolve));
    const store = await openDaemonStateStore({ dir, startDaemon: noSpawn });
    try {
      const started = Date.now();
      await store.audit.recordBatch([
        { kind: 'intent', id: 'older-1', at: new Date().toISOString(), intent: auditIntentRow(sampleIntent()) },
      ]);
      assert.ok(Date.now() - started < 10_000, 'the batch did not wait for an answer that never comes');
      assert.equal((await store.audit.get('older-1'))?.tool, sampleIntent().tool, 'the record is in the store');
      assert.ok(!ops.includes('copy'), `no copy was sent to the older daemon (ops: ${[...new Set(ops)].join(', ')})`);
    } finally {
      await store.close();
      await new Promise((resolve) => server.close(resolve));
      await adapter.close();
      await release();
    }
  });

  it('answers an op it does not know with an error, not silence', async () => {
    const dir = await newFolder('unknown-op-');
    const daemon = await daemonOn(dir);
    try {
      const socket = net.connect(path.join(dir, STATE_SOCKET));
      const line = await new Promise<string>((resolve, reject) => {
        socket.setEncoding('utf8');
        let buffered = '';
        socket.on('data', (chunk: string) => {
          buffered += chunk;
          if (buffered.includes('\n')) resolve(buffered.slice(0, buffered.indexOf('\n')));
        });
        socket.on('error', reject);
        socket.write(JSON.stringify({ id: 7, op: 'vacuum-everything' }) + '\n');
      });
      socket.destroy();
      const answer = JSON.parse(line) as { id: number; error?: string; protocol?: number };
      assert.equal(answer.id, 7);
      assert.match(answer.error ?? '', /unknown op "vacuum-everything"/);
      assert.equal(answer.protocol, 2, 'and says what it speaks');
    } finally {
      await daemon.stop();
      await daemon.released;
    }
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
