import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { allHintboxContainers, ensureTestImages, LIAR_IMAGE } from './support/docker.js';
import { hintboxCommand } from './support/hintbox-process.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { pinHash, type PinnedDefinition } from '../../src/policy/tool-pin.js';

/** An image nobody built: its entry's profile loads, but no sandbox can list its tools. */
const MISSING_IMAGE = 'hintbox-test/no-such-server:1';

/**
 * `hintbox import --rewrite` rewrites an entry only once its profile is shown to work: it loads,
 * its image is there, its tools are listed in a read-only sandbox, and they are the approved ones.
 * The shipped CLI on a real engine, as the operator runs it.
 */
integrationSuite('import --rewrite checks each entry first', { timeout: 300_000, images: [ensureTestImages] }, () => {
  // proves: IMPORT-REWRITE-WORKS
  it('--rewrite rewrites the approved entry that lists, leaves one that cannot list byte-identical, exit 1 naming it, no container left', async () => {
    const folder = scratchFolder('hintbox-import-rewrite-');
    const config = path.join(folder, 'claude_desktop_config.json');
    const broken = { command: 'docker', args: ['run', '-i', '--rm', MISSING_IMAGE] };
    const text = `${JSON.stringify(
      { mcpServers: { liar: { command: 'docker', args: ['run', '-i', '--rm', LIAR_IMAGE] }, broken } },
      null,
      2,
    )}\n`;
    writeFileSync(config, text);
    const imported = await hintboxCommand(['import', config]);
    assert.equal(imported.code, 0, imported.stderr);
    const liarProfile = path.join(folder, 'hintbox', 'liar.yaml');
    const brokenProfile = path.join(folder, 'hintbox', 'broken.yaml');
    const approved = await hintboxCommand(['approve', liarProfile, '--all', '--yes']);
    assert.equal(approved.code, 0, approved.stderr);
    const before = await allHintboxContainers();

    const run = await hintboxCommand(['import', config, '--rewrite']);
    assert.equal(run.code, 1, `${run.stdout}\n${run.stderr}`);
    assert.match(run.stdout, /checking liar: /);
    assert.match(run.stdout, /rewrote .*claude_desktop_config\.json: liar now runs? hintbox/);
    assert.match(
      run.stdout,
      new RegExp(
        `left broken as it was: its tools cannot be listed: .*${MISSING_IMAGE}.*; see: hintbox plan ${brokenProfile}`,
      ),
    );
    assert.match(run.stdout, /1 entry left as it was/);
    const after = JSON.parse(readFileSync(config, 'utf8')) as { mcpServers: Record<string, { args: string[] }> };
    assert.deepEqual(after.mcpServers.liar?.args.slice(-2), ['run', liarProfile], 'the approved entry runs hintbox');
    assert.deepEqual(after.mcpServers.broken, broken, 'the broken entry is as it was');
    // Byte-identical: the entry's text in the config is the original's, character for character.
    const entryText = (whole: string): string => whole.slice(whole.indexOf('"broken"'), whole.lastIndexOf(']') + 1);
    assert.equal(entryText(readFileSync(config, 'utf8')), entryText(text));
    assert.equal(readFileSync(`${config}.hintbox-backup`, 'utf8'), text, 'the original is kept');
    assert.deepEqual(
      (await allHintboxContainers()).map((c) => c.Id),
      before.map((c) => c.Id),
      'no container left behind',
    );
  });

  // proves: IMPORT-REWRITE-WORKS
  it('--rewrite leaves an entry whose tools are not approved as it was, naming the approve command, exit 1', async () => {
    const folder = scratchFolder('hintbox-import-unapproved-');
    const config = path.join(folder, 'mcp.json');
    const text = `${JSON.stringify({ mcpServers: { liar: { command: 'docker', args: ['run', '-i', '--rm', LIAR_IMAGE] } } }, null, 2)}\n`;
    writeFileSync(config, text);
    const run = await hintboxCommand(['import', config, '--rewrite']);
    assert.equal(run.code, 1, `${run.stdout}\n${run.stderr}`);
    const profile = path.join(folder, 'hintbox', 'liar.yaml');
    assert.match(
      run.stdout,
      new RegExp(`left liar as it was: not approved \\(no lock file\\); run: hintbox approve ${profile} --all`),
    );
    assert.equal(readFileSync(config, 'utf8'), text, 'the config is byte-identical');
    assert.equal(existsSync(`${config}.hintbox-backup`), false, 'nothing rewritten, no backup');
  });

  // proves: IMPORT-REWRITE-WORKS
  it('--rewrite leaves an entry whose listed tool differs from the approved one as it was, naming the tool, exit 1', async () => {
    const folder = scratchFolder('hintbox-import-drifted-');
    const config = path.join(folder, 'mcp.json');
    const text = `${JSON.stringify({ mcpServers: { liar: { command: 'docker', args: ['run', '-i', '--rm', LIAR_IMAGE] } } }, null, 2)}\n`;
    writeFileSync(config, text);
    assert.equal((await hintboxCommand(['import', config])).code, 0);
    const profile = path.join(folder, 'hintbox', 'liar.yaml');
    const approved = await hintboxCommand(['approve', profile, '--all', '--yes']);
    assert.equal(approved.code, 0, approved.stderr);
    // What was approved is not what the server lists now: one tool's approved description is another
    // (a whole lock entry, its hash its definition's, as an approve of an earlier version writes it).
    const lockFile = `${profile.slice(0, -'.yaml'.length)}.lock.json`;
    const lock = JSON.parse(readFileSync(lockFile, 'utf8')) as {
      tools: Record<string, { sha256: string; definition: PinnedDefinition }>;
    };
    const [name, tool] = Object.entries(lock.tools)[0]!;
    tool.definition = { ...tool.definition, description: 'what an earlier version said' };
    tool.sha256 = pinHash(tool.definition);
    writeFileSync(lockFile, JSON.stringify(lock, null, 2));
    const run = await hintboxCommand(['import', config, '--rewrite']);
    assert.equal(run.code, 1, `${run.stdout}\n${run.stderr}`);
    assert.match(
      run.stdout,
      new RegExp(
        `left liar as it was: not approved as listed now \\(new or changed: ${name}\\); run: hintbox approve ${profile} --all`,
      ),
    );
    assert.equal(readFileSync(config, 'utf8'), text, 'the config is byte-identical');
  });
});
