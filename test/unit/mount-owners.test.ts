import assert from 'node:assert/strict';
import { chmodSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { mayWriteFolder, unwritableMounts } from '../../src/sandbox/mount-owners.js';
import { scratchFolder } from '../support/scratch-folder.js';

/** Whether the (never root) sandbox user can write a read-write mount's folder. */
describe('mount owners', () => {
  const user = { uid: 10001, gid: 10001 };

  it('reads the owner, group or other bits that apply to the sandbox user (write and search both needed)', () => {
    assert.equal(mayWriteFolder({ uid: 10001, gid: 0, mode: 0o755 }, user), true);
    assert.equal(mayWriteFolder({ uid: 10001, gid: 0, mode: 0o555 }, user), false);
    assert.equal(
      mayWriteFolder({ uid: 10001, gid: 10001, mode: 0o575 }, user),
      false,
      "the owner's bits decide for the owner",
    );
    assert.equal(mayWriteFolder({ uid: 0, gid: 10001, mode: 0o775 }, user), true);
    assert.equal(mayWriteFolder({ uid: 0, gid: 0, mode: 0o755 }, user), false, 'a root-owned workspace');
    assert.equal(mayWriteFolder({ uid: 0, gid: 0, mode: 0o1777 }, user), true);
    assert.equal(mayWriteFolder({ uid: 0, gid: 0, mode: 0o776 }, user), false, 'no search bit');
  });

  it('names each read-write mount the user cannot write and says what to do; read-only mounts are not its concern', () => {
    const base = scratchFolder('hintbox-owners-');
    const locked = path.join(base, 'locked');
    const open = path.join(base, 'open');
    mkdirSync(locked);
    mkdirSync(open);
    chmodSync(locked, 0o555);
    chmodSync(open, 0o777);
    const mounts = [
      { source: locked, target: '/a', mode: 'rw' as const },
      { source: locked, target: '/b', mode: 'ro' as const },
      { source: open, target: '/c', mode: 'rw' as const },
    ];
    const problems = unwritableMounts({ file: '/p.yaml', mounts }, user);
    assert.equal(problems.length, 1, JSON.stringify(problems));
    assert.equal(problems[0]?.path, 'mounts[0].source');
    assert.match(
      problems[0]?.message ?? '',
      /mode 555\) cannot be written by the sandbox user 10001:10001 \(sandboxes never run as root\): chown -R 10001:10001 .*locked, set server\.user/,
    );
  });
});
