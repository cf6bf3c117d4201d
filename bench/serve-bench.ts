/**
 * `hintbox serve` in the benchmark: calls over streamable HTTP against `hintbox run` over stdio
 * (the baseline: the same server, the same gateway, another transport), in the same rounds,
 * and serve's resident memory with 1, 5 and 20 servers in one process.
 *
 * Each round times, one after the other (the order reversed every other round, so drift on a
 * shared machine hits each alike): serve with the SDK's HTTP client (1 and 8 clients), serve
 * with a lean `node:http` client (lean-http-client.ts: serve's own cost, without undici's
 * `fetch`), `hintbox run` with the SDK's stdio client, and the SDK's HTTP client against the
 * SDK's own server (no hintbox: what the SDK's HTTP transport costs by itself). serve runs with
 * a tokens file: every request carries a bearer token and is checked.
 *
 * The target's figure (serve ÷ run) is measured apart from these, paired: serve and `hintbox
 * run` each called by a client of the same weight (raw-clients.ts), in alternating batches of
 * 200 calls within each round (serve-paired.ts), so that what the shared machine does meanwhile
 * falls on both alike, and neither client's own cost is counted as hintbox's.
 */
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { rmSync } from 'node:fs';
import type { Logger } from '../src/util/logger.js';
import { LeanHttpClient } from './lean-http-client.js';
import {
  allVerified,
  approveEach,
  benchToken,
  profilesFolder,
  residentMb,
  startBareHttp,
  startServe,
} from './serve-processes.js';
import { checked, cpuUs, pairedRaw, READ, type Sample } from './serve-paired.js';
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

type Stat = { median: number; spread: number };

/** One way of calling, over the rounds: p50/p99 of one call, calls per second, CPU per call. */
export interface CallFigures {
  p50Ms: Stat;
  p99Ms: Stat;
  callsPerSecond: Stat;
  /** CPU time (user + system) per call of the process that answers (serve, run, the SDK's server), µs. */
  serverCpuUs: Stat;
  /** CPU time per call of the client (the bench's own process), µs. */
  clientCpuUs: Stat;
}

