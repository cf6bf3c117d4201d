import assert from 'node:assert/strict';
import { chownSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { LABEL_CLASS } from '../../src/engine/sandbox-labels.js';
import { parse } from 'yaml';
import { containersOf, docker, ensureTestImages, eventually, FILESYSTEM_IMAGE } from './support/docker.js';
import {
  copyOfShippedProfile,
  hintboxCommand,
  runHintbox,
  sandboxFolder,
  STATE_DIR,
  writeProfile,
} from './support/hintbox-process.js';
import { scratchFolder } from '../support/scratch-folder.js';

/** A copy: approving it writes the lock file beside the copy, not into the repository. */
const PROFILE = copyOfShippedProfile('filesystem');

/** The real @modelcontextprotocol/server-filesystem from npm, under `hintbox run`. */
integrationSuite(
  'the filesystem reference server under hintbox run',
  { timeout: 240_000, images: [ensureTestImages] },
  () => {
    // proves: EARLY-START
    it("starts the sandboxes its tools planned last time in parallel with discovery, and removes an early one this start's tools do not plan", async () => {
      const workspace = sandboxFolder();
      // A ceiling with network, and a kept tool list (as a tampered or stale file might say) with
      // an unannotated tool: it plans the ceiling's class, rw-online, which the real tools do not.
      const profile = writeProfile({
        ...(parse(readFileSync(PROFILE, 'utf8')) as Record<string, unknown>),
        server: { image: FILESYSTEM_IMAGE, args: ['/workspace'] },
        network: 'open',
      });
      const { docker: d } = await docker();
      const imageId = (await d.getImage(FILESYSTEM_IMAGE).inspect()).Id;
      const known = path.join(STATE_DIR, 'known-tools', 'filesystem.json');
      const classesOf = async (pid: number) =>
        (await containersOf(pid, false)).map((c) => c.Labels[LABEL_CLASS] ?? '').sort();

      // Nothing known of the image: the ceiling's class is guessed, held, and removed unreleased.
      rmSync(known, { force: true });
      const guessing = await runHintbox(profile, { env: { WORKSPACE: workspace } });
      try {
        await guessing.client.listTools();
        assert.match(guessing.stderr(), /starting rw-online early \(held at the gate until discovery answers; a guess/);
        assert.match(guessing.stderr(), /sandbox rw-online was started early but this start's tools do not plan it/);
        await eventually(
          async () => JSON.stringify(await classesOf(guessing.pid)) === '["ro-offline","rw-offline"]',
          10_000,
          'only the planned sandboxes',
        );
      } finally {
        await guessing.client.close();
        await guessing.exited;
      }

      mkdirSync(path.dirname(known), { recursive: true });
      writeFileSync(known, JSON.stringify({ imageId, tools: [{ name: 'planted' }] }));
      const first = await runHintbox(profile, { env: { WORKSPACE: workspace } });
      try {
        await first.client.listTools();
        assert.match(first.stderr(), /starting rw-online early/);
        assert.match(
          first.stderr(),
          /sandbox rw-online was started early but this start's tools do not plan it: removing it/,
        );
        await eventually(
          async () => JSON.stringify(await classesOf(first.pid)) === '["ro-offline","rw-offline"]',
          10_000,
          'only the planned sandboxes',
        );
        const kept = JSON.parse(readFileSync(known, 'utf8')) as { imageId: string; tools: { name: string }[] };
        assert.equal(kept.imageId, imageId);
        assert.equal(kept.tools.length, 14, 'the tools this start listed are kept for the next');
      } finally {
        await first.client.close();
        await first.exited;
      }

      const second = await runHintbox(profile, { env: { WORKSPACE: workspace } });
      try {
        await second.client.listTools();
        assert.match(second.stderr(), /starting rw-offline early \(held at the gate until discovery answers\)/);
        assert.doesNotMatch(second.stderr(), /removing it/);
        assert.deepEqual(await classesOf(second.pid), ['ro-offline', 'rw-offline']);
      } finally {
        await second.client.close();
        await second.exited;
      }
    });

    // proves: RO-MOUNTS
    it('reads through its read-only sandbox, writes through its read-write one, and cleans up', async () => {
      const workspace = sandboxFolder();
      writeFileSync(path.join(workspace, 'notes.txt'), 'from the host\n');
      // An untrusted server: its tools are served only once approved, and every call is confirmed.
      const approve = await hintboxCommand(['approve', PROFILE, '--all', '--yes'], { WORKSPACE: workspace });
      assert.equal(approve.code, 0, approve.stderr);
      const hintbox = await runHintbox(PROFILE, { env: { WORKSPACE: workspace } });
      const pid = hintbox.pid;
      try {
        // Answered from the lock file at once (a cold start): the approved definitions, with the
        // hints that hold in their sandboxes (all four written out; see advertised-hints.test.ts).
        const locked = (await hintbox.client.listTools()).tools;
        assert.equal(locked.length, 14);
        const held = { readOnlyHint: true, destructiveHint: true, idempotentHint: false, openWorldHint: false };
        assert.deepEqual(locked.find((t) => t.name === 'read_text_file')?.annotations, held, 'as locked, as held');

        const read = await hintbox.client.callTool({
          name: 'read_text_file',
          arguments: { path: '/workspace/notes.txt' },
        });
        assert.deepEqual((read.content as { text: string }[])[0]?.text, 'from the host\n');
        // The call waited until the server was verified: from then on, its tools as it sent them,
        // the hints as they hold (the same as from the lock file).
        const { tools } = await hintbox.client.listTools();
        assert.equal(tools.length, 14);
        const readTool = tools.find((t) => t.name === 'read_text_file');
        assert.deepEqual(readTool?.annotations, held, 'the hints that hold in its read-only, network-less sandbox');
        assert.equal(readTool?.title, 'Read Text File', 'the rest as the server sent it');

        const write = await hintbox.client.callTool({
          name: 'write_file',
          arguments: { path: '/workspace/out.txt', content: 'from the server\n' },
        });
        assert.notEqual(write.isError, true, JSON.stringify(write));
        assert.equal(readFileSync(path.join(workspace, 'out.txt'), 'utf8'), 'from the server\n');
        assert.equal(hintbox.asked.length, 2, 'both calls of the untrusted server were confirmed');
        assert.match(hintbox.asked[1]?.message ?? '', /irreversible[\s\S]*"content": "from the server\\n"/);

        await assert.rejects(
          hintbox.client.callTool({ name: 'no_such_tool', arguments: {} }),
          (error: unknown) => error instanceof McpError && error.code === ErrorCode.InvalidParams,
        );

        const { docker: d } = await docker();
        const byClass = new Map<string, string>();
        for (const c of await containersOf(pid, false)) byClass.set(c.Labels[LABEL_CLASS] ?? '', c.Id);
        assert.deepEqual([...byClass.keys()].sort(), ['ro-offline', 'rw-offline']);
        const ro = await d.getContainer(byClass.get('ro-offline') as string).inspect();
        assert.equal(ro.HostConfig.NetworkMode, 'none');
        // The workspace, and hintbox's gate and its socket folder (both always read-only).
        const mounts = (info: typeof ro): [string, boolean][] =>
          info.Mounts.map((m): [string, boolean] => [m.Destination, m.RW]).sort(([a], [b]) => a.localeCompare(b));
        assert.deepEqual(mounts(ro), [
          ['/run/hintbox/gate', false],
          ['/run/hintbox/io', false],
          ['/workspace', false],
        ]);
        const rw = await d.getContainer(byClass.get('rw-offline') as string).inspect();
        assert.equal(rw.HostConfig.NetworkMode, 'none');
        assert.deepEqual(mounts(rw), [
          ['/run/hintbox/gate', false],
          ['/run/hintbox/io', false],
          ['/workspace', true],
        ]);
      } finally {
        await hintbox.client.close();
        await hintbox.exited;
      }
      await eventually(async () => (await containersOf(pid)).length === 0, 15_000, 'no containers after disconnect');
    });

    it("runs its sandboxes, when hintbox is root, as the workspace's owner: what the server writes is theirs", async (t) => {
      if (process.getuid?.() !== 0) return t.skip('needs root: hintbox runs sandboxes as its own user otherwise');
      const workspace = scratchFolder('hintbox-owned-');
      chownSync(workspace, 1234, 1235);
      const approve = await hintboxCommand(['approve', PROFILE, '--all', '--yes'], { WORKSPACE: workspace });
      assert.equal(approve.code, 0, approve.stderr);
      const hintbox = await runHintbox(PROFILE, { env: { WORKSPACE: workspace } });
      try {
        const write = await hintbox.client.callTool({
          name: 'write_file',
          arguments: { path: '/workspace/theirs.txt', content: 'owned\n' },
        });
        assert.notEqual(write.isError, true, JSON.stringify(write));
        const written = statSync(path.join(workspace, 'theirs.txt'));
        assert.deepEqual(
          [written.uid, written.gid],
          [1234, 1235],
          'the file belongs to the workspace owner, not 10001',
        );
        const { docker: d } = await docker();
        for (const c of await containersOf(hintbox.pid, false)) {
          assert.equal((await d.getContainer(c.Id).inspect()).Config.User, '1234:1235', c.Labels[LABEL_CLASS]);
        }
      } finally {
        await hintbox[Symbol.asyncDispose]();
      }
    });
  },
);
