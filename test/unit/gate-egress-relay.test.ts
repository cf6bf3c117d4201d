import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openGateSocket, releaseGate } from '../../src/engine/docker/gate.js';
import { GateControl } from '../../src/engine/gate-control.js';
import { packagePath } from '../../src/util/package-root.js';

/**
 * The egress relay with the real gate on both sides, as root: the sandbox's gate is PID 1 of a
 * PID and network namespace of its own (`unshare`, loopback up, no other network, as a sandbox
 * with network none), the proxy's gate (--egress-proxy) runs a stand-in for Squid on the
 * loopback of another network namespace, and the Unix socket between them is the only way
 * across. The stand-in prints each request it gets, so the test counts what reached "the network".
 */
const GATE = packagePath('dist', 'hintbox-gate');
const TOKEN = 'e'.repeat(64);
const root = process.getuid?.() === 0;
const base = mkdtempSync(path.join(os.tmpdir(), 'hintbox-relay-test-'));
after(() => rmSync(base, { recursive: true, force: true }));

/** In a network namespace of its own with loopback up (and, with `pid`, as PID 1 of a PID namespace). */
function inNamespace(command: string[], env: Record<string, string>, pid: boolean): ChildProcess {
  const args = [
    // --kill-child: killing unshare kills its child, PID 1 of the namespace, and with it every process there.
    ...(pid ? ['--pid', '--fork', '--kill-child', '--mount-proc'] : []),
    '--net',
    'sh',
    '-c',
    'ip link set lo up && exec "$0" "$@"',
  ];
  return spawn('unshare', [...args, ...command], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'pipe' });
}

/** Collects a stream's lines; `next(match)` takes the first line not taken yet that matches (or waits for it). */
function lines(stream: NodeJS.ReadableStream) {
  const seen: string[] = [];
  const taken = new Set<number>();
  const waiting: { match: RegExp; resolve: (line: string) => void }[] = [];
  let buffered = '';
  stream.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    for (const line of parts) {
      seen.push(line);
      const i = waiting.findIndex((w) => w.match.test(line));
      if (i >= 0) {
        taken.add(seen.length - 1);
        waiting.splice(i, 1)[0]!.resolve(line);
      }
    }
  });
  return {
    seen,
    next: (match: RegExp, ms = 15_000): Promise<string> =>
      new Promise((resolve, reject) => {
        const at = seen.findIndex((line, i) => !taken.has(i) && match.test(line));
        if (at >= 0) {
          taken.add(at);
          resolve(seen[at]!);
          return;
        }
        const timer = setTimeout(
          () => reject(new Error(`no line ${match} in ${ms} ms; seen: ${seen.join(' | ')}`)),
          ms,
        );
        waiting.push({ match, resolve: (line) => (clearTimeout(timer), resolve(line)) });
      }),
  };
}

// The stand-in for Squid: answers every request on its loopback, and prints it.
const SQUID = `require('http').createServer((q, r) => { console.log('request ' + q.url); r.end('through'); })
  .listen(3128, '127.0.0.1', () => console.log('listening'));`;
// The sandbox's server: on "connect N", an HTTP request to its proxy (127.0.0.1:3128), as HTTP_PROXY
// would send it; on "direct", the same straight to the proxy's Unix socket, past its gate.
const SERVER = `const net = require('net');
console.log('env ' + Object.keys(process.env).filter((k) => k.startsWith('HINTBOX_')).join(','));
require('readline').createInterface({ input: process.stdin }).on('line', (line) => {
  const [what, n, target] = line.split(' ');
  const s = what === 'direct' ? net.connect(target) : net.connect(3128, '127.0.0.1');
  s.on('connect', () => { s.write('GET http://example.com/' + n + ' HTTP/1.0\\r\\n\\r\\n'); console.log('sent ' + n); });
  let got = '';
  s.on('data', (b) => (got += b));
  s.on('error', (e) => console.log('error ' + n + ' ' + e.code));
  s.on('close', () => console.log('closed ' + n + ' ' + JSON.stringify(got.split('\\r\\n\\r\\n')[1] ?? '')));
});`;

