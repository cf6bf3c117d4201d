/**
 * What HTTP itself costs in Node, beside serve: the same `read_text_file` call five ways, paired:
 * every way's processes alive at once, each way called in turn, a batch at a time
 * (`--batch` calls, `--batches` times after `--warmup-batches`), so that what the shared
 * machine does meanwhile falls on every way alike (minutes apart, the same way moved by
 * ±10–30 %; batches in turn agree within a few per cent):
 * - **serve**: `hintbox serve` with a bearer token, the bench's lean `node:http` client;
 * - **front**: a minimal `node:http` server in this process (no checks at all) that writes each
 *   POST body as a line to `hintbox run`'s stdin and answers with its line, the same lean client;
 * - **run**: `hintbox run` with the SDK's stdio client (serve ÷ run's baseline);
 * - **serve-raw** and **run-raw**: the same two with clients of the same weight, each the least
 *   its transport needs (raw-clients.ts: HTTP/1.1 written and read by hand on one socket;
 *   newline-delimited JSON on the pipes), so that their ratio is hintbox's own, not the clients'.
 * - `--variant name=COMMAND[,ARG…]`: serve-raw again with another command in place of the bin
 *   (another build, node flags: `--variant plain=node,--expose-gc,dist/hintbox.mjs`).
 *
 *   node --import tsx bench/http-front.ts --batches 30 --ways serve-raw,run-raw
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
import { QUIET_MS } from '../src/util/idle-collection.js';
import { LeanHttpClient } from './lean-http-client.js';
import { RawHttpClient, RawStdioClient } from './raw-clients.js';
import { CLOCK_TICKS_PER_SECOND, procStat } from './proc-stat.js';
import { approveEach, benchToken, startServe } from './serve-processes.js';
import { spawnServer } from './spawn-server.js';
import { percentile } from './stats.js';
import { toolArgs } from './tool-args.js';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const BIN = path.join(REPO, 'dist', 'hintbox.mjs');
const WAY_NAMES = ['serve', 'front', 'run', 'serve-raw', 'run-raw'] as const;
const { values } = toolArgs(
  'http-front',
  'serve, a bare node:http front over hintbox run, and run over stdio, then serve and run each with a raw client, paired (batches in turn): p50 and CPU per call. --variant name=COMMAND[,ARG...] adds serve-raw with another command for the bin.',
  {
    options: {
      batches: { type: 'string', default: '30' },
      batch: { type: 'string', default: '300' },
      'warmup-batches': { type: 'string', default: '8' },
      ways: { type: 'string', default: WAY_NAMES.join(',') },
      variant: { type: 'string', multiple: true },
    },
  },
);
/** A flag's value it cannot use: one line, exit 2, nothing started. */
const refuse = (line: string): never => {
  process.stderr.write(`http-front: ${line}\n`);
  process.exit(2);
};
const count = (flag: string, text: string, least: number): number =>
  Number.isInteger(Number(text)) && Number(text) >= least
    ? Number(text)
    : refuse(`--${flag} must be a whole number${least > 0 ? ' above 0' : ''}`);
const BATCHES = count('batches', values.batches, 1);
const BATCH = count('batch', values.batch, 1);
const WARMUP_BATCHES = count('warmup-batches', values['warmup-batches'], 0);
const chosen = values.ways.split(',').map((w) => w.trim());
const unknown = chosen.filter((w) => !(WAY_NAMES as readonly string[]).includes(w));
if (unknown.length > 0) refuse(`--ways: no way ${unknown.join(', ')} (ways: ${WAY_NAMES.join(', ')})`);
/** `name=COMMAND[,ARG…]`: serve-raw with this command in place of the bin. */
const variants = (values.variant ?? []).map((text) => {
  const at = text.indexOf('=');
  const command = text.slice(at + 1).split(',');
  if (at < 1 || !command[0]) refuse(`--variant ${text}: expected name=COMMAND[,ARG...]`);
  return { name: text.slice(0, at), command: command as [string, ...string[]] };
});
const names = [...chosen, ...variants.map((v) => v.name)];
const twice = names.find((name, i) => names.indexOf(name) !== i);
if (twice !== undefined) refuse(`${twice} is named twice (--ways and --variant names must differ)`);

/** A way of calling, its processes started: one call, the hintbox process it times, and its end. */
interface Way {
  name: string;
  call: () => Promise<unknown>;
  /** The hintbox process (for front: run's; the front is in this process). */
  pid: number;
  /** Ends it as a client would (its session ended first); once, however many ask. */
  close: () => Promise<void>;
  /** Ends its processes without the clients' goodbyes (a call may hang); shares `close`'s once. */
  kill: () => Promise<void>;
  samples: number[];
  /** How long it waited between its batches (ms), and when its last batch ended. */
  gaps: number[];
  lastEnd?: number;
  /** CPU of the hintbox process and of this process over the timed batches, µs. */
  hintboxUs: number;
  hereUs: number;
}

