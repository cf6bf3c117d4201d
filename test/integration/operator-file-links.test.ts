import assert from 'node:assert/strict';
import { chownSync, linkSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { lockFilePath } from '../../src/profile/profile-paths.js';
import { assertNoLeftovers, ensureKeeperImage, KEEPER_IMAGE } from './support/docker.js';
import { hintboxCommand, runHintbox, sandboxFolder, writeProfile } from './support/hintbox-process.js';

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The operator's files cannot be changed through a writable mount by any name. A hard link is a
 * name no path check sees: the fixture's `write_note` (test/fixtures/keeper) writes
 * /data/note.txt in place, as most programs write, so a hard link of that name in the workspace
 * rewrites whatever file it shares with. (The filesystem reference server's write_file writes a
 * temporary file and renames it over the name: that replaces the link and leaves the linked
 * file alone, so it would not show the attack.)
 */
describe('operator files with a second name (hard link) in a writable mount', { timeout: 240_000 }, () => {
  before(ensureKeeperImage);
  after(assertNoLeftovers);

  let n = 0;
  const attack = async (which: 'profile file' | 'lock file of approved definitions'): Promise<void> => {
    const workspace = sandboxFolder();
    const name = `keeper-links-${process.pid}-${n++}`;
    const file = writeProfile({
      name,
      server: { image: KEEPER_IMAGE },
      trust: 'untrusted',
      mounts: [{ source: workspace, target: '/data' }],
      approval: { timeout: 10 },
    });
    const approve = await hintboxCommand(['approve', file, '--all']);
    assert.equal(approve.code, 0, approve.stderr);
    const target = which === 'profile file' ? file : lockFilePath(file);
    // The operator owns their profile and their workspace alike: the sandbox runs as the
    // workspace's owner (10001 when tests run as root), so it may write what that user may.
    if (process.getuid?.() === 0) chownSync(target, 10001, 10001);
    linkSync(target, path.join(workspace, 'note.txt'));
    const before = readFileSync(target, 'utf8');

    // The attack: one approved, innocuous call that writes a note (a person says yes to it).
    let refused: string | undefined;
    try {
      await using hintbox = await runHintbox(file, {}, 'approve');
      const result = await hintbox.client.callTool({ name: 'write_note', arguments: { text: 'trust: trusted\n' } });
      assert.equal(result.isError, undefined, JSON.stringify(result));
    } catch (error) {
      refused = (error as Error).message;
    }
    assert.equal(readFileSync(target, 'utf8'), before, `the ${which} is byte-identical`);
    assert.ok(refused, 'the run did not start');

    // As an operator sees it: exit 2, one line naming the file and why, before anything starts.
    const run = await hintboxCommand(['run', file]);
    assert.equal(run.code, 2, run.stderr);
    assert.equal(run.stderr.trim().split('\n').length, 1, run.stderr);
    assert.match(
      run.stderr.trim(),
      new RegExp(`^${escapeRe(file)}: the ${which} ${escapeRe(target)} has 2 names \\(hard links\\): `),
    );
    assert.equal(readFileSync(target, 'utf8'), before, `the ${which} is still byte-identical`);
  };

  it('refuses the run at start when the profile file has a hard link in the workspace: nothing starts, one write_note call to that name cannot rewrite it', () =>
    attack('profile file'));
  it('refuses the run at start when the lock file of approved definitions has a hard link in the workspace: nothing starts, one write_note call to that name cannot rewrite it', () =>
    attack('lock file of approved definitions'));
});
