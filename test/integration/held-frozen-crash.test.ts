import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { sweepOrphans } from '../../src/engine/docker/sweep.js';
import { KEEP_FROZEN_PREFIX } from '../../src/engine/cgroup-freezer.js';
import { silentLogger } from '../../src/util/logger.js';
import { setTimeout as delay } from 'node:timers/promises';
import { isProcessAlive } from '../../src/util/process-alive.js';
import {
  WAKER_IMAGE,
  awaitSandboxOfClass,
  cgroupFreezerState,
  containersOf,
  docker,
  ensureWakerImage,
  eventually,
} from './support/docker.js';
import { outcomeOf, runHintbox, sandboxFolder, writeProfile } from './support/hintbox-process.js';

/**
 * hintbox killed (SIGKILL) while a held sandbox is frozen by the cgroup freezer: nothing thaws
 * it (the gate, which kills the sandbox when hintbox's connection closes, is frozen too), so it
 * stays frozen, running nothing, until the sweep removes it. A cgroup v1 frozen task cannot
 * die until it is thawed: the engine's forced removal (what the sweep and a session's teardown
 * use) must still end it. The sweep here is the one `hintbox sweep` and every start run, asked
 * only about this test's dead hintbox (the engine is shared with other runs).
 */
integrationSuite('a frozen sandbox whose hintbox was killed', { timeout: 120_000, images: [ensureWakerImage] }, () => {
  // proves: HELD-FROZEN-KILLED
  it('stays frozen and writes nothing after hintbox is killed, and the sweep removes it', async (t) => {
    if (process.env.HINTBOX_FREEZER === 'gate') return t.skip('HINTBOX_FREEZER=gate: no cgroup freezer');
    const workspace = sandboxFolder();
    writeFileSync(path.join(workspace, 'victim.txt'), 'keep me\n');
    const file = writeProfile({
      name: `crash-frozen-${process.pid}`,
      server: { image: WAKER_IMAGE },
      mounts: [{ source: workspace, target: '/data' }],
      trust: 'trusted',
    });
    const log = path.join(workspace, 'timer.log');
    const size = () => (existsSync(log) ? statSync(log).size : 0);
    await using hintbox = await runHintbox(file);
    assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'arm', arguments: {} })).ok, true);
    // The waker runs only inside calls: call until it has written, so that "nothing more" below
    // compares a log that was growing, not 0 with 0.
    await eventually(
      async () => {
        assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'noop', arguments: {} })).ok, true);
        return size() > 0;
      },
      10_000,
      'the waker wrote during a call',
    );
    const writer = await awaitSandboxOfClass(hintbox.pid, 'rw-offline');
    const state = await cgroupFreezerState(writer);
    if (state === undefined) return t.skip('no cgroup freezer hintbox can write on this host');
    await eventually(async () => (await cgroupFreezerState(writer)) === 'frozen', 5000, 'frozen after the call');

    const pid = hintbox.pid;
    process.kill(pid, 'SIGKILL');
    await hintbox.exited;
    assert.equal(isProcessAlive(pid), false);
    const before = size();
    assert.ok(before > 0, 'the waker had written before hintbox was killed');
    await delay(1500);
    console.log(
      `hintbox killed: timer.log ${before} -> ${size()} bytes in 1.5 s; its sandbox ${await cgroupFreezerState(writer)}`,
    );
    assert.equal(size(), before, 'nothing of the sandbox ran after hintbox died');
    assert.equal(await cgroupFreezerState(writer), 'frozen', 'left frozen: nothing thawed it');

    const keep = `/sys/fs/cgroup/freezer/${KEEP_FROZEN_PREFIX}${pid}`;
    assert.ok(existsSync(keep), `the killed hintbox left its keep-frozen group ${keep}`);
    const d = (await docker()).docker;
    const started = Date.now();
    const swept = await sweepOrphans(d, (host, owner) => !(host === os.hostname() && owner === pid), silentLogger);
    console.log(`swept ${swept.length} container(s) in ${Date.now() - started} ms`);
    assert.ok(swept.includes(writer.id), 'the frozen sandbox swept');
    assert.equal((await d.listContainers({ all: true })).filter((c) => swept.includes(c.Id)).length, 0);
    assert.deepEqual(await containersOf(pid), [], 'nothing of the killed hintbox is left');
    assert.equal(existsSync(keep), false, 'its keep-frozen group swept');
    assert.equal(readFileSync(path.join(workspace, 'victim.txt'), 'utf8'), 'keep me\n');
  });
});