describe('the egress relay of the gate', { skip: root ? false : 'needs root (namespaces)' }, () => {
  let proxy: ChildProcess;
  let squid: ReturnType<typeof lines>;
  let proxySocket: string;

  before(async () => {
    const dir = mkdtempSync(path.join(base, 'proxy-'));
    proxySocket = path.join(dir, 'proxy.sock');
    proxy = inNamespace(
      [GATE, '--egress-proxy', proxySocket, process.execPath, '-e', SQUID],
      { HINTBOX_GATE_EGRESS_TOKEN: TOKEN },
      // A PID namespace of its own, so that killing it leaves no proxy behind (a stray one held port 3128).
      true,
    );
    squid = lines(proxy.stdout!);
    proxy.stderr!.on('data', (b: Buffer) => process.stderr.write(`proxy: ${b.toString()}`));
    await squid.next(/^listening$/);
  });
  after(() => proxy.kill('SIGKILL'));

  /** A sandbox: the gate as PID 1 with the relay on, released; its server's lines and its control. */
  async function sandbox(egress = proxySocket) {
    const me = { uid: process.getuid!(), gid: process.getgid!() };
    const socket = await openGateSocket({ sandboxUser: me, baseDir: base });
    const child = inNamespace(
      [GATE, process.execPath, '-e', SERVER],
      {
        HINTBOX_GATE_SOCKET: path.join(socket.hostDir, path.basename(socket.sandboxPath)),
        HINTBOX_GATE_TOKEN: socket.token,
        HINTBOX_GATE_EGRESS: egress,
        HINTBOX_GATE_EGRESS_TOKEN: TOKEN,
        GLIBC_TUNABLES: '',
        HINTBOX_GATE_TUNABLES: '',
      },
      true,
    );
    child.stderr!.on('data', (b: Buffer) => process.stderr.write(`sandbox: ${b.toString()}`));
    const { stdio, control } = await socket.connection;
    const server = lines(stdio);
    stdio.resume();
    releaseGate(stdio);
    const env = await server.next(/^env /);
    // The gate (PID 1 inside) is the child of unshare on the host.
    const gatePid = Number(readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(' ')[0]);
    return {
      env,
      server,
      gatePid,
      control: new GateControl(control),
      send: (line: string) => stdio.write(`${line}\n`),
      [Symbol.dispose]: () => {
        child.kill('SIGKILL');
        stdio.destroy();
        control.destroy();
      },
    };
  }

  it('relays a request through both gates, and the server sees none of the relay variables', async () => {
    using box = await sandbox();
    assert.equal(box.env, 'env ', 'no HINTBOX_ variable reaches the server');
    box.send('connect 1');
    assert.equal(await box.server.next(/^closed 1 /), 'closed 1 "through"');
    await squid.next(/^request http:\/\/example.com\/1$/);
  });

  // proves: EGRESS-RELAY-FROZEN
  it('relays nothing while the sandbox is frozen: a request made just before the freeze waits for the thaw', async () => {
    using box = await sandbox();
    const requests = () => squid.seen.filter((l) => l.startsWith('request ')).length;
    const before = requests();
    // The gate is held (from the host) so that the connection and the freeze reach it together:
    // the request is written to the relay's port, then the freeze is asked, then the gate runs.
    process.kill(box.gatePid, 'SIGSTOP');
    box.send('connect 2');
    await box.server.next(/^sent 2$/);
    const frozen = box.control.freeze();
    await new Promise((r) => setTimeout(r, 100));
    process.kill(box.gatePid, 'SIGCONT');
    await frozen;
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(requests(), before, `nothing reached the proxy while frozen: ${squid.seen.join(' | ')}`);
    await box.control.thaw();
    await squid.next(/^request http:\/\/example.com\/2$/);
    assert.equal(await box.server.next(/^closed 2 /), 'closed 2 "through"');
  });

  // proves: EGRESS-RELAY-TOKEN
  it("refuses a connection to the proxy's socket that did not come through a gate (no token)", async () => {
    using box = await sandbox();
    const before = squid.seen.length;
    box.send(`direct 3 ${proxySocket}`);
    assert.equal(await box.server.next(/^closed 3 /), 'closed 3 ""');
    // And one with a wrong token, from the host.
    const forged = net.connect(proxySocket);
    forged.on('error', () => undefined); // reset by the proxy's gate: expected
    await new Promise((r) => forged.once('connect', r));
    forged.write(`${'f'.repeat(64)}\nGET http://example.com/4 HTTP/1.0\r\n\r\n`);
    await new Promise((r) => forged.once('close', r));
    box.send('connect 5');
    await squid.next(/^request http:\/\/example.com\/5$/);
    assert.deepEqual(squid.seen.slice(before), ['request http://example.com/5'], 'only the relayed request got in');
  });

  it('without HINTBOX_GATE_EGRESS (empty) nothing listens on the proxy port', async () => {
    using box = await sandbox('');
    box.send('connect 6');
    assert.equal(await box.server.next(/^error 6 /), 'error 6 ECONNREFUSED');
  });

  /** A connection to the proxy's socket from the host; resolves once connected. */
  function raw(): Promise<net.Socket> {
    return new Promise((resolve) => {
      const s = net.connect(proxySocket);
      s.on('error', () => undefined); // reset by the proxy's gate: expected
      s.once('connect', () => resolve(s));
    });
  }
  /** Writes `sent` and says after how many ms the proxy's gate closed the connection (Infinity: open after 5 s). */
  async function closedAfter(sent: string): Promise<number> {
    const s = await raw();
    const start = Date.now();
    const closed = new Promise<number>((r) => s.once('close', () => r(Date.now() - start)));
    const open = new Promise<number>((r) => setTimeout(() => r(Infinity), 5000).unref());
    s.write(sent);
    const ms = await Promise.race([closed, open]);
    s.destroy();
    return ms;
  }

  // The attack (review #2): a wrong byte closed the connection at once and a right prefix kept it
  // open, so the token came out one hex digit at a time (~500 connections).
  // proves: EGRESS-RELAY-TOKEN-ORACLE
  it(
    'answers a right token prefix and a wrong one alike: both closed at the proof deadline, whole lines both refused',
    { timeout: 20_000 },
    async () => {
      const [right, wrong] = await Promise.all([
        closedAfter(TOKEN.slice(0, 20)),
        closedAfter(`f${TOKEN.slice(1, 20)}`),
      ]);
      assert.ok(wrong >= 1500, `a wrong prefix is not refused before the deadline (closed after ${wrong} ms)`);
      assert.ok(right >= 1500 && right < 5000, `a right prefix is closed at the deadline too (${right} ms)`);
      assert.ok(Math.abs(right - wrong) < 1000, `both alike: right ${right} ms, wrong ${wrong} ms`);
      const before = squid.seen.length;
      const [rightLine, wrongLine] = await Promise.all([
        closedAfter(`${TOKEN.slice(0, 20)}\n`),
        closedAfter(`f${TOKEN.slice(1, 20)}\n`),
      ]);
      assert.ok(
        rightLine < 1500 && wrongLine < 1500,
        `a whole wrong line is refused at once: ${rightLine}, ${wrongLine} ms`,
      );
      assert.equal(squid.seen.length, before, 'nothing reached the proxy');
    },
  );

  // The attack (review #3): 64 idle connections that never send a token held every slot of the
  // proxy's gate, and the sandboxes' requests waited for ever.
  // proves: EGRESS-RELAY-PROOF-DEADLINE
  it(
    '65 idle connections without a token do not lock the proxy out: they are closed at the deadline',
    { timeout: 20_000 },
    async () => {
      using box = await sandbox();
      const idle = await Promise.all(Array.from({ length: 65 }, raw));
      const closed = Promise.all(idle.map((s) => new Promise((r) => s.once('close', r))));
      const start = Date.now();
      box.send('connect 7');
      assert.equal(await box.server.next(/^closed 7 /, 8000), 'closed 7 "through"');
      assert.ok(Date.now() - start < 6000, `through within the deadline and a bit (${Date.now() - start} ms)`);
      await closed;
    },
  );
});

