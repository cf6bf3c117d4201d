import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { ProfileError } from '../../src/profile/profile-problems.js';
import { assertNoSpecialFiles, findSpecialFile } from '../../src/sandbox/special-files.js';

const dirs: string[] = [];
const folder = (): string => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hintbox-special-'));
  dirs.push(dir);
  return dir;
};
const mount = (source: string, allowSpecialFiles = false) => ({
  source,
  target: '/w',
  mode: 'ro' as const,
  allowSpecialFiles,
});

describe('special files in mount sources', () => {
  after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  // proves: MOUNT-SOCKETS
  it('finds a Unix socket deep in a source, and a FIFO; refuses them in one line each naming the field', async () => {
    const root = folder();
    mkdirSync(path.join(root, 'a', 'b'), { recursive: true });
    writeFileSync(path.join(root, 'a', 'plain.txt'), 'x');
    const server = net.createServer();
    const socketPath = path.join(root, 'a', 'b', 's.sock');
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    try {
      assert.deepEqual(await findSpecialFile(root), { path: socketPath, what: 'a Unix socket' });
      const fifoRoot = folder();
      execFileSync('mkfifo', [path.join(fifoRoot, 'pipe')]);
      assert.deepEqual(await findSpecialFile(fifoRoot), { path: path.join(fifoRoot, 'pipe'), what: 'a FIFO' });

      const error = await assertNoSpecialFiles({ file: '/p.yaml', mounts: [mount(root), mount(fifoRoot)] }).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(error instanceof ProfileError);
      const lines = error.message.split('\n');
      assert.equal(lines.length, 2);
      assert.match(
        lines[0]!,
        /^\/p\.yaml: mounts\[0\]\.source: .*s\.sock is a Unix socket.*mounts\[0\]\.allowSpecialFiles: true/,
      );
      assert.match(lines[1]!, /^\/p\.yaml: mounts\[1\]\.source: .*pipe is a FIFO/);
      // The operator's opt-out, per mount.
      await assertNoSpecialFiles({ file: '/p.yaml', mounts: [mount(root, true), mount(fifoRoot, true)] });
    } finally {
      server.close();
    }
  });

  // proves: MOUNT-SOCKETS
  it('does not follow symlinks, and refuses a source it cannot check within its limits', async () => {
    const root = folder();
    symlinkSync('/run', path.join(root, 'link'));
    for (let i = 0; i < 5; i++) writeFileSync(path.join(root, `f${i}`), '');
    assert.equal(await findSpecialFile(root), undefined, 'a link to a folder of sockets is not walked');
    assert.match(JSON.stringify(await findSpecialFile(root, { maxEntries: 3, maxDepth: 8 })), /more than 3 entries/);
    const deep = folder();
    mkdirSync(path.join(deep, 'a', 'b', 'c'), { recursive: true });
    assert.match(JSON.stringify(await findSpecialFile(deep, { maxEntries: 100, maxDepth: 2 })), /deeper than 2/);
    await assert.rejects(
      assertNoSpecialFiles({ file: '/p.yaml', mounts: [mount(deep)] }, { maxEntries: 100, maxDepth: 2 }),
      /mounts\[0\]\.source: .*deeper than 2 levels.*allowSpecialFiles/,
    );
  });
});
