/**
 * `hintbox serve` in the benchmark: calls over streamable HTTP with 1 and 8 clients, against
 * `hintbox run` over stdio in the same rounds (the baseline: the same server, the same gateway,
 * another transport), and serve's resident memory with 1, 5 and 20 servers in one process.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { parse, stringify } from 'yaml';
import type { Logger } from '../src/util/logger.js';
import { median, percentile, spread } from './stats.js';

export interface ServeBenchOptions {
  hintboxBin: string;
  /** A trusted profile of the filesystem server (its text), whose read_text_file runs unasked. */
  profileText: string;
  /** The workspace the profile mounts (`WORKSPACE`), holding `file.txt`. */
  env: Record<string, string>;
  rounds: number;
  /** Calls per measurement (spread over the clients). */
  calls: number;
  warmup: number;
  /** Servers per serve process for the memory figure. */
  scale: number[];
  log: Logger;
}

export interface ServeFigures {
  /** Per client count: p50/p99 of one call and calls per second, median over rounds, and run's over stdio. */
  calls: {
    clients: number;
    p50Ms: { median: number; spread: number };
    p99Ms: { median: number; spread: number };
    callsPerSecond: { median: number; spread: number };
  }[];
  /** The SDK's streamable HTTP alone (a trivial tool, no hintbox), one client, the same rounds. */
  bareHttp: { p50Ms: { median: number; spread: number }; callsPerSecond: { median: number; spread: number } };
  /** `hintbox run` over stdio, one client, the same rounds. */
  run: {
    p50Ms: { median: number; spread: number };
    p99Ms: { median: number; spread: number };
    callsPerSecond: { median: number; spread: number };
  };
  /** serve ÷ run, p50 of one client, median of per-round ratios. */
  p50Ratio: number;
  p50Target: { text: string; met: boolean };
  /**
   * Per server count (each approved: a lock file beside it): resident memory (target at 20
   * servers), launch → /readyz 200 (target at 20 servers), and launch → every server verified.
   */
  memory: {
    servers: number;
    rssMb: number;
    readyMs: number;
    verifiedMs: number;
    target: { text: string; met: boolean };
    readyTarget?: { text: string; met: boolean };
  }[];
}

const CLIENT_COUNTS = [1, 8];
const MEMORY_TARGET_MB = 150;
/** Issue 34's targets: serve's p50 against run's over stdio, and 20 servers ready. */
const P50_RATIO_TARGET = 1.3;
const READY_TARGET_MS = 3000;

interface Serving {
  child: ChildProcess;
  url: string;
  stop(): Promise<void>;
}

export async function measureServe(options: ServeBenchOptions): Promise<ServeFigures> {
  const { log } = options;
  const one = profilesFolder(options.profileText, 1);
  const serving = await startServe(options, one);
  const rounds: { serve: Record<number, Sample>; run: Sample; bare: Sample }[] = [];
  const bare = await startBareHttp();
  try {
    for (let round = 1; round <= options.rounds; round++) {
      log.info(
        `serve round ${round}/${options.rounds}: over HTTP with ${CLIENT_COUNTS.join(' and ')} client(s), then run over stdio`,
      );
      const serve: Record<number, Sample> = {};
      for (const clients of CLIENT_COUNTS) serve[clients] = await overHttp(serving.url, clients, options);
      rounds.push({ serve, run: await overStdio(options), bare: await overHttp(bare.url, 1, options, '/mcp') });
    }
  } finally {
    await bare.stop();
    await serving.stop();
    rmSync(one, { recursive: true, force: true });
  }
  const memory: ServeFigures['memory'] = [];
  for (const servers of options.scale) {
    log.info(`serve memory: ${servers} server(s) in one process`);
    memory.push(await measureMemory(options, servers));
  }
  const stat = (values: number[]) => ({ median: median(values), spread: spread(values) });
  const p50Ratio = median(rounds.map((r) => r.serve[1]!.p50 / r.run.p50));
  return {
    calls: CLIENT_COUNTS.map((clients) => ({
      clients,
      p50Ms: stat(rounds.map((r) => r.serve[clients]!.p50)),
      p99Ms: stat(rounds.map((r) => r.serve[clients]!.p99)),
      callsPerSecond: stat(rounds.map((r) => r.serve[clients]!.perSecond)),
    })),
    bareHttp: {
      p50Ms: stat(rounds.map((r) => r.bare.p50)),
      callsPerSecond: stat(rounds.map((r) => r.bare.perSecond)),
    },
    run: {
      p50Ms: stat(rounds.map((r) => r.run.p50)),
      p99Ms: stat(rounds.map((r) => r.run.p99)),
      callsPerSecond: stat(rounds.map((r) => r.run.perSecond)),
    },
    p50Ratio,
    p50Target: { text: `≤ ${P50_RATIO_TARGET} × run`, met: p50Ratio <= P50_RATIO_TARGET },
    memory,
  };
}

