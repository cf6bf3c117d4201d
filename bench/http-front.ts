/**
 * What HTTP itself costs in Node, beside serve: the same `read_text_file` call five ways, in
 * turn, round by round:
 * - **serve**: `hintbox serve` with a bearer token, the bench's lean `node:http` client;
 * - **front**: a minimal `node:http` server in this process (no checks at all) that writes each
 *   POST body as a line to `hintbox run`'s stdin and answers with its line, the same lean client;
 * - **run**: `hintbox run` with the SDK's stdio client (serve ÷ run's baseline);
 * - **serve-raw** and **run-raw**: the same two with clients of the same weight, each the least
 *   its transport needs (raw-clients.ts: HTTP/1.1 written and read by hand on one socket;
 *   newline-delimited JSON on the pipes), so that their ratio is hintbox's own, not the clients'.
 *
 *   node --import tsx bench/http-front.ts --rounds 3 --warmup 6000 --calls 3000
 *
 * If front is not faster than serve, serve's own work is not what stands between it and stdio:
 * Node's HTTP server and client are (docs/benchmarks.md, session 23).
 */
import { spawn } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { relocatedProfileText } from '../src/profile/relocate-profile.js';
import { LeanHttpClient } from './lean-http-client.js';
import { RawHttpClient, RawStdioClient } from './raw-clients.js';
import { CLOCK_TICKS_PER_SECOND, procStat } from './proc-stat.js';
import { approveEach, benchToken, startServe } from './serve-processes.js';
import { spawnServer } from './spawn-server.js';
import { median, percentile } from './stats.js';
import { toolArgs } from './tool-args.js';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const BIN = path.join(REPO, 'dist', 'hintbox.mjs');
const { values } = toolArgs(
  'http-front',
  'serve, a bare node:http front over hintbox run, and run over stdio, then serve and run each with a raw client: p50 and CPU per call.',
  {
    options: {
      rounds: { type: 'string', default: '3' },
      warmup: { type: 'string', default: '6000' },
      calls: { type: 'string', default: '3000' },
    },
  },
);
const ROUNDS = Number(values.rounds);
const WARMUP = Number(values.warmup);
const CALLS = Number(values.calls);

interface Figures {
  p50: number;
  /** CPU per call (µs) of the hintbox process (for front: run's, the front is in this process). */
  hintboxUs: number;
  /** CPU per call (µs) of this process: the client (and, for front, the front). */
  hereUs: number;
}

/** CPU time (user + system, clock ticks) of `pid`: fields 14 and 15 of its stat. */
const cpuTicks = (pid: number): number => {
  const { fields } = procStat(pid);
  return Number(fields[11]) + Number(fields[12]);
};

/** Times `call` after the warm-up: its p50 and the CPU of `pid` and of this process per call. */
async function timed(call: () => Promise<unknown>, pid: number): Promise<Figures> {
  for (let i = 0; i < WARMUP; i++) await call();
  const ticks = cpuTicks(pid);
  const here = process.cpuUsage();
  const samples: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const t = performance.now();
    await call();
    samples.push(performance.now() - t);
  }
  const used = process.cpuUsage(here);
  const hintboxUs = ((cpuTicks(pid) - ticks) * 1e6) / CLOCK_TICKS_PER_SECOND / CALLS;
  return { p50: percentile(samples, 50), hintboxUs, hereUs: (used.user + used.system) / CALLS };
}

/** A workspace with the file the calls read, and a state folder with the trusted profile. */
function folders(): { workspace: string; state: string; profile: string; env: Record<string, string> } {
  const workspace = mkdtempSync(path.join(os.tmpdir(), 'hintbox-front-ws-'));
  writeFileSync(path.join(workspace, 'file.txt'), 'benchmark\n');
  chownSync(workspace, 10001, 10001);
  chownSync(path.join(workspace, 'file.txt'), 10001, 10001);
  const state = mkdtempSync(path.join(os.tmpdir(), 'hintbox-front-state-'));
  const text = relocatedProfileText(path.join(REPO, 'profiles/filesystem.yaml'))
    .replace(/^trust: untrusted$/m, 'trust: trusted')
    .replace(/^name: .*$/m, 'name: fs-1');
  const profile = path.join(state, 'fs-1.yaml');
  writeFileSync(profile, text);
  return {
    workspace,
    state,
    profile,
    env: { WORKSPACE: workspace, HINTBOX_STATE_DIR: state, HINTBOX_LOG_LEVEL: 'warn' },
  };
}

const readFile = { path: '/workspace/file.txt' };

async function viaRunRaw(): Promise<Figures> {
  const { workspace, state, profile, env } = folders();
  const client = await RawStdioClient.start(BIN, ['run', profile], {
    PATH: process.env.PATH ?? '',
    HOME: '/root',
    ...env,
  });
  try {
    return await timed(() => client.callTool('read_text_file', readFile), client.pid);
  } finally {
    await client.close();
    for (const dir of [workspace, state]) rmSync(dir, { recursive: true, force: true });
  }
}

