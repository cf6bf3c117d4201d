import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { emptyLock, readLockFile, writeLockFile } from '../../src/approvals/lock-file.js';
import { ExclusiveLockError, withExclusiveLock } from '../../src/util/exclusive-lock.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'hintbox-exclusive-lock-test-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const fresh = (): string => path.join(root, `f${n++}.lock.json`);

/** A pid that ran and is gone. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(child.stdout.toString());
}

describe('exclusive lock between processes', () => {
  it('is held during the section and removed after it, also when the section throws', async () => {
    const file = fresh();
    const inside = await withExclusiveLock(file, () => existsSync(`${file}.lock`));
    assert.equal(inside, true);
    assert.equal(existsSync(`${file}.lock`), false);
    await assert.rejects(
      withExclusiveLock(file, () => {
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.equal(existsSync(`${file}.lock`), false);
  });

  it('waits for a live holder and fails past the timeout, naming it; the lock is left alone', async () => {
    const file = fresh();
    const held = JSON.stringify({ pid: process.pid, host: os.hostname(), nonce: 'other', since: 'now' });
    writeFileSync(`${file}.lock`, held);
    await assert.rejects(
      withExclusiveLock(file, () => 'ran', { timeoutMs: 300 }),
      (error: Error) => error instanceof ExclusiveLockError && error.message.includes(`held by pid ${process.pid}`),
    );
    assert.equal(readFileSync(`${file}.lock`, 'utf8'), held);
  });

  it('breaks a lock whose holder no longer runs, and a holderless one older than 10 s', async () => {
    const dead = fresh();
    writeFileSync(`${dead}.lock`, JSON.stringify({ pid: deadPid(), host: os.hostname(), nonce: 'x', since: 'then' }));
    assert.equal(await withExclusiveLock(dead, () => 'ran', { timeoutMs: 1000 }), 'ran');
    assert.equal(existsSync(`${dead}.lock`), false);

    const orphan = fresh();
    writeFileSync(`${orphan}.lock`, ''); // its maker died between creating and writing it
    await assert.rejects(
      withExclusiveLock(orphan, () => 'ran', { timeoutMs: 300 }),
      ExclusiveLockError,
    );
    const old = (Date.now() - 60_000) / 1000;
    utimesSync(`${orphan}.lock`, old, old);
    assert.equal(await withExclusiveLock(orphan, () => 'ran', { timeoutMs: 1000 }), 'ran');
  });

  it("breaks another host's lock only once it is older than staleMs", async () => {
    const file = fresh();
    writeFileSync(`${file}.lock`, JSON.stringify({ pid: 1, host: 'elsewhere', nonce: 'x', since: 'then' }));
    await assert.rejects(
      withExclusiveLock(file, () => 'ran', { timeoutMs: 300, staleMs: 5000 }),
      /held by pid 1 on elsewhere/,
    );
    const old = (Date.now() - 10_000) / 1000;
    utimesSync(`${file}.lock`, old, old);
    assert.equal(await withExclusiveLock(file, () => 'ran', { timeoutMs: 1000, staleMs: 5000 }), 'ran');
  });

  it('loses no update of eight processes changing one lock file at once', async () => {
    const file = fresh();
    writeLockFile(file, emptyLock('fs'));
    const script = `
      import { updateLockFile, lockTool } from ${JSON.stringify(path.resolve('src/approvals/lock-file.ts'))};
      import { pinTool } from ${JSON.stringify(path.resolve('src/policy/tool-pin.ts'))};
      const name = process.argv[1];
      for (let i = 0; i < 5; i++) {
        await updateLockFile(${JSON.stringify(file)}, 'fs', (lock) => {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5); // a slow edit widens the race
          return lockTool(lock, pinTool({ name: name + '-' + i, inputSchema: { type: 'object' } }));
        });
      }`;
    const run = promisify(execFile);
    await Promise.all(
      Array.from({ length: 8 }, (_, p) =>
        run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, `p${p}`]),
      ),
    );
    assert.equal(existsSync(`${file}.lock`), false);
    assert.equal(Object.keys(readLockFile(file, 'fs')?.tools ?? {}).length, 40, 'and it reads as a lock file');
  });
});