// The attack (review #1): an image whose ENTRYPOINT starts with --egress-proxy decides argv[1] of
// the sandbox's gate. In proxy mode the gate would run the image's program at once, before any
// release, with hintbox's gate variables left in its environment.
// proves: EGRESS-PROXY-MODE
it('a sandbox whose command starts with --egress-proxy is refused: nothing runs, nothing listens', async () => {
  const dir = mkdtempSync(path.join(base, 'evil-'));
  const marker = path.join(dir, 'ran');
  const socket = path.join(dir, 'e.sock');
  const program = `echo "$HINTBOX_GATE_TOKEN" > ${marker}`;
  const gate = spawn(GATE, ['--egress-proxy', socket, 'sh', '-c', program], {
    env: {
      PATH: process.env.PATH ?? '',
      HINTBOX_GATE_SOCKET: path.join(dir, 'gate.sock'),
      HINTBOX_GATE_TOKEN: 'a'.repeat(64),
      HINTBOX_GATE_EGRESS: path.join(dir, 'proxy.sock'),
      HINTBOX_GATE_EGRESS_TOKEN: TOKEN,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  gate.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const timer = setTimeout(() => gate.kill('SIGKILL'), 3000);
  // 'close', not 'exit': its stderr is read to the end by then.
  const code = await new Promise<number | string | null>((r) => gate.once('close', (c, s) => r(c ?? s)));
  clearTimeout(timer);
  assert.equal(existsSync(marker), false, `the image's program did not run (gate: ${String(code)} ${stderr.trim()})`);
  assert.equal(existsSync(socket), false, 'the gate did not listen on the image-chosen socket');
  assert.equal(code, 111, `the gate exited with its failure status: ${stderr.trim()}`);
  assert.match(stderr, /egress-proxy/);
});
