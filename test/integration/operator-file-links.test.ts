import assert from 'node:assert/strict';
import { chownSync, linkSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { lockFilePath } from '../../src/profile/profile-paths.js';
import { ensureKeeperImage, KEEPER_IMAGE } from './support/docker.js';
import { hintboxCommand, runHintbox, sandboxFolder, writeProfile } from './support/hintbox-process.js';
import { scratchFolder } from '../support/scratch-folder.js';

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The operator's files cannot be changed through a writable mount by any name. A hard link is a
 * name no path check sees: the fixture's `write_note` (test/fixtures/keeper) writes
 * /data/note.txt in place, as most programs write, so a hard link of that name in the workspace
 * rewrites whatever file it shares with. (The filesystem reference server's write_file writes a
 * temporary file and renames it over the name: that replaces the link and leaves the linked
 * file alone, so it would not show the attack.)
 */
integrationSuite(
  'operator files with a second name (hard link) in a writable mount',
  { timeout: 240_000, images: [ensureKeeperImage] },
  () => {
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
      const approve = await hintboxCommand(['approve', file, '--all', '--yes']);
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
        await using hintbox = await runHintbox(file);
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

    // proves: OPERATOR-FILES-LINKS
    it('refuses the run at start when the profile file has a hard link in the workspace: nothing starts, one write_note call to that name cannot rewrite it', () =>
      attack('profile file'));
    // proves: OPERATOR-FILES-LINKS
    it('refuses the run at start when the lock file of approved definitions has a hard link in the workspace: nothing starts, one write_note call to that name cannot rewrite it', () =>
      attack('lock file of approved definitions'));

    // proves: OPERATOR-FILES-LINKS
    it("refuses serve when its tokens file lies in a served profile's writable mount, or has a second name there", async () => {
      const workspace = sandboxFolder();
      const folder = scratchFolder('hintbox-served-');
      writeFileSync(
        path.join(folder, 'keeper.yaml'),
        `name: keeper\nserver:\n  image: ${KEEPER_IMAGE}\nmounts:\n  - source: ${workspace}\n    target: /data\n`,
      );
      const tokensText = `- name: ci\n  sha256: ${'a'.repeat(64)}\n`;
      /** serve's exit code and its problem lines (its log's info lines left out). */
      const serve = async (tokens: string) => {
        const { code, stderr } = await hintboxCommand(['serve', folder, '--port', '0', '--tokens', tokens]);
        return {
          code,
          lines: stderr
            .trim()
            .split('\n')
            .filter((line) => !line.startsWith('hintbox:')),
        };
      };

      // By its path: a server could add a token of its own for the next start.
      const inside = path.join(workspace, 'tokens.yaml');
      writeFileSync(inside, tokensText);
      const byPath = await serve(inside);
      assert.equal(byPath.code, 2, byPath.lines.join('\n'));
      assert.equal(byPath.lines.length, 1, byPath.lines.join('\n'));
      assert.match(
        byPath.lines[0]!,
        /keeper\.yaml: mounts\[0\]\.source: .* holds serve's tokens file \(.*tokens\.yaml\)/,
      );

      // By a second name: the path check cannot see it.
      const apart = path.join(scratchFolder('hintbox-tokens-'), 'tokens.yaml');
      mkdirSync(path.dirname(apart), { recursive: true });
      writeFileSync(apart, tokensText);
      linkSync(apart, path.join(workspace, 'note.txt'));
      const byLink = await serve(apart);
      assert.equal(byLink.code, 2, byLink.lines.join('\n'));
      assert.equal(byLink.lines.length, 1, byLink.lines.join('\n'));
      assert.match(byLink.lines[0]!, /^.*tokens\.yaml: the tokens file .*tokens\.yaml has 2 names \(hard links\)/);
      assert.equal(readFileSync(apart, 'utf8'), tokensText);
    });
  },
);
