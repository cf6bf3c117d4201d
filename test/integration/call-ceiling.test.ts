import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { LABEL_CLASS } from '../../src/engine/sandbox-labels.js';
import { delay } from '../../src/util/delay.js';
import { containersOf, docker, ensureKeeperImage, eventually, KEEPER_IMAGE, sandboxFrozen } from './support/docker.js';
import { auditOf, runHintbox, sandboxFolder, writeProfile } from './support/hintbox-process.js';

const CEILING_S = 2;
/** Time beyond the ceiling the test allows: the freeze, the reply, a loaded machine. */
const TOLERANCE_MS = 1500;

/**
 * `timeouts.call` is a hard ceiling per call: a server that keeps a call alive with progress
 * notifications (test/fixtures/keeper's keep_busy: one every 100 ms, forever) cannot keep its
 * writing sandbox thawed past it. While the server runs it appends to /data/ticks.log every
 * 50 ms: ticks that stop are the proof that its code stopped running.
 */
integrationSuite(
  'a call past timeouts.call, kept alive by progress',
  { timeout: 180_000, images: [ensureKeeperImage] },
  () => {
    // proves: CALL-CEILING
    it('ends a call at timeouts.call however long its server sends progress: cancelled, an error for the client, audited as a timeout, its sandbox no longer running', async (t) => {
      const workspace = sandboxFolder();
      const name = `keeper-ceiling-${process.pid}`;
      const file = writeProfile({
        name,
        server: { image: KEEPER_IMAGE },
        trust: 'trusted',
        mounts: [{ source: workspace, target: '/data' }],
        timeouts: { call: CEILING_S },
      });
      const ticks = (): number => {
        const log = path.join(workspace, 'ticks.log');
        return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0;
      };
      await using hintbox = await runHintbox(file);
      let progress = 0;
      const asked = Date.now(); // its confirmation's dry run (a preview) runs keep_busy until the preview's own limit first
      const call = hintbox.client
        .callTool({ name: 'keep_busy', arguments: {} }, undefined, {
          timeout: 60_000,
          resetTimeoutOnProgress: true,
          onprogress: () => void progress++,
        })
        .then(
          (result) => ({ result, at: Date.now() }),
          (error: Error) => ({ error, at: Date.now() }),
        );
      await eventually(async () => progress > 0, 15_000, 'the first progress notification');
      const forwarded = Date.now(); // at most this late: its progress came after it was forwarded
      const ended = await Promise.race([call, delay(CEILING_S * 1000 + 4000).then(() => undefined)]);

      const writer = (await containersOf(hintbox.pid)).find((c) => c.Labels[LABEL_CLASS] === 'rw-offline');
      /** The writing sandbox's state now; undefined once it is removed. */
      const writerState = async () => {
        const { docker: d } = await docker();
        return (
          writer &&
          (
            await d
              .getContainer(writer.Id)
              .inspect()
              .catch(() => undefined)
          )?.State
        );
      };
      const state = await writerState();
      const shown = state ? `Running ${state.Running}` : 'removed';
      assert.ok(
        ended,
        `the call was still running ${Date.now() - asked} ms after it was made (timeouts.call: ${CEILING_S} s), ` +
          `after ${progress} progress notifications; its sandbox: ${shown}; ticks so far ${ticks()}`,
      );
      t.diagnostic(
        `first progress ${forwarded - asked} ms after the call was made; ended ${ended.at - forwarded} ms after it, ` +
          `${progress} progress notifications; sandbox then: ${shown}`,
      );
      assert.ok(progress >= 5, `the server kept the call alive with progress (${progress})`);
      assert.ok(
        ended.at - forwarded <= CEILING_S * 1000 + TOLERANCE_MS,
        `ended ${ended.at - forwarded} ms after its first progress`,
      );
      assert.ok('error' in ended, 'the client gets an error');
      assert.ok(ended.error instanceof McpError && ended.error.code === ErrorCode.RequestTimeout, String(ended.error));
      assert.match(ended.error.message, /gave no answer within 2 s \(timeouts\.call, which progress does not extend/);

      // Its sandbox no longer runs server code: frozen again or stopped, and the ticks stop.
      await eventually(
        async () => {
          const now = await writerState();
          if (!now?.Running) return true;
          return (await sandboxFrozen((await docker()).docker.getContainer(writer!.Id))) !== false;
        },
        10_000,
        'the writing sandbox frozen or stopped',
      );
      const atEnd = ticks();
      await delay(1500);
      assert.equal(ticks(), atEnd, 'not one tick after the ceiling');

      const [record] = await auditOf<{ tool: string; outcome: string | null; detail: string | null }>(name);
      assert.equal(record?.tool, 'keep_busy');
      assert.equal(record.outcome, 'error');
      assert.match(record.detail ?? '', /^timeout: no answer within 2 s \(timeouts\.call\)/);
    });
  },
);
