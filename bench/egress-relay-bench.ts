import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openGateSocket, releaseGate } from '../src/engine/docker/gate.js';
import { packagePath } from '../src/util/package-root.js';

/**
 * What the egress relay costs: the same HTTP client against the same stand-in proxy (a Node
 * HTTP server on 127.0.0.1:3128 behind the real gate --egress-proxy, in a network namespace of
 * its own), once through a sandbox gate's relay (client in another namespace, as a sandbox with
 * network none: TCP to the gate, Unix socket, the proxy's gate, TCP to the proxy) and once
 * straight (client in the proxy's namespace: TCP to the proxy, as the old internal network
 * gave). Per new connection (a request on a fresh connection) and per request on a kept
 * connection; rounds alternate the two. Needs root (namespaces) and `npm run build` (the gate).
 *
 *   node --import tsx bench/egress-relay-bench.ts [ROUNDS=5] [REQUESTS=300]
 */
const GATE = packagePath('dist', 'hintbox-gate');
const ROUNDS = Number(process.argv[2] ?? 5);
const REQUESTS = Number(process.argv[3] ?? 300);
const TOKEN = 'b'.repeat(64);
const PROXY = `require('http').createServer((q, r) => r.end('ok')).listen(3128, '127.0.0.1', () => console.log('listening'))`;
const CLIENT = `const http = require('http');
const one = (agent) => new Promise((resolve, reject) => http.get({ host: '127.0.0.1', port: 3128, path: 'http://example.com/', agent },
  (r) => { r.resume(); r.on('end', resolve); }).on('error', reject));
(async () => {
  const kept = new http.Agent({ keepAlive: true, maxSockets: 1 });
  await one(kept);
  const time = async (agent) => { const t = process.hrtime.bigint(); for (let i = 0; i < ${REQUESTS}; i++) await one(agent); return Number(process.hrtime.bigint() - t) / 1e3 / ${REQUESTS}; };
  const fresh = await time(false);
  const reused = await time(kept);
  console.log(JSON.stringify({ fresh, reused }));
  kept.destroy();
})();`;

function inNetns(command: string[], env: Record<string, string>, pid: boolean): ChildProcess {
  const ns = [...(pid ? ['--pid', '--fork', '--mount-proc'] : []), '--net'];
  return spawn('unshare', [...ns, 'sh', '-c', 'ip link set lo up && exec "$0" "$@"', ...command], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
}

function firstLine(stream: NodeJS.ReadableStream): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    const on = (b: Buffer) => {
      text += b.toString();
      if (text.includes('\n')) {
        stream.off('data', on);
        resolve(text.slice(0, text.indexOf('\n')));
      }
    };
    stream.on('data', on);
  });
}

interface Sample {
  fresh: number;
  reused: number;
}

async function relayed(base: string, socket: string): Promise<Sample> {
  const me = { uid: process.getuid!(), gid: process.getgid!() };
  const gate = await openGateSocket({ sandboxUser: me, baseDir: base });
  const child = inNetns(
    [GATE, process.execPath, '-e', CLIENT],
    {
      HINTBOX_GATE_SOCKET: path.join(gate.hostDir, path.basename(gate.sandboxPath)),
      HINTBOX_GATE_TOKEN: gate.token,
      HINTBOX_GATE_EGRESS: socket,
      HINTBOX_GATE_EGRESS_TOKEN: TOKEN,
      GLIBC_TUNABLES: '',
      HINTBOX_GATE_TUNABLES: '',
    },
    true,
  );
  const { stdio, control } = await gate.connection;
  const line = firstLine(stdio);
  stdio.resume();
  releaseGate(stdio);
  const sample = JSON.parse(await line) as Sample;
  child.kill('SIGKILL');
  stdio.destroy();
  control.destroy();
  return sample;
}

function direct(proxyPid: number): Sample {
  const run = spawnSync('nsenter', [`--net=/proc/${proxyPid}/ns/net`, process.execPath, '-e', CLIENT], {
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(run.stderr);
  return JSON.parse(run.stdout.trim()) as Sample;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const base = mkdtempSync(path.join(os.tmpdir(), 'hintbox-relay-bench-'));
  const socket = path.join(base, 'proxy.sock');
  const proxy = inNetns(
    [GATE, '--egress-proxy', socket, process.execPath, '-e', PROXY],
    { HINTBOX_GATE_EGRESS_TOKEN: TOKEN },
    false,
  );
  try {
    await firstLine(proxy.stdout!);
    const samples = { relay: [] as Sample[], direct: [] as Sample[] };
    for (let round = 0; round < ROUNDS; round++) {
      samples.direct.push(direct(proxy.pid!));
      samples.relay.push(await relayed(base, socket));
    }
    const row = (what: keyof Sample) => {
      const r = median(samples.relay.map((s) => s[what]));
      const d = median(samples.direct.map((s) => s[what]));
      return `${what === 'fresh' ? 'request on a new connection' : 'request on a kept connection'}: relay ${r.toFixed(0)} µs, direct ${d.toFixed(0)} µs, relay costs ${(r - d).toFixed(0)} µs`;
    };
    console.log(
      `${ROUNDS} rounds × ${REQUESTS} requests, medians of the rounds' means (${os.cpus().length} CPUs, load ${os.loadavg()[0]!.toFixed(1)})`,
    );
    console.log(row('fresh'));
    console.log(row('reused'));
  } finally {
    proxy.kill('SIGKILL');
    rmSync(base, { recursive: true, force: true });
  }
}

await main();
