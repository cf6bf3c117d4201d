import assert from 'node:assert/strict';
import { chmodSync, chownSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { defaultSandboxUser, mayWriteFolder, unwritableMounts } from '../../src/sandbox/mount-owners.js';
import { sandboxUserIds } from '../../src/engine/sandbox-engine.js';
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
      /mode 555\) cannot be written by the sandbox user 10001:10001 \(sandboxes never run as root\): chown -R 10001:10001 .*locked or to its non-root user \(sandboxes run as the workspace's owner\), set server\.user/,
    );
  });
});

/** Who a sandbox runs as when the profile names nobody: never root, and as root the workspace's owner. */
describe('the default sandbox user', () => {
  const asRoot = { uid: 0, gid: 0 };
  const root = process.getuid?.() === 0;
  /** A folder owned by uid:gid (chown needs root: without it, the folder is this process's). */
  const folderOf = (uid: number, gid: number): string => {
    const dir = scratchFolder('hintbox-owner-');
    if (root) chownSync(dir, uid, gid);
    return dir;
  };

  it("is hintbox's own user when that is not root, whoever owns the mounts", () => {
    const mounts = [{ source: folderOf(1234, 1234), target: '/w', mode: 'rw' as const }];
    assert.deepEqual(defaultSandboxUser({ mounts }, { uid: 1000, gid: 1001 }), { uid: 1000, gid: 1001 });
  });

  it('is, as root, the one owner of the read-write mount sources; read-only ones do not count', { skip: !root }, () => {
    const mounts = [
      { source: folderOf(1234, 1235), target: '/a', mode: 'rw' as const },
      { source: folderOf(1234, 1235), target: '/b', mode: 'rw' as const },
      { source: folderOf(0, 0), target: '/c', mode: 'ro' as const },
    ];
    assert.deepEqual(defaultSandboxUser({ mounts }, asRoot), { uid: 1234, gid: 1235 });
  });

  // proves: NO-ROOT
  it('as root, falls back to 10001 for a root owner, two owners or none', { skip: !root }, () => {
    const rw = (uid: number, gid: number) => ({
      source: folderOf(uid, gid),
      target: `/m${uid}`,
      mode: 'rw' as const,
    });
    assert.equal(defaultSandboxUser({ mounts: [rw(0, 0)] }, asRoot), undefined, 'a root-owned workspace');
    assert.equal(defaultSandboxUser({ mounts: [rw(1234, 0)] }, asRoot), undefined, 'a root group');
    assert.equal(defaultSandboxUser({ mounts: [rw(1234, 1234), rw(1300, 1300)] }, asRoot), undefined, 'two owners');
    assert.equal(defaultSandboxUser({ mounts: [] }, asRoot), undefined);
    // And the fallback never is root: sandboxUserIds turns "none" into 10001.
    assert.deepEqual(sandboxUserIds({ server: { image: 'x' } }, defaultSandboxUser({ mounts: [rw(0, 0)] }, asRoot)), {
      uid: 10001,
      gid: 10001,
    });
  });
});
