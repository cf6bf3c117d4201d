import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { LABEL_CLASS } from '../../src/engine/sandbox-labels.js';
import { delay } from '../../src/util/delay.js';
import {
  WAKER_IMAGE,
  awaitSandboxOfClass,
  cgroupFreezerState,
  containersOf,
  docker,
  ensureWakerImage,
  eventually,
} from './support/docker.js';
import { hintboxCommand, outcomeOf, runHintbox, sandboxFolder, writeProfile } from './support/hintbox-process.js';

/**
 * A held server that wakes itself from its freeze (the review's attack, test/fixtures/waker): a
 * process of it arms POSIX timers whose signal is SIGCONT. The kernel sends them while everything
 * is stopped, so no process of the sandbox has to run, and SIGCONT continues a stopped process.
 *
 * - The cgroup freezer (where hintbox can write it: root, cgroup v1 or v2) prevents it: a frozen
 *   task does not run whatever signal it gets, so the waker writes nothing between calls and its
 *   sandbox lives on.
 * - The gate's stop (HINTBOX_FREEZER=gate, and wherever the cgroup freezer cannot be had) cannot
 *   prevent it; the gate's watch while frozen bounds it: the first pass after the wake (every 10
 *   ms) sees a task that ran, kills the sandbox whole, and tells hintbox.
 */
