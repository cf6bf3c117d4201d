import assert from 'node:assert/strict';
import { copyFileSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { ensureTestImages } from './support/docker.js';
import { hintboxCommand, sandboxFolder } from './support/hintbox-process.js';
import { clientOfEntry, installGlobally, type EntryAsPrinted } from './support/global-install.js';
import { scratchFolder } from '../support/scratch-folder.js';

/**
 * README's "Using it from an MCP client", played as a new user would: hintbox installed
 * globally from its packed tarball, a gallery profile copied beside a project, `hintbox install`
 * run in the project, its printed entry pasted into a client that starts it from `/` (and from
 * `$HOME`) with nothing but the client's own environment and the entry's, the tools approved,
 * then a read and a write, each confirmed by the person through the client (elicitation).
 */
integrationSuite('the first hour', { timeout: 600_000, images: [ensureTestImages] }, () => {
  let bin: string;
  let profile: string;
  let project: string;
  before(async () => {
    bin = await installGlobally();
    // The gallery as installed, copied to a folder of the user's: nothing of hintbox's beside it.
    const gallery = path.join(path.dirname(path.dirname(bin)), 'lib', 'node_modules', 'hintbox', 'profiles');
    profile = path.join(scratchFolder('hintbox-mcp-'), 'filesystem.yaml');
    copyFileSync(path.join(gallery, 'filesystem.yaml'), profile);
    project = realpathSync(sandboxFolder('hintbox-project-'));
    writeFileSync(path.join(project, 'hello.txt'), 'hello from the project\n');
  });

  it('an entry without the env install saw does not start from / (why the entry carries WORKSPACE)', async () => {
    // What install printed before: bin and profile only. A client starts it in its own folder.
    const bare = await hintboxCommand(['run', profile], {}, { bin, cwd: '/' });
    assert.equal(bare.code, 2, bare.stderr);
    assert.match(bare.stderr, /mounts\[0\]\.source: .*(docker|Docker)/);
  });

  it('install prints an entry that a client starts from / and from $HOME: approved, a read and a write confirmed', async () => {
    const install = await hintboxCommand(['install', profile, '--client', 'claude-desktop'], {}, { bin, cwd: project });
    assert.equal(install.code, 0, install.stderr);
    const entry = (JSON.parse(install.stdout) as { mcpServers: Record<string, EntryAsPrinted> }).mcpServers.filesystem!;
    assert.equal(entry.command, bin, 'the installed bin, by the path it was started as');
    assert.deepEqual(entry.args, ['run', profile]);
    assert.equal(entry.env?.WORKSPACE, project, 'the folder install ran in, pinned');

    // `approve --all --yes` once approving is a review (another branch): the lead switches the flag at merge.
    const approve = await hintboxCommand(['approve', profile, '--all', '--yes'], {}, { bin, cwd: project });
    assert.equal(approve.code, 0, approve.stderr);

    {
      await using fromRoot = await clientOfEntry(entry, '/');
      const { tools } = await fromRoot.client.listTools();
      assert.ok(
        tools.some((t) => t.name === 'write_file'),
        fromRoot.stderr(),
      );
      const read = await fromRoot.client.callTool({
        name: 'read_text_file',
        arguments: { path: '/workspace/hello.txt' },
      });
      assert.deepEqual(read.content, [{ type: 'text', text: 'hello from the project\n' }], fromRoot.stderr());
      const write = await fromRoot.client.callTool({
        name: 'write_file',
        arguments: { path: '/workspace/notes.txt', content: 'written through hintbox\n' },
      });
      assert.notEqual(write.isError, true, JSON.stringify(write));
      assert.equal(readFileSync(path.join(project, 'notes.txt'), 'utf8'), 'written through hintbox\n');
      // An untrusted server: the read was confirmed by the person too, not only the write.
      assert.equal(fromRoot.asked.length, 2, JSON.stringify(fromRoot.asked));
    }
    {
      await using fromHome = await clientOfEntry(entry, os.homedir());
      const read = await fromHome.client.callTool({
        name: 'read_text_file',
        arguments: { path: '/workspace/notes.txt' },
      });
      assert.deepEqual(read.content, [{ type: 'text', text: 'written through hintbox\n' }], fromHome.stderr());
    }
  });
});