/** serve with the lean `node:http` client, or (`raw`) with the raw one on the session the lean client opened. */
async function viaServe(client: 'lean' | 'raw'): Promise<Figures> {
  const { workspace, state, env } = folders();
  const tokens = benchToken();
  approveEach({ hintboxBin: BIN, env }, state, 1);
  const serving = await startServe({ hintboxBin: BIN, env }, state, tokens.file);
  try {
    const url = `${serving.url}/mcp/fs-1`;
    const lean = await LeanHttpClient.connect(url, tokens.token);
    const raw =
      client === 'raw' ? await RawHttpClient.connect(url, { ...lean.session, token: tokens.token }) : undefined;
    const call = () => (raw ?? lean).callTool('read_text_file', readFile);
    const figures = await timed(call, serving.child.pid ?? -1);
    raw?.close();
    await lean.close();
    return figures;
  } finally {
    await serving.stop();
    for (const dir of [workspace, state, tokens.folder]) rmSync(dir, { recursive: true, force: true });
  }
}

async function viaFront(): Promise<Figures> {
  const { workspace, state, profile, env } = folders();
  const run = spawn(BIN, ['run', profile], {
    env: { PATH: process.env.PATH ?? '', HOME: '/root', ...env },
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  const waiting = new Map<unknown, (line: string) => void>();
  let pending = '';
  run.stdout.setEncoding('utf8');
  run.stdout.on('data', (chunk: string) => {
    pending += chunk;
    for (let end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n')) {
      const line = pending.slice(0, end);
      pending = pending.slice(end + 1);
      const id = (JSON.parse(line) as { id?: unknown }).id;
      waiting.get(id)?.(line);
      waiting.delete(id);
    }
  });
  const front = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      if (req.method === 'DELETE') return void res.writeHead(200).end();
      const id = (JSON.parse(body) as { id?: unknown }).id;
      if (id !== undefined) {
        waiting.set(id, (line) => {
          const head = ['Content-Type', 'application/json', 'Content-Length', String(Buffer.byteLength(line))];
          res.writeHead(200, [...head, 'Mcp-Session-Id', 'front']).end(line);
        });
      }
      run.stdin.write(body + '\n');
      if (id === undefined) res.writeHead(202).end();
    });
  });
  front.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  try {
    const client = await LeanHttpClient.connect(`http://127.0.0.1:${(front.address() as AddressInfo).port}/mcp`);
    const figures = await timed(() => client.callTool('read_text_file', readFile), run.pid ?? -1);
    await client.close();
    return figures;
  } finally {
    front.close();
    run.stdin.end(); // hintbox run removes its sandboxes when its client goes
    await new Promise((resolve) => (run.exitCode === null ? run.once('exit', resolve) : resolve(undefined)));
    for (const dir of [workspace, state]) rmSync(dir, { recursive: true, force: true });
  }
}

async function viaRun(): Promise<Figures> {
  const { workspace, state, profile, env } = folders();
  const running = await spawnServer('/workspace', BIN, ['run', profile], env);
  try {
    return await timed(() => running.client.callTool({ name: 'read_text_file', arguments: readFile }), running.pid);
  } finally {
    await running.close();
    for (const dir of [workspace, state]) rmSync(dir, { recursive: true, force: true });
  }
}

const ways = {
  serve: () => viaServe('lean'),
  front: viaFront,
  run: viaRun,
  'serve-raw': () => viaServe('raw'),
  'run-raw': viaRunRaw,
} as const;
const results = new Map<string, Figures[]>();
for (let round = 1; round <= ROUNDS; round++) {
  for (const [name, way] of Object.entries(ways)) {
    process.stderr.write(`http-front: round ${round}/${ROUNDS}: ${name}\n`);
    const figures = await way();
    process.stderr.write(
      `http-front:   p50 ${figures.p50.toFixed(3)} ms, CPU per call: hintbox ${figures.hintboxUs.toFixed(0)} µs, here ${figures.hereUs.toFixed(0)} µs\n`,
    );
    results.set(name, [...(results.get(name) ?? []), figures]);
  }
}
const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
console.log(`${ROUNDS} round(s), ${WARMUP} warm-up and ${CALLS} timed calls each, load ${load}; medians over rounds`);
console.log(
  `${'WAY'.padEnd(11)}${'P50 MS'.padEnd(10)}${'÷ ITS RUN'.padEnd(11)}${'HINTBOX CPU µs'.padEnd(16)}THIS PROCESS CPU µs (client; front too)`,
);
/** Each way against run with a client of its weight: the raw ones against run-raw, the others against run. */
const baseline = (name: string): number =>
  median((results.get(name.endsWith('-raw') ? 'run-raw' : 'run') ?? []).map((f) => f.p50));
for (const [name, figures] of results) {
  const p50 = median(figures.map((f) => f.p50));
  const cells = [
    name.padEnd(11),
    p50.toFixed(3).padEnd(10),
    `${(p50 / baseline(name)).toFixed(2)}×`.padEnd(11),
    median(figures.map((f) => f.hintboxUs))
      .toFixed(0)
      .padEnd(16),
    median(figures.map((f) => f.hereUs)).toFixed(0),
  ];
  console.log(cells.join(''));
}