/** CPU time (user + system, µs) of `pid`: fields 14 and 15 of its stat, in clock ticks. */
const cpuUs = (pid: number): number => {
  const { fields } = procStat(pid);
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS_PER_SECOND;
};

function way(
  name: string,
  pid: number,
  call: () => Promise<unknown>,
  close: () => Promise<void>,
  kill: () => Promise<void> = close,
): Way {
  let ending: Promise<void> | undefined;
  return {
    name,
    pid,
    call,
    close: () => (ending ??= close()),
    kill: () => (ending ??= kill()),
    samples: [],
    gaps: [],
    hintboxUs: 0,
    hereUs: 0,
  };
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
const env = (extra: Record<string, string>) => ({ PATH: process.env.PATH ?? '', HOME: '/root', ...extra });
const removeAll = (...dirs: string[]) => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
};

async function runRaw(name: string): Promise<Way> {
  const { workspace, state, profile, env: extra } = folders();
  const client = await RawStdioClient.start(BIN, ['run', profile], env(extra));
  return way(
    name,
    client.pid,
    () => client.callTool('read_text_file', readFile),
    async () => {
      await client.close();
      removeAll(workspace, state);
    },
  );
}

/**
 * serve (`command`: the bin, or a variant's) with the lean `node:http` client, or (`raw`) with
 * the raw one on the session the lean client opened, connected at its first call and again
 * whenever serve has closed it (a kept-alive connection idle for 5 s, as the others start or
 * run their batches). Whatever fails once it is spawned stops it.
 */
async function serve(name: string, client: 'lean' | 'raw', command: [string, ...string[]] = [BIN]): Promise<Way> {
  const { workspace, state, env: extra } = folders();
  const tokens = benchToken();
  approveEach({ hintboxBin: BIN, env: extra }, state, 1);
  const serving = await startServe({ hintboxBin: BIN, env: extra, launcher: command }, state, tokens.file).catch(
    (error: Error) => {
      removeAll(workspace, state, tokens.folder);
      throw new Error(`${name}: ${error.message}`);
    },
  );
  // serve drains (≤ 30 s), then removes its sandboxes.
  const stop = async () => {
    await serving.stop();
    removeAll(workspace, state, tokens.folder);
  };
  try {
    const endpoint = `${serving.url}/mcp/fs-1`;
    const lean = await LeanHttpClient.connect(endpoint, tokens.token);
    let raw: RawHttpClient | undefined;
    const call = async () => {
      if (client === 'lean') return lean.callTool('read_text_file', readFile);
      if (!raw || raw.closed) raw = await RawHttpClient.connect(endpoint, { ...lean.session, token: tokens.token });
      return raw.callTool('read_text_file', readFile);
    };
    const close = async () => {
      raw?.close();
      await lean.close();
      await stop();
    };
    return way(name, serving.child.pid ?? -1, call, close, stop);
  } catch (error) {
    await stop();
    throw error;
  }
}