export function formatServe(figures: ServeFigures): string {
  const f = (s: { median: number; spread: number }, digits = 2) =>
    `${s.median.toFixed(digits)} ±${s.spread.toFixed(digits)}`;
  const lines = [
    'hintbox serve (filesystem server, read_text_file; streamable HTTP on loopback)',
    `${'CLIENTS'.padEnd(22)}${'P50 MS'.padEnd(16)}${'P99 MS'.padEnd(16)}CALLS/S`,
    ...figures.calls.map(
      (c) =>
        `${`serve, ${c.clients}`.padEnd(22)}${f(c.p50Ms).padEnd(16)}${f(c.p99Ms).padEnd(16)}${f(c.callsPerSecond, 0)}`,
    ),
    `${'run (stdio), 1'.padEnd(22)}${f(figures.run.p50Ms).padEnd(16)}${f(figures.run.p99Ms).padEnd(16)}${f(figures.run.callsPerSecond, 0)}`,
    `${'SDK HTTP alone, 1'.padEnd(22)}${f(figures.bareHttp.p50Ms).padEnd(16)}${''.padEnd(16)}${f(figures.bareHttp.callsPerSecond, 0)}`,
    `serve ÷ run, p50 of one client: ${figures.p50Ratio.toFixed(2)}×, target ${figures.p50Target.text}: ${figures.p50Target.met ? 'met' : 'MISSED'} (SDK HTTP alone: a trivial tool, no hintbox, no sandbox)`,
    '',
    `${'SERVERS'.padEnd(10)}${'SERVE RSS MB'.padEnd(16)}${'READY MS'.padEnd(12)}${'VERIFIED MS'.padEnd(14)}TARGET`,
    ...figures.memory.map(
      (m) =>
        `${String(m.servers).padEnd(10)}${m.rssMb.toFixed(0).padEnd(16)}${m.readyMs.toFixed(0).padEnd(12)}${m.verifiedMs.toFixed(0).padEnd(14)}${[
          m.target,
          m.readyTarget,
        ]
          .flatMap((t) => (t ? [`${t.text}: ${t.met ? 'met' : 'MISSED'}`] : []))
          .join('; ')}`,
    ),
  ];
  return lines.join('\n');
}

interface Sample {
  p50: number;
  p99: number;
  perSecond: number;
}

/** `clients` SDK clients at once, each calling in turn; the calls are split over them. */
async function overHttp(url: string, clients: number, options: ServeBenchOptions, at = '/mcp/fs-1'): Promise<Sample> {
  const connected = await Promise.all(
    Array.from({ length: clients }, async () => {
      const client = new Client({ name: 'hintbox-bench', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${url}${at}`)));
      return client;
    }),
  );
  try {
    return await timedCalls(connected, options);
  } finally {
    await Promise.all(
      connected.map(async (client) => {
        await (client.transport as StreamableHTTPClientTransport).terminateSession().catch(() => undefined);
        await client.close();
      }),
    );
  }
}

async function overStdio(options: ServeBenchOptions): Promise<Sample> {
  const folder = profilesFolder(options.profileText, 1);
  const transport = new StdioClientTransport({
    command: options.hintboxBin,
    args: ['run', path.join(folder, 'fs-1.yaml')],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...options.env },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'hintbox-bench', version: '1.0.0' });
  await client.connect(transport);
  try {
    return await timedCalls([client], options);
  } finally {
    await client.close();
    rmSync(folder, { recursive: true, force: true });
  }
}

async function timedCalls(clients: Client[], options: ServeBenchOptions): Promise<Sample> {
  const call = (client: Client) =>
    client.callTool({ name: 'read_text_file', arguments: { path: '/workspace/file.txt' } });
  for (const client of clients) for (let i = 0; i < Math.ceil(options.warmup / clients.length); i++) await call(client);
  const samples: number[] = [];
  const each = Math.ceil(options.calls / clients.length);
  const t0 = performance.now();
  await Promise.all(
    clients.map(async (client) => {
      for (let i = 0; i < each; i++) {
        const start = performance.now();
        const result = (await call(client)) as { isError?: boolean };
        if (result.isError) throw new Error(`read_text_file failed under serve: ${JSON.stringify(result)}`);
        samples.push(performance.now() - start);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { p50: percentile(samples, 50), p99: percentile(samples, 99), perSecond: samples.length / seconds };
}

/**
 * serve with `servers` copies of the profile, each approved (a lock file beside it, as in
 * production), each used by one client once: launch → /readyz 200, launch → every server
 * verified (its state `ready` in /readyz), and serve's resident memory after the calls.
 */
async function measureMemory(options: ServeBenchOptions, servers: number): Promise<ServeFigures['memory'][number]> {
  const folder = profilesFolder(options.profileText, servers, true);
  approveEach(options, folder, servers);
  const t0 = performance.now();
  const serving = await startServe(options, folder);
  const readyMs = performance.now() - t0;
  try {
    await allVerified(serving.url);
    const verifiedMs = performance.now() - t0;
    for (let n = 1; n <= servers; n++) {
      const client = new Client({ name: 'hintbox-bench', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${serving.url}/mcp/fs-${n}`)));
      await client.callTool({ name: 'read_text_file', arguments: { path: '/workspace/file.txt' } });
      await (client.transport as StreamableHTTPClientTransport).terminateSession().catch(() => undefined);
      await client.close();
    }
    const rssMb = residentMb(serving.child.pid ?? -1);
    return {
      servers,
      rssMb,
      readyMs,
      verifiedMs,
      target: { text: `≤ ${MEMORY_TARGET_MB} MB at 20 servers`, met: servers !== 20 || rssMb <= MEMORY_TARGET_MB },
      ...(servers === 20
        ? { readyTarget: { text: `ready ≤ ${READY_TARGET_MS / 1000} s`, met: readyMs <= READY_TARGET_MS } }
        : {}),
    };
  } finally {
    await serving.stop();
    rmSync(folder, { recursive: true, force: true });
  }
}

