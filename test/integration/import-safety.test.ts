import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { ensureTestImages, LIAR_IMAGE } from './support/docker.js';
import { hintboxCommand } from './support/hintbox-process.js';
import { scratchFolder } from '../support/scratch-folder.js';

/**
 * `hintbox import` over what the operator already has: run twice, an edited profile, a symbolic
 * link where it would write. The shipped CLI, as the operator runs it; the engine only where
 * --rewrite lists an entry's tools.
 */
integrationSuite('import over what is there', { timeout: 180_000, images: [ensureTestImages] }, () => {
  const CONFIG = {
    mcpServers: { memory: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory@2025.8.4'] } },
  };
  const configIn = (folder: string): string => {
    const file = path.join(folder, 'claude_desktop_config.json');
    writeFileSync(file, `${JSON.stringify(CONFIG, null, 2)}\n`);
    return file;
  };

  // proves: IMPORT-SAFE-REWRITE
  it('import --rewrite run twice: the second has nothing left to do, exit 0, config and profile byte-identical', async () => {
    // An entry --rewrite rewrites: its tools list, and are approved (import-rewrite.test.ts: the others).
    const config = path.join(scratchFolder('hintbox-import-twice-'), 'claude_desktop_config.json');
    const liar = { mcpServers: { liar: { command: 'docker', args: ['run', '-i', '--rm', LIAR_IMAGE] } } };
    writeFileSync(config, `${JSON.stringify(liar, null, 2)}\n`);
    assert.equal((await hintboxCommand(['import', config])).code, 0);
    const profile = path.join(path.dirname(config), 'hintbox', 'liar.yaml');
    const approved = await hintboxCommand(['approve', profile, '--all', '--yes']);
    assert.equal(approved.code, 0, approved.stderr);
    const first = await hintboxCommand(['import', config, '--rewrite']);
    assert.equal(first.code, 0, first.stderr);
    const [configAfter, profileAfter] = [readFileSync(config), readFileSync(profile)];
    const second = await hintboxCommand(['import', config, '--rewrite']);
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stdout, /nothing left to import: the entries imported before run hintbox already/);
    assert.deepEqual(readFileSync(config), configAfter);
    assert.deepEqual(readFileSync(profile), profileAfter);
  });

  // proves: IMPORT-SAFE-REWRITE
  it('an edited profile: refused without --force (one line, unchanged); with --force yours is kept as a backup; an identical one is left as it is', async () => {
    const config = configIn(scratchFolder('hintbox-import-edited-'));
    assert.equal((await hintboxCommand(['import', config])).code, 0);
    const profile = path.join(path.dirname(config), 'hintbox', 'memory.yaml');
    const fresh = readFileSync(profile, 'utf8');
    // Identical: nothing to refuse, nothing written.
    const again = await hintboxCommand(['import', config]);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /unchanged .*memory\.yaml/);
    const mine = fresh.replace('trust: untrusted', 'trust: untrusted\nlimits:\n  memory: 128m');
    writeFileSync(profile, mine);
    const refused = await hintboxCommand(['import', config]);
    assert.equal(refused.code, 2);
    assert.equal(
      refused.stderr,
      `import: ${profile} exists and differs from what import writes; nothing written (--force overwrites, keeping a backup)\n`,
    );
    assert.equal(readFileSync(profile, 'utf8'), mine, 'the edited profile is untouched');
    const forced = await hintboxCommand(['import', config, '--force']);
    assert.equal(forced.code, 0, forced.stderr);
    const backup = `${profile}.hintbox-backup`;
    assert.match(forced.stdout, new RegExp(`yours was kept as ${backup.replaceAll('.', '\\.')}`));
    assert.equal(readFileSync(backup, 'utf8'), mine, 'the backup is yours, byte for byte');
    assert.equal(readFileSync(profile, 'utf8'), fresh);
  });

  // proves: IMPORT-SAFE-REWRITE
  it('writes nothing through a symbolic link: the config --rewrite would rewrite, or a profile', async () => {
    const folder = scratchFolder('hintbox-import-link-');
    const real = configIn(scratchFolder('hintbox-import-link-target-'));
    const before = readFileSync(real);
    const linked = path.join(folder, 'claude_desktop_config.json');
    symlinkSync(real, linked);
    const viaLink = await hintboxCommand(['import', linked, '--rewrite', '--out', path.join(folder, 'profiles')]);
    assert.equal(viaLink.code, 2);
    assert.equal(viaLink.stderr, `import: ${linked}: a symbolic link, not written through; nothing written\n`);
    assert.deepEqual(readFileSync(real), before, 'the file it points to is byte-identical');
    assert.equal(existsSync(path.join(folder, 'profiles')), false, 'no profile written');

    const elsewhere = path.join(scratchFolder('hintbox-import-link-victim-'), 'victim.yaml');
    writeFileSync(elsewhere, 'not yours to overwrite\n');
    const out = path.join(folder, 'out');
    mkdirSync(out);
    symlinkSync(elsewhere, path.join(out, 'memory.yaml'));
    const profileLink = await hintboxCommand(['import', real, '--out', out, '--force']);
    assert.equal(profileLink.code, 2);
    assert.match(
      profileLink.stderr,
      /^import: .*memory\.yaml: a symbolic link, not written through; nothing written\n$/,
    );
    assert.equal(readFileSync(elsewhere, 'utf8'), 'not yours to overwrite\n');
  });
});
