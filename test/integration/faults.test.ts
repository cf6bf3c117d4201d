import assert from 'node:assert/strict';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { ensureFaultyImage } from './support/docker.js';
import {
  auditDiskFull,
  crashAnywhere,
  crashDuringPreview,
  crashWithDatabase,
  CRASH_PHASES,
  load,
  sandboxFaults,
  sinkDownUnderLoad,
} from '../faults/fault-cases.js';

/**
 * The short forms of the fault suite (`npm run faults` runs the long ones and prints the table):
 * each case is run a few times with a fixed seed, and each must report no failure, no lost
 * record and nothing left behind. A case's own problems are in the assertion's message.
 */
integrationSuite('faults: crashes, sandbox faults and load', { timeout: 900_000, images: [ensureFaultyImage] }, () => {
  it('hintbox killed with SIGKILL in every phase of a session loses no record and leaves nothing after the next start', async () => {
    const result = await crashAnywhere(CRASH_PHASES.length, 7);
    assert.deepEqual(result.problems, []);
    assert.equal(result.recordsLost, 0);
    assert.equal(result.leftovers, 0);
  });

  it("hintbox killed with SIGKILL during a confirmation's preview leaves no preview sandbox or copy after the next start", async () => {
    const result = await crashDuringPreview(2, 7);
    assert.deepEqual(result.problems, []);
    assert.equal(result.recordsLost, 0);
    assert.equal(result.leftovers, 0);
  });

  it('hintbox killed with SIGKILL while its sandboxes hold database roles: after the sweep no role, relay folder or row without an intent', async () => {
    const result = await crashWithDatabase(2, 7);
    assert.deepEqual(result.problems, []);
    assert.equal(result.recordsLost, 0);
    assert.equal(result.leftovers, 0);
  });

  it('a sandbox killed for memory or that stops reading: the call says why, is audited, the next call gets a fresh sandbox', async () => {
    const result = await sandboxFaults(1);
    assert.deepEqual(result.problems, []);
  });

  it(
    'the audit folder full: a call is refused and never reaches the server; calls work again with room',
    {
      skip: process.getuid?.() !== 0 && 'needs root (to mount a tmpfs)',
    },
    async () => {
      const result = await auditDiskFull(1);
      assert.deepEqual(result.problems, []);
    },
  );

  it("the audit sink's Postgres stopped for 5 s under calls from 4 clients: calls go on, and no record is missing from it once it is back", async () => {
    const result = await sinkDownUnderLoad(5);
    assert.deepEqual(result.problems, []);
    assert.equal(result.recordsLost, 0);
  });

  it('200 calls at once across 8 clients and 2 servers: every answer reaches its own call', async () => {
    const result = await load(200);
    assert.deepEqual(result.problems, []);
    assert.equal(result.leftovers, 0);
  });
});