/** `hintbox approve --all` of fs-1 (not timed), its lock file copied for the others (the same tools). */
function approveEach(options: ServeBenchOptions, folder: string, servers: number): void {
  execFileSync(options.hintboxBin, ['approve', path.join(folder, 'fs-1.yaml'), '--all', '--yes'], {
    env: { ...process.env, ...options.env },
    stdio: 'ignore',
  });
  const lock = JSON.parse(readFileSync(path.join(folder, 'fs-1.lock.json'), 'utf8')) as { server: string };
  for (let n = 2; n <= servers; n++) {
    writeFileSync(path.join(folder, `fs-${n}.lock.json`), JSON.stringify({ ...lock, server: `fs-${n}` }, null, 2));
  }
}

/** Until /readyz names every server `ready` (verified against its lock file), within 300 s. */
async function allVerified(url: string): Promise<void> {
  const deadline = Date.now() + 300_000;
  for (;;) {
    const answer = await fetch(`${url}/readyz`).catch(() => undefined);
    const body = (await answer?.json().catch(() => undefined)) as { servers?: Record<string, string> } | undefined;
    const states = Object.values(body?.servers ?? {});
    if (states.length > 0 && states.every((s) => s === 'ready')) return;
    if (Date.now() > deadline) throw new Error(`not every server was verified within 300 s: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A folder of `n` copies of the profile (fs-1 … fs-n). `readOnly`: the mount read-only, so each
 * server needs one sandbox (the memory figure is serve's own, not the engine's).
 */
function profilesFolder(profileText: string, n: number, readOnly = false): string {
  const folder = mkdtempSync(path.join(os.tmpdir(), 'hintbox-bench-serve-'));
  const profile = parse(profileText) as { name: string; mounts?: { mode?: string }[] };
  for (let i = 1; i <= n; i++) {
    const copy = { ...profile, name: `fs-${i}` };
    if (readOnly) copy.mounts = (profile.mounts ?? []).map((m) => ({ ...m, mode: 'ro' }));
    writeFileSync(path.join(folder, `fs-${i}.yaml`), stringify(copy));
  }
  return folder;
}

async function startServe(options: ServeBenchOptions, folder: string): Promise<Serving> {
  const child = spawn(options.hintboxBin, ['serve', folder, '--port', '0'], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...options.env, HINTBOX_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
  };
  const deadline = Date.now() + 300_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`hintbox serve exited ${child.exitCode}:\n${stderr}`);
    const url = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr)?.[1];
    if (url && (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200) return { child, url, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`hintbox serve was not ready within 300 s:\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

function residentMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

/** The transport baseline (`http-echo-server.ts`) in a process of its own. */
async function startBareHttp(): Promise<{ url: string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'http-echo-server.ts')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    let text = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const found = /listening on (\S+)/.exec(text)?.[1];
      if (found) resolve(found);
    });
    child.once('exit', (code) => reject(new Error(`the HTTP baseline exited ${code}: ${text}`)));
  });
  return {
    url,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}