async function front(name: string): Promise<Way> {
  const { workspace, state, profile, env: extra } = folders();
  const run = spawn(BIN, ['run', profile], { env: env(extra), stdio: ['pipe', 'pipe', 'ignore'] });
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
  const server = http.createServer((req, res) => {
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
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = await LeanHttpClient.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
  return way(
    name,
    run.pid ?? -1,
    () => client.callTool('read_text_file', readFile),
    async () => {
      await client.close();
      server.close();
      run.stdin.end(); // hintbox run removes its sandboxes when its client goes
      await new Promise((resolve) => (run.exitCode === null ? run.once('exit', resolve) : resolve(undefined)));
      removeAll(workspace, state);
    },
  );
}

async function runSdk(name: string): Promise<Way> {
  const { workspace, state, profile, env: extra } = folders();
  const running = await spawnServer('/workspace', BIN, ['run', profile], extra);
  const call = () => running.client.callTool({ name: 'read_text_file', arguments: readFile });
  return way(name, running.pid, call, async () => {
    await running.close();
    removeAll(workspace, state);
  });
}

const starts: Record<(typeof WAY_NAMES)[number], (name: string) => Promise<Way>> = {
  serve: (name) => serve(name, 'lean'),
  front,
  run: runSdk,
  'serve-raw': (name) => serve(name, 'raw'),
  'run-raw': runRaw,
};

/** The call under way (its way, its start), for the watchdog: a call that never ends is named, not waited on forever. */
let current: { name: string; since: number } | undefined;
const CALL_DEADLINE_MS = 30_000;

/** One batch of a way: its samples kept and its CPU counted when `timed`. */
async function batch(w: Way, timed: boolean): Promise<void> {
  const hintbox0 = cpuUs(w.pid);
  const here0 = process.cpuUsage();
  for (let i = 0; i < BATCH; i++) {
    const t = performance.now();
    current = { name: w.name, since: t };
    await w.call();
    if (timed) w.samples.push(performance.now() - t);
  }
  if (!timed) return;
  const here = process.cpuUsage(here0);
  w.hintboxUs += cpuUs(w.pid) - hintbox0;
  w.hereUs += here.user + here.system;
}

const ways: Way[] = [];
/**
 * Ends every way's processes (serve's would outlive this process: their stdin is not ours) and
 * exits 1; once. A way already closing (the normal end) is waited for, not ended twice.
 */
let stopping: Promise<never> | undefined;
const stop = (why: string): Promise<never> =>
  (stopping ??= (async () => {
    clearInterval(watchdog);
    process.stderr.write(`http-front: ${why}; stopping every way\n`);
    await Promise.allSettled(ways.map((w) => w.kill()));
    process.exit(1);
  })());
const watchdog = setInterval(() => {
  if (current && performance.now() - current.since > CALL_DEADLINE_MS)
    void stop(`a call of ${current.name} has not ended in ${CALL_DEADLINE_MS / 1000} s`);
}, 5_000);
watchdog.unref();
// Every signal, not the first only: a second Ctrl-C while the ways end would kill this process
// before it removed their folders (stop runs once).
process.on('SIGINT', () => void stop('interrupted'));
process.on('SIGTERM', () => void stop('terminated'));
try {
  for (const name of chosen) {
    process.stderr.write(`http-front: starting ${name}\n`);
    ways.push(await starts[name as (typeof WAY_NAMES)[number]](name));
  }
  for (const variant of variants) {
    process.stderr.write(`http-front: starting ${variant.name} (${variant.command.join(' ')})\n`);
    ways.push(await serve(variant.name, 'raw', variant.command));
  }
  for (let b = 0; b < WARMUP_BATCHES + BATCHES; b++) {
    const timed = b >= WARMUP_BATCHES;
    if (b === 0 || b === WARMUP_BATCHES || (b - WARMUP_BATCHES + 1) % 10 === 0)
      process.stderr.write(`http-front: batch ${b + 1}/${WARMUP_BATCHES + BATCHES}${timed ? '' : ' (warm-up)'}\n`);
    // The order swaps every round: what one way leaves behind falls on each alike.
    for (const w of b % 2 === 0 ? ways : [...ways].reverse()) {
      if (timed && w.lastEnd !== undefined) w.gaps.push(performance.now() - w.lastEnd);
      await batch(w, timed);
      w.lastEnd = performance.now();
    }
  }
} catch (error) {
  // A call the stop ended (its process gone) fails here: the stop finishes and exits.
  if (stopping) await stopping;
  throw error;
} finally {
  clearInterval(watchdog);
  current = undefined;
  if (!stopping) await Promise.allSettled(ways.map((w) => w.close()));
}

const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
console.log(
  `${BATCHES} batches of ${BATCH} calls per way in turn, after ${WARMUP_BATCHES} warm-up batches; load ${load}`,
);
// hintbox run collects once its client is quiet for 1 s (idle-collection.ts): longer gaps give
// every run way a full collection per batch that serve never has.
const gap = percentile(
  ways.flatMap((w) => w.gaps),
  50,
);
if (gap > QUIET_MS)
  console.log(
    `note: each way waited ${(gap / 1000).toFixed(1)} s between its batches, past hintbox run's ${QUIET_MS / 1000} s idle collection, which then runs in every gap of the run ways: fewer ways or a smaller --batch keep under it`,
  );
console.log(
  `${'WAY'.padEnd(14)}${'P50 MS'.padEnd(10)}${'P90 MS'.padEnd(10)}${'÷ ITS RUN'.padEnd(11)}${'HINTBOX CPU µs'.padEnd(16)}THIS PROCESS CPU µs (client; front too)`,
);
/** Each way against run with a client of its weight: the raw ones (and variants) against run-raw, the others against run. */
const p50 = (name: string) => {
  const found = ways.find((w) => w.name === name);
  return found ? percentile(found.samples, 50) : Number.NaN;
};
for (const w of ways) {
  const raw = w.name.endsWith('-raw') || variants.some((v) => v.name === w.name);
  const base = p50(raw ? 'run-raw' : 'run');
  const cells = [
    w.name.padEnd(14),
    percentile(w.samples, 50).toFixed(3).padEnd(10),
    percentile(w.samples, 90).toFixed(3).padEnd(10),
    (Number.isNaN(base) ? '—' : `${(percentile(w.samples, 50) / base).toFixed(2)}×`).padEnd(11),
    (w.hintboxUs / w.samples.length).toFixed(0).padEnd(16),
    (w.hereUs / w.samples.length).toFixed(0),
  ];
  console.log(cells.join(''));
}
