import assert from 'node:assert/strict';
import { chownSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { stringify } from 'yaml';
import { ensureTestImages, FILESYSTEM_IMAGE } from './support/docker.js';
import { hintboxCommand, hintboxTestEnv } from './support/hintbox-process.js';
import { clientOfEntry, installGlobally, type EntryAsPrinted } from './support/global-install.js';
import { scratchFolder } from '../support/scratch-folder.js';

/**
 * hintbox as a user installs it: packed, installed globally into a prefix of its own, and run by
 * an MCP client from a folder that has nothing to do with the profile, through the client entry
 * that `hintbox install` prints.
 */
integrationSuite('a global install', { timeout: 600_000, images: [ensureTestImages] }, () => {
  let bin: string;
  before(async () => {
    bin = await installGlobally();
  });

  it('runs a profile by its absolute path from any folder; its paths resolve against the profile', async () => {
    // The profile's folder, a workspace beside it (named relative to the profile), and a folder to start in.
    const project = scratchFolder('hintbox-project-');
    const data = path.join(project, 'data');
    mkdirSync(data);
    writeFileSync(path.join(data, 'hello.txt'), 'from the project\n');
    if (process.getuid?.() === 0) chownSync(data, 10001, 10001);
    mkdirSync(path.join(project, 'profiles'));
    const profile = path.join(project, 'profiles', 'files.yaml');
    writeFileSync(
      profile,
      stringify({
        name: 'files',
        server: { image: FILESYSTEM_IMAGE, args: ['/workspace'] },
        mounts: [{ source: '../data', target: '/workspace' }],
      }),
    );
    const elsewhere = scratchFolder('hintbox-elsewhere-');

    const install = await hintboxCommand(['install', profile, '--client', 'cursor'], {}, { bin, cwd: elsewhere });
    assert.equal(install.code, 0, install.stderr);
    assert.match(install.stderr, /files: \d+ tool\(s\) listed: 0 approved/);
    assert.match(install.stderr, new RegExp(`next: hintbox approve ${profile} --all`));
    const entry = (JSON.parse(install.stdout) as { mcpServers: Record<string, EntryAsPrinted> }).mcpServers.files!;
    assert.ok(entry.command.startsWith(path.dirname(path.dirname(bin))), `the installed hintbox: ${entry.command}`);
    assert.deepEqual(entry.args, ['run', profile]);

    const approve = await hintboxCommand(['approve', profile, '--all', '--yes'], {}, { bin, cwd: elsewhere });
    assert.equal(approve.code, 0, approve.stderr);

    // A client that starts the entry as printed, in another folder (the test's state folder is in its env).
    assert.equal(entry.env?.HINTBOX_STATE_DIR, hintboxTestEnv().HINTBOX_STATE_DIR);
    await using started = await clientOfEntry(entry, elsewhere);
    const read = await started.client.callTool({ name: 'read_text_file', arguments: { path: '/workspace/hello.txt' } });
    assert.deepEqual(read.content, [{ type: 'text', text: 'from the project\n' }], started.stderr());
  });
});
