import assert from 'node:assert/strict';
import { linkSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { loadProfile, type LoadProfileOptions } from '../../src/profile/load-profile.js';
import { ProfileError } from '../../src/profile/profile-problems.js';
import { scratchFolder } from '../support/scratch-folder.js';

/** A profile in a folder of its own, its workspace beside it (not a mount of the profile's folder). */
function setUp(extra = ''): { dir: string; workspace: string; file: string } {
  const dir = scratchFolder('hintbox-links-');
  const workspace = path.join(dir, 'workspace');
  mkdirSync(workspace);
  const file = path.join(dir, 'profiles', 'files.yaml');
  mkdirSync(path.dirname(file));
  writeFileSync(
    file,
    `name: files\nserver:\n  image: hintbox/files:1\n${extra}mounts:\n  - source: ${workspace}\n    target: /data\n`,
  );
  return { dir, workspace, file };
}

/** The one line loading refuses with. */
function refusal(file: string, ownPaths: LoadProfileOptions['ownPaths'] = []): string {
  try {
    loadProfile(file, { vars: {}, home: '/nonexistent-home', ownPaths });
  } catch (error) {
    assert.ok(error instanceof ProfileError, String(error));
    assert.equal(error.problems.length, 1, error.message);
    return error.message;
  }
  return assert.fail('the profile was loaded');
}

describe('operator files with a second name (hard link)', () => {
  // proves: OPERATOR-FILES-LINKS
  it('refuses a profile file that has a hard link in its writable mount, naming the file and why', () => {
    const { workspace, file } = setUp();
    assert.equal(loadProfile(file, { vars: {}, home: '/nonexistent-home', ownPaths: [] }).mounts.length, 1);
    linkSync(file, path.join(workspace, 'notes.yaml'));
    assert.equal(
      refusal(file),
      `${file}: the profile file ${file} has 2 names (hard links): another name may lie in a folder a sandbox can write, ` +
        `and writing there would change it; give it one name (cp -p ${file} ${file}.new && mv ${file}.new ${file})`,
    );
  });

  // proves: OPERATOR-FILES-LINKS
  it('refuses a lock file of approved definitions, a package lock and a build folder file with a second name', () => {
    const lock = setUp();
    const lockFile = lock.file.replace(/\.yaml$/, '.lock.json');
    writeFileSync(lockFile, '{}');
    linkSync(lockFile, path.join(lock.workspace, 'x.json'));
    assert.match(
      refusal(lock.file),
      /: the lock file of approved definitions .*files\.lock\.json has 2 names \(hard links\)/,
    );

    const npm = setUp('');
    writeFileSync(
      npm.file,
      readFileSync(npm.file, 'utf8').replace('  image: hintbox/files:1\n', '  npm: a-server@1.0.0\n'),
    );
    const npmLock = npm.file.replace(/\.yaml$/, '.npm-lock.json');
    writeFileSync(npmLock, '{}');
    linkSync(npmLock, path.join(npm.workspace, 'lock'));
    assert.match(refusal(npm.file), /: the server's npm package lock .*files\.npm-lock\.json has 2 names/);

    const built = setUp();
    const context = path.join(built.dir, 'build');
    mkdirSync(path.join(context, 'src'), { recursive: true });
    writeFileSync(path.join(context, 'Dockerfile'), 'FROM scratch\n');
    writeFileSync(path.join(context, 'src', 'server.js'), '');
    writeFileSync(built.file, readFileSync(built.file, 'utf8').replace('server:\n', `server:\n  build: ../build\n`));
    assert.equal(loadProfile(built.file, { vars: {}, home: '/nonexistent-home', ownPaths: [] }).name, 'files');
    linkSync(path.join(context, 'src', 'server.js'), path.join(built.workspace, 'server.js'));
    assert.match(
      refusal(built.file),
      /: a file of the server's build folder \(server\.build\) .*build\/src\/server\.js has 2 names/,
    );
  });

  // proves: OPERATOR-FILES-LINKS
  it("refuses any file of hintbox's state folder with a second name", () => {
    const { dir, workspace, file } = setUp();
    const state = path.join(dir, 'state');
    mkdirSync(path.join(state, 'known-tools'), { recursive: true });
    writeFileSync(path.join(state, 'known-tools', 'files.json'), '{}');
    const ownPaths = [{ path: state, what: "hintbox's state folder", oneNameEach: true }];
    assert.equal(loadProfile(file, { vars: {}, home: '/nonexistent-home', ownPaths }).name, 'files');
    linkSync(path.join(state, 'known-tools', 'files.json'), path.join(workspace, 'k.json'));
    assert.match(refusal(file, ownPaths), /: a file of hintbox's state folder .*known-tools\/files\.json has 2 names/);
  });
});