export interface ServeFigures {
  /** serve with the SDK's HTTP client, per client count. */
  calls: ({ clients: number } & CallFigures)[];
  /** serve with the lean `node:http` client, one client: serve's own cost (the target's figure). */
  lean: CallFigures;
  /** The SDK's streamable HTTP alone (its client, its server, a trivial tool, no hintbox), one client. */
  bareHttp: CallFigures;
  /** `hintbox run` over stdio (the SDK's stdio client), one client. */
  run: CallFigures;
  /** serve and run each with a raw client, in alternating batches (paired): the target's figure. */
  paired: { serve: CallFigures; run: CallFigures };
  /** serve ÷ run of the paired calls, p50 of one client, median of per-round ratios: the target's figure. */
  p50Ratio: number;
  /** Each round's paired ratio, in order. */
  pairedRatios: number[];
  p50Target: { text: string; met: boolean };
  /** serve (lean client) ÷ run (the SDK's stdio client): information, no target (the clients' weights differ). */
  leanP50Ratio: number;
  /** serve (the SDK's HTTP client) ÷ run, and the SDK's HTTP alone ÷ run: information, no target. */
  sdkP50Ratio: number;
  bareP50Ratio: number;
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

/** One call of a connected client: its tool result. */
type Call = () => Promise<unknown>;

export async function measureServe(options: ServeBenchOptions): Promise<ServeFigures> {
  const { log } = options;
  const one = profilesFolder(options.profileText, 1);
  const tokens = benchToken();
  const serving = await startServe(options, one, tokens.file);
  const servePid = serving.child.pid ?? -1;
  const endpoint = `${serving.url}/mcp/fs-1`;
  const rounds: {
    sdk: Record<number, Sample>;
    lean: Sample;
    run: Sample;
    bare: Sample;
    paired: { serve: Sample; run: Sample };
  }[] = [];
  const bare = await startBareHttp();
  try {
    for (let round = 1; round <= options.rounds; round++) {
      log.info(
        `serve round ${round}/${options.rounds}: serve with the SDK's HTTP client (${CLIENT_COUNTS.join(' and ')} clients) and a lean node:http client, run over stdio, the SDK's HTTP alone`,
      );
      const sdk: Record<number, Sample> = {};
      let lean: Sample | undefined;
      let run: Sample | undefined;
      let bareSample: Sample | undefined;
      let paired: { serve: Sample; run: Sample } | undefined;
      const steps: (() => Promise<void>)[] = [
        async () => void (paired = await pairedRaw(endpoint, servePid, options, tokens.token)),
        async () => {
          for (const clients of CLIENT_COUNTS)
            sdk[clients] = await overSdkHttp(endpoint, clients, servePid, options, tokens.token);
        },
        async () => void (lean = await overLeanHttp(endpoint, servePid, options, tokens.token)),
        async () => void (run = await overStdio(options)),
        async () => void (bareSample = await overSdkHttp(`${bare.url}/mcp`, 1, bare.pid, options)),
      ];
      if (round % 2 === 0) steps.reverse();
      for (const step of steps) await step();
      rounds.push({ sdk, lean: lean!, run: run!, bare: bareSample!, paired: paired! });
    }
  } finally {
    await bare.stop();
    await serving.stop();
    rmSync(one, { recursive: true, force: true });
    rmSync(tokens.folder, { recursive: true, force: true });
  }
  const memory: ServeFigures['memory'] = [];
  for (const servers of options.scale) {
    log.info(`serve memory: ${servers} server(s) in one process`);
    memory.push(await measureMemory(options, servers));
  }
  const stat = (values: number[]): Stat => ({ median: median(values), spread: spread(values) });
  const figures = (pick: (r: (typeof rounds)[number]) => Sample): CallFigures => ({
    p50Ms: stat(rounds.map((r) => pick(r).p50)),
    p99Ms: stat(rounds.map((r) => pick(r).p99)),
    callsPerSecond: stat(rounds.map((r) => pick(r).perSecond)),
    serverCpuUs: stat(rounds.map((r) => pick(r).serverCpuUs)),
    clientCpuUs: stat(rounds.map((r) => pick(r).clientCpuUs)),
  });
  const ratio = (pick: (r: (typeof rounds)[number]) => Sample) => median(rounds.map((r) => pick(r).p50 / r.run.p50));
  const pairedRatios = rounds.map((r) => r.paired.serve.p50 / r.paired.run.p50);
  const p50Ratio = median(pairedRatios);
  return {
    calls: CLIENT_COUNTS.map((clients) => ({ clients, ...figures((r) => r.sdk[clients]!) })),
    lean: figures((r) => r.lean),
    bareHttp: figures((r) => r.bare),
    run: figures((r) => r.run),
    paired: { serve: figures((r) => r.paired.serve), run: figures((r) => r.paired.run) },
    p50Ratio,
    pairedRatios,
    p50Target: { text: `≤ ${P50_RATIO_TARGET} × run`, met: p50Ratio <= P50_RATIO_TARGET },
    leanP50Ratio: ratio((r) => r.lean),
    sdkP50Ratio: ratio((r) => r.sdk[1]!),
    bareP50Ratio: ratio((r) => r.bare),
    memory,
  };
}

/** `clients` SDK clients at once over streamable HTTP, each calling in turn; the calls are split over them. */
async function overSdkHttp(
  url: string,
  clients: number,
  serverPid: number,
  options: ServeBenchOptions,
  token?: string,
): Promise<Sample> {
  const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
  const connected = await Promise.all(
    Array.from({ length: clients }, async () => {
      const client = new Client({ name: 'hintbox-bench', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(url), requestInit ? { requestInit } : {}));
      return client;
    }),
  );
  try {
    return await timedCalls(
      connected.map((client) => () => client.callTool(READ)),
      serverPid,
      options,
    );
  } finally {
    await Promise.all(
      connected.map(async (client) => {
        await (client.transport as StreamableHTTPClientTransport).terminateSession().catch(() => undefined);
        await client.close();
      }),
    );
  }
}

/** One lean `node:http` client (one kept-alive socket) over streamable HTTP. */
async function overLeanHttp(
  url: string,
  serverPid: number,
  options: ServeBenchOptions,
  token: string,
): Promise<Sample> {
  const client = await LeanHttpClient.connect(url, token);
  try {
    return await timedCalls([() => client.callTool(READ.name, READ.arguments)], serverPid, options);
  } finally {
    await client.close();
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
    return await timedCalls([() => client.callTool(READ)], transport.pid ?? -1, options);
  } finally {
    await client.close();
    rmSync(folder, { recursive: true, force: true });
  }
}

async function timedCalls(calls: Call[], serverPid: number, options: ServeBenchOptions): Promise<Sample> {
  for (const call of calls) for (let i = 0; i < Math.ceil(options.warmup / calls.length); i++) checked(await call());
  const samples: number[] = [];
  const each = Math.ceil(options.calls / calls.length);
  const server0 = cpuUs(serverPid);
  const client0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    calls.map(async (call) => {
      for (let i = 0; i < each; i++) {
        const start = performance.now();
        const result = await call();
        samples.push(performance.now() - start);
        checked(result);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const client = process.cpuUsage(client0);
  return {
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    perSecond: samples.length / seconds,
    serverCpuUs: (cpuUs(serverPid) - server0) / samples.length,
    clientCpuUs: (client.user + client.system) / samples.length,
  };
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
      checked(await client.callTool(READ));
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
