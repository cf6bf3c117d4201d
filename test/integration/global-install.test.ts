import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chownSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { stringify } from 'yaml';
import { ensureTestImages, FILESYSTEM_IMAGE, ownHintboxProcess, REPO } from './support/docker.js';
import { hintboxCommand, hintboxTestEnv } from './support/hintbox-process.js';
import { scratchFolder } from '../support/scratch-folder.js';

const run = promisify(execFile);

/**
 * hintbox as a user installs it: packed, installed globally into a prefix of its own, and run by
 * an MCP client from a folder that has nothing to do with the profile, through the client entry
 * that `hintbox install` prints.
 */
integrationSuite('a global install', { timeout: 600_000, images: [ensureTestImages] }, () => {
  let bin: string;
  before(async () => {
    // `npm test` built dist/ first; the tarball is what `npm publish` would upload.
    const packed = scratchFolder('hintbox-pack-');
    await run('npm', ['pack', '--ignore-scripts', '--pack-destination', packed], { cwd: REPO });
    const tarball = path.join(
      packed,
      readdirSync(packed).find((f) => f.endsWith('.tgz'))!,
    );
    const prefix = scratchFolder('hintbox-global-');
    await run(
      'npm',
      ['install', '--global', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', tarball],
      { cwd: packed },
    );
    bin = path.join(prefix, 'bin', 'hintbox');
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

    const install = await hintboxCommand(['install', profile], {}, { bin, cwd: elsewhere });
    assert.equal(install.code, 0, install.stderr);
    assert.match(install.stdout, /files: \d+ tool\(s\) listed: 0 approved/);
    assert.match(install.stdout, new RegExp(`next: hintbox approve ${profile} --all`));
    const entry = JSON.parse(/^MCP client config: (.*)$/m.exec(install.stdout)?.[1] ?? 'null') as {
      command: string;
      args: string[];
    };
    assert.ok(entry.command.startsWith(path.dirname(path.dirname(bin))), `the installed hintbox: ${entry.command}`);
    assert.deepEqual(entry.args, ['run', profile]);

    const approve = await hintboxCommand(['approve', profile, '--all'], {}, { bin, cwd: elsewhere });
    assert.equal(approve.code, 0, approve.stderr);

    // A client that starts the entry as printed, in another folder.
    const transport = new StdioClientTransport({ ...entry, env: hintboxTestEnv(), cwd: elsewhere, stderr: 'pipe' });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const client = new Client({ name: 'hintbox-test', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    client.setRequestHandler(ElicitRequestSchema, () => ({ action: 'accept', content: { approve: true } }));
    await client.connect(transport).catch((error: Error) => {
      throw new Error(`${error.message}\n${stderr}`);
    });
    ownHintboxProcess(transport.pid ?? undefined);
    try {
      const read = await client.callTool({ name: 'read_text_file', arguments: { path: '/workspace/hello.txt' } });
      assert.deepEqual(read.content, [{ type: 'text', text: 'from the project\n' }], stderr);
    } finally {
      await client.close();
    }
  });
});
