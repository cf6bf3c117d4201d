import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LockFileError } from '../../src/approvals/lock-file.js';
import { ImageError } from '../../src/engine/docker/image-builder.js';
import { type Profile } from '../../src/profile/load-profile.js';
import { ProfileError } from '../../src/profile/profile-problems.js';
import { DockerUnavailableError } from '../../src/engine/docker/docker-connection.js';
import { assertNoNestedMounts } from '../../src/sandbox/nested-mounts.js';
import { exitCodeOf, HintboxError, UsageError } from '../../src/util/hintbox-error.js';

/** What `hintbox` exits with is decided by the error family alone (src/cli/main.ts). */
describe('exit codes of the error family', () => {
  it('gives bad usage 2: the command line, a profile, a lock file', () => {
    assert.equal(exitCodeOf(new UsageError('run: expected one profile file')), 2);
    assert.equal(exitCodeOf(new ProfileError([{ file: 'p.yaml', path: 'name', message: 'bad' }])), 2);
    assert.equal(exitCodeOf(new LockFileError('p.lock.json: (file): not JSON')), 2);
  });

  it('gives a nested mount point under a read-only source 2: the profile asks what this engine cannot enforce', () => {
    const profile = {
      file: '/p.yaml',
      mounts: [{ source: '/srv/data', target: '/data', mode: 'ro' }],
    } as unknown as Profile;
    const engine = { recursiveReadOnly: false, description: 'Docker at unix:///var/run/docker.sock, API 1.43' };
    let thrown: unknown;
    try {
      assertNoNestedMounts(profile, engine, ['/', '/srv/data', '/srv/data/cache']);
    } catch (error) {
      thrown = error;
    }
    assert.ok(thrown instanceof HintboxError, String(thrown));
    assert.equal(exitCodeOf(thrown), 2);
    assert.match(
      thrown.message,
      /^\/p\.yaml: mounts\[0\]\.source: \/srv\/data has nested mount points \(\/srv\/data\/cache\)/,
    );
  });

  it('gives failures 1, and errors from outside the family too', () => {
    assert.equal(exitCodeOf(new DockerUnavailableError('Docker is not reachable')), 1);
    assert.equal(exitCodeOf(new ImageError('cannot be pulled')), 1);
    assert.equal(exitCodeOf(new Error('anything else')), 1);
    assert.equal(exitCodeOf('a string'), 1);
  });
});
