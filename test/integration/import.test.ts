import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { containersOf, docker, ensureTestImages, FIXTURES, LIAR_IMAGE, ownHintboxProcess } from './support/docker.js';
import {
  HINTBOX_BIN,
  hintboxCommand,
  outcomeOf,
  runHintbox,
  STATE_DIR,
  writeProfile,
} from './support/hintbox-process.js';
import { scratchFolder } from '../support/scratch-folder.js';

/** A literal key in the client config: it must reach the server through hintbox, never a profile. */
const LITERAL_KEY = 'sk-live-literal-0123456789abcdef';

interface Entry {
  command: string;
  args: string[];
  env?: Record<string, string>;
}

/**
 * `hintbox import` of a Claude Desktop config with three servers, one of each kind: npm, PyPI
 * (from a local folder of wheels, as a private index), and an image run with `--network host`.
 * Each imported profile plans, is approved and answers a real call under `hintbox run`; the
 * rewritten config starts hintbox for a real MCP client.
 */
integrationSuite('hintbox import', { timeout: 900_000, images: [ensureTestImages] }, () => {
  let folder: string;
  let configFile: string;
  let original: string;
  let pip: Record<string, string>;
  before(async () => {
    const wheels = scratchFolder('hintbox-wheels-');
    execFileSync('python3', [path.join(FIXTURES, 'pynotes', 'make_wheels.py'), wheels]);
    pip = { PIP_NO_INDEX: '1', PIP_FIND_LINKS: wheels };
    folder = scratchFolder('hintbox-import-');
    configFile = path.join(folder, 'claude_desktop_config.json');
    const config: { mcpServers: Record<string, Entry> } = {
      mcpServers: {
        memory: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory@2026.8.31'] },
        // hintbox installs the wheels on the host: the client passes pip's settings to it.
        pynotes: { command: 'uvx', args: ['pynotes@1.0.0'], env: { ...pip, PYNOTES_FILE: '/tmp/note.txt' } },
        liar: {
          command: 'docker',
          args: ['run', '-i', '--rm', '--network', 'host', '-e', 'LIAR_API_KEY', LIAR_IMAGE],
          env: { LIAR_API_KEY: LITERAL_KEY },
        },
        script: { command: 'node', args: ['/opt/servers/weather.js'] },
      },
    };
    original = `${JSON.stringify(config, null, 2)}\n`;
    writeFileSync(configFile, original);
  });

  const profileOf = (name: string): string => path.join(folder, 'hintbox', `${name}.yaml`);

  it('writes one profile per server it can map, skips the script, and keeps secrets out', async () => {
    const run = await hintboxCommand(['import', configFile]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^Claude Desktop config: /);
    assert.match(run.stdout, /skipped script: write its profile by hand: "node" is not npx/);
    for (const name of ['memory', 'pynotes', 'liar'])
      assert.match(run.stdout, new RegExp(`wrote ${profileOf(name)} \\(${name}: `));
    assert.match(
      run.stdout,
      new RegExp(`hintbox approve ${profileOf('liar')} --all && hintbox plan ${profileOf('liar')}`),
    );
    const liar = readFileSync(profileOf('liar'), 'utf8');
    assert.ok(!liar.includes(LITERAL_KEY), 'the literal key is not in the profile');
    assert.match(liar, /LIAR_API_KEY: \$\{LIAR_API_KEY\}/);
    assert.match(liar.replace(/\n# +/g, ' '), /dropped, .*: --network host\./);
    assert.match(readFileSync(profileOf('pynotes'), 'utf8'), /pypi: pynotes==1\.0\.0\n {2}bin: pynotes\n/);

    // Imported again unchanged: the profiles are what import writes, left as they are (edited ones: import-safety).
    const before = readFileSync(profileOf('liar'), 'utf8');
    const again = await hintboxCommand(['import', configFile]);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /unchanged .*liar\.yaml/);
    assert.equal(readFileSync(profileOf('liar'), 'utf8'), before);
  });

  // proves: IMPORT-UNTRUSTED
  it('each profile plans and answers a real call under hintbox run; the image runs without network', async () => {
    const env = { ...pip, PYNOTES_FILE: '/tmp/note.txt', LIAR_API_KEY: LITERAL_KEY };
    for (const name of ['memory', 'pynotes', 'liar']) {
      const approve = await hintboxCommand(['approve', profileOf(name), '--all', '--yes'], env);
      assert.equal(approve.code, 0, `${name}: ${approve.stderr}`);
      const plan = await hintboxCommand(['plan', profileOf(name)], env);
      assert.equal(plan.code, 0, `${name}: ${plan.stderr}`);
      assert.match(plan.stdout, /^TOOL /m);
    }

    await using memory = await runHintbox(profileOf('memory'), { env });
    const graph = await memory.client.callTool({ name: 'read_graph', arguments: {} });
    assert.notEqual(graph.isError, true, JSON.stringify(graph));
    assert.match(JSON.stringify(graph.content), /entities/);

    await using pynotes = await runHintbox(profileOf('pynotes'), { env });
    const written = await pynotes.client.callTool({ name: 'write_note', arguments: { text: 'imported' } });
    assert.deepEqual(written.content, [{ type: 'text', text: '[pynotes] written' }], JSON.stringify(written));

    await using liar = await runHintbox(profileOf('liar'), { env });
    const identity = outcomeOf(await liar.client.callTool({ name: 'identity', arguments: {} }));
    assert.equal(identity.ok, true, JSON.stringify(identity));
    const sandboxes = await containersOf(liar.pid, false);
    assert.ok(sandboxes.length > 0, 'the liar runs in a sandbox');
    const { docker: d } = await docker();
    for (const sandbox of sandboxes) {
      const info = await d.getContainer(sandbox.Id).inspect();
      assert.equal(info.HostConfig.NetworkMode, 'none', 'the dropped --network host did not survive');
    }
  });

  it('--rewrite: the backup is the original byte for byte; the entries run hintbox; a real client lists the tools', async () => {
    const run = await hintboxCommand(['import', configFile, '--rewrite', '--force']);
    assert.equal(run.code, 0, run.stderr);
    const backup = `${configFile}.hintbox-backup`;
    assert.match(
      run.stdout,
      new RegExp(`rewrote ${configFile}: memory, pynotes, liar now run hintbox \\(the original: ${backup}\\)`),
    );
    assert.equal(readFileSync(backup, 'utf8'), original, 'byte-identical backup');
    const rewritten = JSON.parse(readFileSync(configFile, 'utf8')) as { mcpServers: Record<string, Entry> };
    const bin = realpathSync(HINTBOX_BIN);
    for (const name of ['memory', 'pynotes', 'liar']) {
      const entry = rewritten.mcpServers[name]!;
      assert.equal(entry.command, bin);
      assert.deepEqual(entry.args, ['run', profileOf(name)]);
      assert.ok(path.isAbsolute(entry.args[1]!));
    }
    assert.deepEqual(rewritten.mcpServers.liar?.env, { LIAR_API_KEY: LITERAL_KEY }, 'the original env is kept');
    assert.deepEqual(rewritten.mcpServers.script, { command: 'node', args: ['/opt/servers/weather.js'] });

    // The client starts what the entry says (its own environment besides: the SDK's defaults, and this test's state folder).
    const entry = rewritten.mcpServers.liar;
    const transport = new StdioClientTransport({
      command: entry.command,
      args: entry.args,
      env: { ...entry.env, HINTBOX_STATE_DIR: STATE_DIR },
      stderr: 'pipe',
    });
    const client = new Client({ name: 'rewritten-config', version: '1.0.0' });
    await client.connect(transport);
    ownHintboxProcess(transport.pid ?? undefined);
    try {
      const { tools } = await client.listTools();
      assert.ok(
        tools.some((t) => t.name === 'identity'),
        tools.map((t) => t.name).join(', '),
      );
    } finally {
      await client.close();
    }

    const twice = await hintboxCommand(['import', configFile, '--rewrite', '--force']);
    assert.equal(twice.code, 0, `a rewritten config has nothing left to import: ${twice.stderr}`);
    assert.match(twice.stdout, /nothing left to import/);
    assert.match(twice.stdout, /skipped liar: it already runs hintbox/);
    assert.equal(readFileSync(backup, 'utf8'), original, 'the first backup is never overwritten');
  });

  it('refuses bad input with exit 2 and writes nothing: not a config, a profile the loader refuses', async () => {
    const dir = scratchFolder('hintbox-import-bad-');
    const notConfig = path.join(dir, 'settings.json');
    writeFileSync(notConfig, JSON.stringify({ theme: 'dark' }));
    const wrong = await hintboxCommand(['import', notConfig]);
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /neither a client config .* nor an MCP registry server\.json/);
    assert.equal(wrong.stderr.trim().split('\n').length, 1, 'one line');

    // One good server and one whose host path does not exist: the loader refuses the second, so neither is written.
    const config = path.join(dir, 'mcp.json');
    writeFileSync(
      config,
      JSON.stringify({
        mcpServers: {
          good: { command: 'npx', args: ['-y', 'acme-mcp@1.0.0'] },
          files: {
            command: 'npx',
            args: ['-y', '@modelcontextprotocol/server-filesystem@2026.8.31', path.join(dir, 'gone')],
          },
        },
      }),
    );
    const refused = await hintboxCommand(['import', config]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /files\.yaml: mounts\[0\]\.source: /);
    assert.throws(() => readFileSync(path.join(dir, 'hintbox', 'good.yaml')), /ENOENT/, 'nothing half written');

    // A registry list (the API's answer, saved): a name it does not list is one line naming the close ones.
    const list = path.join(dir, 'registry-list.json');
    writeFileSync(list, readFileSync(path.join(FIXTURES, 'import', 'registry-list.json')));
    const missing = await hintboxCommand(['import', list, '--server', 'io.github.modelcontextprotocol/filesytem']);
    assert.equal(missing.code, 2, missing.stderr);
    assert.match(missing.stderr, /lists no server named .*close: io\.github\.modelcontextprotocol\/filesystem/);
    assert.equal(missing.stderr.trim().split('\n').length, 1, 'one line');
    const picked = await hintboxCommand(['import', list, '--server', 'io.github.modelcontextprotocol/memory']);
    assert.equal(picked.code, 0, picked.stderr);
    assert.match(
      readFileSync(path.join(dir, 'hintbox', 'memory.yaml'), 'utf8'),
      /npm: "?@modelcontextprotocol\/server-memory@2025\.9\.25/,
    );
    assert.deepEqual(readdirSync(path.join(dir, 'hintbox')), ['memory.yaml'], 'only the picked server');
  });

  // proves: IMAGE-DIGEST
  it('a digest-pinned image that the engine cannot show with that digest is refused, not run', async () => {
    const { docker: d } = await docker();
    const id = (await d.getImage(LIAR_IMAGE).inspect()).Id;
    const profile = writeProfile({ name: 'pinned', server: { image: `hintbox-test/liar@${id}` } });
    const plan = await hintboxCommand(['plan', profile]);
    assert.equal(plan.code, 1, plan.stderr);
    assert.match(plan.stderr, /not present with that digest and cannot be pulled/);
  });
});
