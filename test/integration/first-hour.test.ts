import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { ensureTestImages } from './support/docker.js';
import { hintboxCommand, sandboxFolder } from './support/hintbox-process.js';
import { answerOnPage, openLink } from './support/console-page.js';
import { clientOfEntry, installGlobally, type EntryAsPrinted } from './support/global-install.js';
import { scratchFolder } from '../support/scratch-folder.js';

/**
 * README's "Using it from an MCP client", played as a new user would: hintbox installed
 * globally from its packed tarball, a gallery profile copied beside a project, `hintbox install`
 * run in the project, its printed entry pasted into a client that starts it from `/` (and from
 * `$HOME`) with nothing but the client's own environment and the entry's, the tools approved,
 * then a read and a write, each confirmed by the person through the client (elicitation).
 */
integrationSuite('the first hour', { timeout: 600_000, images: [ensureTestImages] }, (suite) => {
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

  // proves: CONSOLE-OUTLIVES-RUNS
  it('a client that exits after each call: denied with the console link, approved there after its run ended, the same call runs once in the next run', async () => {
    const install = await hintboxCommand(['install', profile, '--client', 'claude-desktop'], {}, { bin, cwd: project });
    assert.equal(install.code, 0, install.stderr);
    const printed = (JSON.parse(install.stdout) as { mcpServers: Record<string, EntryAsPrinted> }).mcpServers
      .filesystem!;
    const approve = await hintboxCommand(['approve', profile, '--all', '--yes'], {}, { bin, cwd: project });
    assert.equal(approve.code, 0, approve.stderr);
    // The person's console, started once in a terminal; the entry asks for the console.
    const state = scratchFolder('hintbox-first-hour-state-');
    const entry = {
      ...printed,
      args: [...printed.args, '--console'],
      env: { ...printed.env, HINTBOX_STATE_DIR: state },
    };
    const console = spawn(bin, ['console'], {
      env: { PATH: process.env.PATH ?? '', HOME: os.homedir(), HINTBOX_STATE_DIR: state },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    suite.defer(() => void console.kill('SIGTERM'));
    let consoleLog = '';
    await new Promise<void>((resolve, reject) => {
      console.stderr.on('data', (chunk: Buffer) => {
        consoleLog += chunk.toString('utf8');
        if (/Ctrl-C stops it/.test(consoleLog)) resolve();
      });
      console.once('exit', (code) => reject(new Error(`hintbox console exited ${code}: ${consoleLog}`)));
    });

    const call = {
      name: 'write_file',
      arguments: { path: '/workspace/exited.txt', content: 'approved on the console\n' },
    };
    const written = path.join(project, 'exited.txt');
    let link: string;
    {
      await using first = await clientOfEntry(entry, '/', false);
      const denied = await first.client.callTool(call);
      assert.equal(denied.isError, true, JSON.stringify(denied));
      link =
        /(http:\/\/127\.0\.0\.1:\d+\/approvals\/\S+)/
          .exec(JSON.stringify(denied.content))?.[1]
          ?.replace(/\\n.*$/, '') ?? '';
      assert.ok(link, JSON.stringify(denied.content));
    } // the client exits, and its run with it
    assert.equal(existsSync(written), false, 'nothing written before the person answered');

    // The person opens the link after that run is gone, and approves.
    const { cookie, page, csrf } = await openLink(link);
    assert.match(page, /write_file/);
    assert.equal((await answerOnPage(link, cookie, csrf!, 'approve')).status, 303);

    {
      await using second = await clientOfEntry(entry, '/', false);
      const ran = await second.client.callTool(call);
      assert.notEqual(ran.isError, true, `${JSON.stringify(ran)}\n${second.stderr()}`);
    }
    assert.equal(readFileSync(written, 'utf8'), 'approved on the console\n');
    rmSync(written);
    {
      // Once: the same call in a third run is asked again, and writes nothing.
      await using third = await clientOfEntry(entry, '/', false);
      const again = await third.client.callTool(call);
      assert.equal(again.isError, true, JSON.stringify(again));
    }
    assert.equal(existsSync(written), false, 'the answer ran the call once');
    const audit = await hintboxCommand(
      ['audit', '--server', 'filesystem', '--json'],
      { HINTBOX_STATE_DIR: state },
      { bin },
    );
    const decided = audit.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { decidedBy: string; arguments: { path?: string } })
      .filter((row) => row.arguments.path === '/workspace/exited.txt')
      .map((row) => row.decidedBy);
    assert.deepEqual(decided.sort(), ['console', 'no-elicitation', 'no-elicitation'], audit.stdout);
  });
});
