import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { PG_SOCKET_FILE } from '../../src/database/socket-relay.js';
import { listeningSocketPaths, sweepSocketDirs } from '../../src/util/sweep-socket-dirs.js';

const base = mkdtempSync(path.join(os.tmpdir(), 'hintbox-sweep-relay-'));
after(() => rmSync(base, { recursive: true, force: true }));

describe('sweepSocketDirs', () => {
  it('reads listening sockets from /proc/net/unix', () => {
    const text = [
      'Num       RefCount Protocol Flags    Type St Inode Path',
      '0000000000000000: 00000002 00000000 00010000 0001 01 1234 /tmp/hintbox-pg-a/.s.PGSQL.5432',
      '0000000000000000: 00000003 00000000 00000000 0001 03 1235 /tmp/hintbox-pg-b/.s.PGSQL.5432',
    ].join('\n');
    assert.deepEqual([...listeningSocketPaths(text)], ['/tmp/hintbox-pg-a/.s.PGSQL.5432']);
  });

  it('removes relay and gate folders nobody listens in, and keeps live, young and other ones', async () => {
    const dead = path.join(base, 'hintbox-pg-dead');
    mkdirSync(dead);
    writeFileSync(path.join(dead, PG_SOCKET_FILE), ''); // a socket file left by a killed run
    const deadGate = path.join(base, 'hintbox-io-dead');
    mkdirSync(deadGate);
    writeFileSync(path.join(deadGate, 'a1b2.sock'), '');
    const other = path.join(base, 'not-ours');
    mkdirSync(other);
    const live = path.join(base, 'hintbox-pg-live');
    mkdirSync(live);
    const liveGate = path.join(base, 'hintbox-io-live');
    mkdirSync(liveGate);
    const servers = [net.createServer(), net.createServer()];
    await new Promise<void>((resolve) => servers[0]!.listen(path.join(live, PG_SOCKET_FILE), resolve));
    await new Promise<void>((resolve) => servers[1]!.listen(path.join(liveGate, 'c3d4.sock'), resolve));
    try {
      assert.deepEqual(sweepSocketDirs(base), [], 'folders younger than a minute are not swept');
      const removed = sweepSocketDirs(base, '/proc/net/unix', Date.now() + 120_000);
      assert.deepEqual(removed.sort(), [dead, deadGate].sort());
      assert.equal(existsSync(dead), false, 'the dead relay directory is gone');
      assert.equal(existsSync(deadGate), false, 'the dead gate folder is gone');
      assert.equal(existsSync(live), true, 'the live relay directory is kept');
      assert.equal(existsSync(liveGate), true, 'the live gate folder is kept');
      assert.equal(existsSync(other), true, 'other directories are not touched');
    } finally {
      for (const server of servers) await new Promise((resolve) => server.close(resolve));
    }
  });

  it("removes a young folder at once when the process named in it is gone, and keeps a live process's", () => {
    const dir = mkdtempSync(path.join(base, 'by-pid-'));
    const gone = path.join(dir, 'hintbox-io-4242-abc');
    const goneRelay = path.join(dir, 'hintbox-pg-4242-def');
    const alive = path.join(dir, 'hintbox-io-4343-ghi');
    const own = path.join(dir, `hintbox-pg-${process.pid}-jkl`);
    for (const d of [gone, goneRelay, alive, own]) mkdirSync(d);
    const removed = sweepSocketDirs(dir, '/proc/net/unix', Date.now(), (pid) => pid !== 4242);
    assert.deepEqual(removed.sort(), [gone, goneRelay].sort());
    assert.equal(existsSync(alive), true);
    assert.equal(existsSync(own), true, "this process's own folders are never its own sweep's");
  });

  // proves: EGRESS-SOCKET-SWEEP
  it("keeps an old folder whose process is alive though nobody listens in it as this host sees (a proxy's socket, in a container)", async () => {
    const dir = mkdtempSync(path.join(base, 'in-container-'));
    // The egress proxy listens on its socket inside its container's network namespace:
    // /proc/net/unix of the host does not list it. Its owner (the hintbox run) is alive.
    const proxy = path.join(dir, `hintbox-eg-${process.ppid}-abc`);
    const gone = path.join(dir, 'hintbox-eg-4242-def');
    for (const d of [proxy, gone]) mkdirSync(d);
    writeFileSync(path.join(proxy, 'proxy.sock'), '');
    const isAlive = (pid: number) => pid === process.ppid;
    const removed = sweepSocketDirs(dir, '/proc/net/unix', Date.now() + 3_600_000, isAlive);
    assert.deepEqual(removed, [gone], 'only the dead run folder');
    assert.equal(existsSync(path.join(proxy, 'proxy.sock')), true, 'the live proxy folder and its socket are kept');
  });

  it('finds nothing to sweep in a folder that does not exist yet (a fresh $TMPDIR)', () => {
    assert.deepEqual(sweepSocketDirs(path.join(base, 'not-made-yet')), []);
  });
});
