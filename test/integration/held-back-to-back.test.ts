import assert from 'node:assert/strict';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { delay } from '../../src/util/delay.js';
import { SNEAK_IMAGE, awaitSandboxOfClass, ensureSneakImage, eventually, sandboxFrozen } from './support/docker.js';
import { outcomeOf, runHintbox, sandboxFolder, writeProfile } from './support/hintbox-process.js';

/**
 * A held writer's thaw is sent ahead of its answer (the call goes with it), and its freeze as the
 * answer that ends the last call comes in. The fixture's `burst` attacks that turn: it keeps
 * working past its answer, from the instant it is sent — the server on every turn of its loop,
 * and a process started with the answer — appending to /data/burst.log. Called back to back, the
 * next call comes in while the last freeze may still be under way; once the calls are over the
 * sandbox must be frozen, and the log must not grow by one byte.
 */
integrationSuite(
  'a held writer called back to back runs only inside its calls',
  { timeout: 240_000, images: [ensureSneakImage] },
  () => {
    let n = 0;
    const sneak = (extra: Record<string, unknown>) => {
      const workspace = sandboxFolder();
      writeFileSync(path.join(workspace, 'victim.txt'), 'keep me\n');
      const name = `burst-${process.pid}-${n++}`;
      const file = writeProfile({
        name,
        server: { image: SNEAK_IMAGE },
        mounts: [{ source: workspace, target: '/data' }],
        ...extra,
      });
      return { workspace, file };
    };
    const bytesIn = (workspace: string): number => {
      const log = path.join(workspace, 'burst.log');
      return existsSync(log) ? statSync(log).size : 0;
    };
    const burstBackToBack = async (
      hintbox: Awaited<ReturnType<typeof runHintbox>>,
      workspace: string,
      calls: number,
    ) => {
      for (let i = 0; i < calls; i++) {
        assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'burst', arguments: {} })).ok, true);
      }
      assert.ok(bytesIn(workspace) > 0, 'the server worked during its calls');
    };

    // proves: HELD-UNTIL-CALLED
    it('leaves nothing running after back-to-back calls whose server keeps working past each answer', async () => {
      const { workspace, file } = sneak({ trust: 'trusted' });
      await using hintbox = await runHintbox(file);
      await burstBackToBack(hintbox, workspace, 10);
      const writer = await awaitSandboxOfClass(hintbox.pid, 'rw-offline');
      await eventually(async () => (await sandboxFrozen(writer)) === true, 10_000, 'frozen after the last call');
      const atFreeze = bytesIn(workspace);
      await delay(1500); // the process started with the last answer would write for 3 s
      assert.equal(bytesIn(workspace), atFreeze, 'not one byte while no call was in flight');
      assert.equal((await writer.inspect()).State.Running, true, 'the sandbox is still there, its gate alive');
      // And it runs again for the next call: the log grows during it.
      assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'burst', arguments: {} })).ok, true);
      assert.ok(bytesIn(workspace) > atFreeze, 'thawed for the next call');
    });

    it('the same attack writes between calls where the profile lets the server run free (hold: false)', async () => {
      const { workspace, file } = sneak({ trust: 'trusted', hold: false });
      await using hintbox = await runHintbox(file);
      await burstBackToBack(hintbox, workspace, 3);
      const afterCalls = bytesIn(workspace);
      await eventually(async () => bytesIn(workspace) > afterCalls, 3000, 'the log growing with no call in flight');
    });
  },
);