integrationSuite(
  'a held server woken by the kernel does not run on',
  { timeout: 180_000, images: [ensureWakerImage] },
  () => {
    let n = 0;
    const waker = (extra: Record<string, unknown> = {}) => {
      const workspace = sandboxFolder();
      writeFileSync(path.join(workspace, 'victim.txt'), 'keep me\n');
      const name = `waker-${process.pid}-${n++}`;
      const file = writeProfile({
        name,
        server: { image: WAKER_IMAGE },
        mounts: [{ source: workspace, target: '/data' }],
        trust: 'trusted',
        ...extra,
      });
      const log = path.join(workspace, 'timer.log');
      const size = () => (existsSync(log) ? statSync(log).size : 0);
      return { workspace, name, file, size };
    };

    it('the waker writes with no call in flight where the profile lets the server run free (hold: false)', async () => {
      const { file, size } = waker({ hold: false });
      await using hintbox = await runHintbox(file);
      assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'arm', arguments: {} })).ok, true);
      await delay(500);
      const before = size();
      await delay(1000);
      const after = size();
      console.log(`hold: false: timer.log ${before} -> ${after} bytes in 1 s with no call in flight`);
      assert.ok(after > before, 'the attack runs where nothing holds it (the fixture works)');
    });

    // proves: HELD-WOKEN
    it('writes nothing while frozen by the cgroup freezer, over calls that re-arm it, and is not killed (nothing ran)', async (t) => {
      if (process.env.HINTBOX_FREEZER === 'gate') return t.skip('HINTBOX_FREEZER=gate: no cgroup freezer');
      const { workspace, file, size } = waker();
      await using hintbox = await runHintbox(file, { env: { HINTBOX_LOG_LEVEL: 'debug' } });
      assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'arm', arguments: {} })).ok, true);
      const writer = await awaitSandboxOfClass(hintbox.pid, 'rw-offline');
      const chosen = hintbox
        .stderr()
        .split('\n')
        .find((l) => l.includes('sandbox rw-offline: frozen between calls by'));
      if (chosen?.includes('by its gate')) return t.skip(`no cgroup freezer on this host: ${chosen}`);
      assert.match(String(chosen), /by the cgroup freezer \(v[12]\)/, hintbox.stderr());
      for (let round = 0; round < 3; round++) {
        await eventually(async () => (await cgroupFreezerState(writer)) === 'frozen', 5000, 'frozen after the call');
        const before = size();
        await delay(2000);
        const after = size();
        console.log(`round ${round}: timer.log ${before} -> ${after} bytes in 2 s frozen, no call in flight`);
        assert.equal(after, before, 'not one byte written while frozen');
        // A call thaws it (the waker runs and re-arms its timers), and its end freezes it again.
        assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'noop', arguments: {} })).ok, true);
      }
      assert.doesNotMatch(hintbox.stderr(), /ran while frozen/);
      assert.equal((await writer.inspect()).State.Running, true, 'its sandbox lives on: nothing ran to be caught');
      assert.equal(readFileSync(path.join(workspace, 'victim.txt'), 'utf8'), 'keep me\n');
    });

    // proves: HELD-WOKEN
    it('frozen by its gate (HINTBOX_FREEZER=gate): is killed within the watch period of its first wake; its writes stop, its sandbox is gone, hintbox says why', async () => {
      const { workspace, name, file, size } = waker();
      const log = path.join(workspace, 'timer.log');
      await using hintbox = await runHintbox(file, { env: { HINTBOX_FREEZER: 'gate' } });
      assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'arm', arguments: {} })).ok, true);
      const { id } = await awaitSandboxOfClass(hintbox.pid, 'rw-offline');
      // No call in flight from here on. The waker wakes (the very first freeze may flush a pending
      // SIGCONT and hold: then a call re-arms it, as the attack would).
      const woken = /ran while frozen: woken by a signal not from hintbox; its sandbox was killed/;
      for (let round = 0; round < 5 && !woken.test(hintbox.stderr()); round++) {
        const a = size();
        await delay(1000);
        if (woken.test(hintbox.stderr())) break;
        console.log(
          `round ${round}: timer.log ${a} -> ${size()} bytes in 1 s with no call in flight, not killed: one more call`,
        );
        const again = outcomeOf(await hintbox.client.callTool({ name: 'noop', arguments: {} }));
        if (!again.ok) break; // the sandbox was killed while the call went in
        await delay(200);
      }
      const line = hintbox
        .stderr()
        .split('\n')
        .find((l) => woken.test(l));
      assert.ok(line, `hintbox says the sandbox ran while frozen; its stderr:\n${hintbox.stderr()}`);
      assert.match(line, new RegExp(name), 'the line names the server');
      console.log(`hintbox: ${line}`);
      // Killed: over a whole second after, not one byte more into the writable mount.
      const before = size();
      await delay(1000);
      const after = size();
      console.log(`after the kill: timer.log ${before} -> ${after} bytes in 1 s`);
      assert.equal(after, before, 'nothing of the sandbox writes after the kill');
      // The waker ran at most about one watch period (10 ms, two 5 ms writes) per wake before the kill.
      const lines = readFileSync(log, 'utf8').split('\n').filter(Boolean).length;
      console.log(`timer.log holds ${lines} timestamps in all (the arming call's run included)`);
      const d = (await docker()).docker;
      await eventually(
        async () => !(await d.listContainers({ all: true })).some((c) => c.Id === id),
        15_000,
        'the woken sandbox removed',
      );
      assert.equal(readFileSync(path.join(workspace, 'victim.txt'), 'utf8'), 'keep me\n');
      // A broken hold is a hint violation: in the audit trail, and the server untrusted from then on
      // (the next call needs a person), in a fresh sandbox.
      const { code, stdout, stderr } = await hintboxCommand(['audit', '--server', name, '--events', '--all', '--json']);
      assert.equal(code, 0, stderr);
      const violation = stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { kind: string; type: string; fields: Record<string, unknown> })
        .find((e) => e.kind === 'event' && e.type === 'hint.violation');
      assert.match(String(violation?.fields.violation), /held until called: ran while frozen/);
      const asked = hintbox.asked.length;
      assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'noop', arguments: {} })).ok, true);
      assert.equal(hintbox.asked.length, asked + 1, 'the server lost its trust: the next call was confirmed');
      const fresh = (await containersOf(hintbox.pid)).find((c) => c.Labels[LABEL_CLASS] === 'rw-offline');
      assert.ok(fresh && fresh.Id !== id, 'the next call runs in a fresh sandbox');
    });
  },
);
