import assert from 'node:assert/strict';
import { readFileSync, statSync, existsSync, mkdtempSync, rmSync, copyFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { gateBinary, gateBinaryProblem, openGateSocket } from '../../src/engine/docker/gate.js';
import { SANDBOX_IO_DIR } from '../../src/engine/gate-variables.js';
import { packagePath } from '../../src/util/package-root.js';

const GATE = packagePath('dist', 'hintbox-gate');
const base = mkdtempSync(path.join(os.tmpdir(), 'hintbox-gate-test-'));
after(() => rmSync(base, { recursive: true, force: true }));

describe('the gate binary', () => {
  it('is the static build of native/hintbox-gate.c for this machine', () => {
    assert.ok(existsSync(GATE), `${GATE} exists (npm run build makes it)`);
    assert.equal(gateBinaryProblem(readFileSync(GATE), process.arch), undefined);
    assert.equal(gateBinary(GATE), GATE);
  });

  // proves: GATE
  it('refuses a dynamically linked executable: the image would run its own loader first', () => {
    const node = readFileSync(process.execPath);
    assert.match(gateBinaryProblem(node, process.arch) ?? '', /dynamically linked/);
    const copy = path.join(base, 'dynamic-gate');
    copyFileSync(process.execPath, copy);
    assert.throws(() => gateBinary(copy), /cannot be used: dynamically linked/);
  });

  it('refuses another architecture, a cut file and what is not ELF', () => {
    const elf = Buffer.from(readFileSync(GATE));
    elf.writeUInt16LE(process.arch === 'arm64' ? 62 : 183, 0x12);
    assert.match(gateBinaryProblem(elf, process.arch) ?? '', /built for ELF machine/);
    assert.match(gateBinaryProblem(readFileSync(GATE).subarray(0, 100), process.arch) ?? '', /cut short/);
    assert.equal(
      gateBinaryProblem(Buffer.from('#!/bin/sh\nexec "$@"\n'.padEnd(80)), process.arch),
      'not an ELF executable',
    );
    const script = path.join(base, 'script-gate');
    writeFileSync(script, '#!/bin/sh\nexec "$@"\n');
    assert.throws(() => gateBinary(script), /cannot be used: not an ELF executable/);
    assert.throws(() => gateBinary(path.join(base, 'missing')), /is missing: build it with `npm run build`/);
  });
});

describe('openGateSocket', () => {
  const connect = (file: string): Promise<net.Socket> =>
    new Promise((resolve, reject) => {
      const s = net.connect(file, () => resolve(s));
      s.once('error', reject);
    });

  // proves: GATE
  it("lets only the sandbox user in, takes the gate's two connections, then removes its folder", async () => {
    const me = process.getuid!();
    const user = me === 0 ? { uid: 10001, gid: 10001 } : { uid: me, gid: process.getgid!() };
    const gate = await openGateSocket({ sandboxUser: user, baseDir: base });
    try {
      const dir = statSync(gate.hostDir);
      assert.equal(dir.mode & 0o777, 0o700, 'the folder is private');
      assert.equal(dir.uid, user.uid, 'and belongs to the sandbox user');
      assert.ok(gate.sandboxPath.startsWith(`${SANDBOX_IO_DIR}/`), gate.sandboxPath);
      // A short name (a long $TMPDIR must still fit a socket path): its folder's name is random,
      // and neither is a secret (/proc/net/unix lists socket paths); the token is what proves the gate.
      assert.equal(path.basename(gate.sandboxPath), 'gate.sock');
      assert.match(path.basename(gate.hostDir), /^hintbox-io-\d+-\w{6}$/, 'in a fresh folder');
      const hostSocket = path.join(gate.hostDir, path.basename(gate.sandboxPath));

      // Connections that are not the gate: a wrong token, and one that says nothing. Neither
      // is taken, and neither keeps the gate out.
      const impostor = await connect(hostSocket);
      const impostorClosed = new Promise((resolve) => impostor.once('close', resolve));
      impostor.write(`${'0'.repeat(gate.token.length)}\n`);
      await impostorClosed;
      const silent = await connect(hostSocket);

      const first = await connect(hostSocket);
      first.write(`${gate.token}\n`);
      // The server's proof again is not the control connection's: dropped.
      const twice = await connect(hostSocket);
      const twiceClosed = new Promise((resolve) => twice.once('close', resolve));
      twice.write(`${gate.token}\n`);
      await twiceClosed;
      const second = await connect(hostSocket);
      second.write(`${gate.token}+\n`);
      const { stdio: accepted, control } = await gate.connection;
      accepted.resume();
      first.write('hello');
      const got = await new Promise<string>((resolve) => accepted.once('data', (b: Buffer) => resolve(b.toString())));
      assert.equal(got, 'hello');
      // The folder goes as soon as the gate is in: nobody else can connect after it.
      for (let i = 0; i < 50 && existsSync(gate.hostDir); i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(existsSync(gate.hostDir), false, 'the socket folder is removed after the gate connected');
      await assert.rejects(connect(hostSocket), /ENOENT|ECONNREFUSED/);
      await new Promise((resolve) => (silent.destroyed ? resolve(undefined) : silent.once('close', resolve)));
      first.destroy();
      second.destroy();
      accepted.destroy();
      control.destroy();
    } finally {
      await gate.close();
    }
  });

  it('rejects a pending connection when closed, and leaves nothing', async () => {
    const gate = await openGateSocket({
      sandboxUser: { uid: process.getuid!(), gid: process.getgid!() },
      baseDir: base,
    });
    await gate.close();
    await assert.rejects(gate.connection, /never connected/);
    assert.equal(existsSync(gate.hostDir), false);
  });
});
