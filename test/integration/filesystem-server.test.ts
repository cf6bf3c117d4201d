import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { LABEL_CLASS } from '../../src/sandbox/container-spec.js';
import { containersOf, docker, ensureTestImages, eventually, REPO, assertNoLeftovers } from './support/docker.js';
import { hintboxCommand, runHintbox, sandboxFolder } from './support/hintbox-process.js';

const PROFILE = path.join(REPO, 'profiles', 'filesystem.yaml');

/** The real @modelcontextprotocol/server-filesystem from npm, under `hintbox run`. */
describe('the filesystem reference server under hintbox run', { timeout: 240_000 }, () => {
  after(assertNoLeftovers);
  before(ensureTestImages);

  it('reads through its read-only sandbox, writes through its read-write one, and cleans up', async () => {
    const workspace = sandboxFolder();
    writeFileSync(path.join(workspace, 'notes.txt'), 'from the host\n');
    // An untrusted server: its tools are served only once approved, and every call is confirmed.
    const approve = await hintboxCommand(['approve', PROFILE, '--all'], { WORKSPACE: workspace });
    assert.equal(approve.code, 0, approve.stderr);
    const hintbox = await runHintbox(PROFILE, { WORKSPACE: workspace });
    const pid = hintbox.pid;
    try {
      const { tools } = await hintbox.client.listTools();
      assert.equal(tools.length, 14);
      const readTool = tools.find((t) => t.name === 'read_text_file');
      assert.deepEqual(readTool?.annotations, { readOnlyHint: true, openWorldHint: false }, 'annotations pass through');

      const read = await hintbox.client.callTool({
        name: 'read_text_file',
        arguments: { path: '/workspace/notes.txt' },
      });
      assert.deepEqual((read.content as { text: string }[])[0]?.text, 'from the host\n');

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
      assert.deepEqual(
        ro.Mounts.map((m) => [m.Destination, m.RW]),
        [['/workspace', false]],
      );
      const rw = await d.getContainer(byClass.get('rw-offline') as string).inspect();
      assert.equal(rw.HostConfig.NetworkMode, 'none');
      assert.deepEqual(
        rw.Mounts.map((m) => [m.Destination, m.RW]),
        [['/workspace', true]],
      );
    } finally {
      await hintbox.client.close();
      await hintbox.exited;
    }
    await eventually(async () => (await containersOf(pid)).length === 0, 15_000, 'no containers after disconnect');
  });
});
