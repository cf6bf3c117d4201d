import assert from 'node:assert/strict';
import { rmSync, statSync } from 'node:fs';
import net from 'node:net';
import { describe, it } from 'node:test';
import { PG_SOCKET_FILE } from '../../src/database/socket-relay.js';
import {
  MAX_SOCKET_PATH_BYTES,
  SHORT_SOCKET_BASE,
  listenFor,
  makeSocketFolder,
  socketBaseDir,
  socketBaseDirs,
} from '../../src/util/unix-socket.js';

describe('socket folders', () => {
  // proves: SOCKET-PATH-LENGTH
  it('keeps a short TMPDIR and falls back to /tmp for a long one, so the longest socket path fits', async () => {
    assert.equal(socketBaseDir('/tmp'), '/tmp');
    assert.equal(
      socketBaseDir('/var/tmp/a-forty-character-temporary-folder-'),
      '/var/tmp/a-forty-character-temporary-folder-',
    );
    const long = `/home/someone/${'x'.repeat(76)}`;
    assert.equal(long.length, 90);
    assert.equal(socketBaseDir(long), SHORT_SOCKET_BASE);
    assert.deepEqual(socketBaseDirs(long), [long, SHORT_SOCKET_BASE]);
    // At the boundary: the folder chosen always leaves room for the longest name hintbox makes.
    for (let length = 40; length < 120; length++) {
      const tmp = `/${'t'.repeat(length - 1)}`;
      const folder = await makeSocketFolder('hintbox-pg-', PG_SOCKET_FILE, socketBaseDir(tmp)).catch(() => undefined);
      if (!folder) continue; // a base that does not exist here: only the length matters
      assert.ok(Buffer.byteLength(folder.socketPath) <= MAX_SOCKET_PATH_BYTES, folder.socketPath);
      rmSync(folder.dir, { recursive: true, force: true });
    }
  });

  // proves: SOCKET-PATH-LENGTH
  it('makes the folder owner-only, and a path that still does not fit is refused naming the limit and the path', async () => {
    const { dir, socketPath } = await makeSocketFolder('hintbox-io-', 'gate.sock', '/tmp');
    try {
      assert.equal(statSync(dir).mode & 0o777, 0o700);
      const tooLong = `${dir}/${'s'.repeat(MAX_SOCKET_PATH_BYTES)}`;
      const server = net.createServer();
      await assert.rejects(
        listenFor(server, dir, tooLong, undefined, 'set TMPDIR to a shorter folder'),
        (error: Error) =>
          error.message.includes(tooLong) &&
          /more than the 103 a Unix socket takes \(sun_path: 108 bytes on Linux/.test(error.message),
      );
      assert.equal(server.listening, false, 'nothing listens');
      assert.ok(socketPath.startsWith(`${dir}/`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
