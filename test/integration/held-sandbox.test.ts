import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { LABEL_CLASS } from '../../src/engine/sandbox-labels.js';
import { delay } from '../../src/util/delay.js';
import { containersOf, docker, ensureSneakImage, eventually, sandboxFrozen, SNEAK_IMAGE } from './support/docker.js';
import { hintboxCommand, outcomeOf, runHintbox, sandboxFolder, writeProfile } from './support/hintbox-process.js';

/**
 * A sandbox whose class can change something runs server code only while a call allowed into it
 * is in flight. The fixture (test/fixtures/sneak) attacks as soon as it runs: it deletes
 * /data/victim.txt, plants /data/planted.txt and appends to /data/ticks.log every 50 ms.
 */
integrationSuite(
  'sandboxes that can write are held until a call is allowed, frozen between calls',
  { timeout: 240_000, images: [ensureSneakImage] },
  () => {
    let n = 0;
    const sneak = (extra: Record<string, unknown>) => {
      const workspace = sandboxFolder();
      writeFileSync(path.join(workspace, 'victim.txt'), 'keep me\n');
      const name = `sneak-${process.pid}-${n++}`;
      const file = writeProfile({
        name,
        server: { image: SNEAK_IMAGE },
        mounts: [{ source: workspace, target: '/data' }],
        approval: { timeout: 5 },
        ...extra,
      });
      return { workspace, file };
    };
    const ticksIn = (workspace: string): number => {
      const log = path.join(workspace, 'ticks.log');
      return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0;
    };
    // A cold start brings its planned sandboxes up in the background: wait for it to be there.
    const sandboxOf = async (pid: number, klass: string) => {
      let id: string | undefined;
      await eventually(
        async () => {
          id = (await containersOf(pid)).find((c) => c.Labels[LABEL_CLASS] === klass)?.Id;
          return id !== undefined;
        },
        15_000,
        `hintbox's ${klass} sandbox`,
      );
      return (await docker()).docker.getContainer(id!);
    };

    // proves: HELD-UNTIL-CALLED
    it('runs no server code with a writable mount while every call into it is declined', async () => {
      const { workspace, file } = sneak({ trust: 'untrusted' });
      const approve = await hintboxCommand(['approve', file, '--all', '--yes']);
      assert.equal(approve.code, 0, approve.stderr);

      await using hintbox = await runHintbox(file, { confirmations: 'deny' });
      // The call waits until the server is verified (a cold start from the lock file): by then
      // every planned sandbox is up, the writing one held at its gate.
      const declined = await hintbox.client.callTool({ name: 'slow_write', arguments: { ms: 10 } });
      const writer = await sandboxOf(hintbox.pid, 'rw-offline');
      await eventually(
        async () => (await writer.inspect()).State.Running,
        15_000,
        'the writing sandbox held at its gate',
      );
      assert.equal(declined.isError, true, 'the person declined the call');
      assert.equal(hintbox.asked.length, 1, 'the call was put to the person');
      await delay(1500); // time enough for a released server to do its damage

      assert.equal(readFileSync(path.join(workspace, 'victim.txt'), 'utf8'), 'keep me\n', 'victim.txt is untouched');
      assert.equal(existsSync(path.join(workspace, 'planted.txt')), false, 'nothing was planted');
      assert.equal(existsSync(path.join(workspace, 'note.txt')), false, 'the declined call did not run');
      assert.equal(ticksIn(workspace), 0, 'the server never ran with the writable mount');
    });

    // proves: HELD-UNTIL-CALLED
    it('freezes a writing sandbox between calls: its server makes no progress without a call in flight', async () => {
      const { workspace, file } = sneak({ trust: 'trusted' });
      await using hintbox = await runHintbox(file);
      await delay(500);
      assert.equal(existsSync(path.join(workspace, 'victim.txt')), true, 'held until the first call');
      assert.equal(ticksIn(workspace), 0, 'held until the first call');

      const first = outcomeOf(await hintbox.client.callTool({ name: 'slow_write', arguments: { ms: 400 } }));
      assert.equal(first.ok, true);
      assert.ok(Number(first.value) > 0, 'the server ran during the call');
      const writer = await sandboxOf(hintbox.pid, 'rw-offline');
      await eventually(async () => (await sandboxFrozen(writer)) === true, 10_000, 'the sandbox frozen after its call');
      const atFreeze = ticksIn(workspace);
      await delay(1500);
      assert.equal(ticksIn(workspace), atFreeze, 'not one tick while no call was in flight');

      const second = outcomeOf(await hintbox.client.callTool({ name: 'slow_write', arguments: { ms: 400 } }));
      assert.equal(second.ok, true, 'the frozen sandbox was thawed for the next call');
      assert.ok(ticksIn(workspace) > atFreeze, 'and its server ran again during it');
      await eventually(
        async () => (await sandboxFrozen(writer)) === true,
        10_000,
        'frozen again after the second call',
      );
    });

    // proves: HELD-UNTIL-CALLED
    it('freezes every process a writing server started, in sessions of their own, forking, and waking the others', async () => {
      const { workspace, file } = sneak({ trust: 'trusted' });
      await using hintbox = await runHintbox(file);
      const lines = (name: string): number => {
        const log = path.join(workspace, name);
        return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0;
      };
      const counts = () => ({ ticks: ticksIn(workspace), escapee: lines('escapee.log'), forks: lines('forks.log') });
      assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'scatter', arguments: {} })).ok, true);
      const mem = readFileSync(path.join(workspace, 'gate-mem.txt'), 'utf8');
      assert.notEqual(mem, 'opened', "the server cannot open its gate's memory (/proc/1/mem) to write it");
      // Calls, until all of them are up and at work (they run only during calls).
      await eventually(
        async () => {
          await hintbox.client.callTool({ name: 'slow_write', arguments: { ms: 500 } });
          return counts().escapee > 0 && counts().forks > 0;
        },
        30_000,
        'the scattered processes at work during calls',
      );

      const writer = await sandboxOf(hintbox.pid, 'rw-offline');
      for (const round of [1, 2]) {
        await eventually(async () => (await sandboxFrozen(writer)) === true, 10_000, `frozen after call ${round}`);
        const atFreeze = counts();
        await delay(1500);
        assert.deepEqual(counts(), atFreeze, `not one line from any of them while no call was in flight (${round})`);
        assert.equal((await writer.inspect()).State.Running, true, 'the sandbox is still there, its gate alive');
        const next = outcomeOf(await hintbox.client.callTool({ name: 'slow_write', arguments: { ms: 300 } }));
        assert.equal(next.ok, true, 'thawed for the next call');
      }
    });

    it("lets a trusted server's writing sandbox run free only when its profile says hold: false", async () => {
      const { workspace, file } = sneak({ trust: 'trusted', hold: false });
      await using hintbox = await runHintbox(file);
      await eventually(async () => ticksIn(workspace) > 3, 10_000, 'the free server ticking with no call');
      assert.equal(
        existsSync(path.join(workspace, 'victim.txt')),
        false,
        'it could do its damage: hold: false trusts it',
      );
      assert.equal(hintbox.asked.length, 0);
    });
  },
);
