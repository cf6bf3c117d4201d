/**
 * The serve bench's calls (serve-bench.ts): what one call must answer, and the target's figure,
 * serve ÷ run paired: each called by a client of the same weight, in alternating batches.
 */
import path from 'node:path';
import { rmSync } from 'node:fs';
import { LeanHttpClient } from './lean-http-client.js';
import { procStat } from './proc-stat.js';
import { RawHttpClient, RawStdioClient } from './raw-clients.js';
import { profilesFolder } from './serve-processes.js';
import { percentile } from './stats.js';

/** Calls per batch of the paired figure: short enough that drift hits both ways alike, long enough to time. */
export const PAIRED_BATCH = 200;
/** What read_text_file of `/workspace/file.txt` answers (run-bench.ts writes it; the SDK's server echoes it). */
const FILE_TEXT = 'benchmark\n';
export const READ = { name: 'read_text_file', arguments: { path: '/workspace/file.txt' } };

/** What the paired figure needs of the bench's options (serve-bench.ts's `ServeBenchOptions`). */
export interface PairedOptions {
  hintboxBin: string;
  profileText: string;
  env: Record<string, string>;
  calls: number;
  warmup: number;
}

export interface Sample {
  p50: number;
  p99: number;
  perSecond: number;
  serverCpuUs: number;
  clientCpuUs: number;
}

/** The result must be the file's text, not an error. */
export function checked(result: unknown): void {
  const { isError, content } = (result ?? {}) as { isError?: boolean; content?: { text?: unknown }[] };
  if (isError || content?.[0]?.text !== FILE_TEXT)
    throw new Error(`read_text_file did not answer the file's text: ${JSON.stringify(result).slice(0, 300)}`);
}

/** CPU time (user + system) of a process so far, µs (/proc's 10 ms ticks). */
export function cpuUs(pid: number): number {
  const { fields } = procStat(pid);
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/**
 * serve and a fresh `hintbox run`, each called by a raw client (raw-clients.ts: the least its
 * transport needs, so that neither client's weight is counted as hintbox's), in alternating
 * batches of {@link PAIRED_BATCH}: the warm-up, then the timed calls. Which way goes first swaps
 * every pair (what one way leaves behind, a collection or a flush, falls on each alike), and each
 * process's CPU is read over the whole timed span (its work after its own batch is its own).
 * serve's client rides on a session the lean client opens (initialize is not the raw client's),
 * and connects again when serve has closed an idle kept-alive connection.
 */
export async function pairedRaw(
  endpoint: string,
  servePid: number,
  options: PairedOptions,
  token: string,
): Promise<{ serve: Sample; run: Sample }> {
  const folder = profilesFolder(options.profileText, 1);
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...options.env };
  let lean: LeanHttpClient | undefined;
  let overHttp: RawHttpClient | undefined;
  let overStdio: RawStdioClient | undefined;
  try {
    overStdio = await RawStdioClient.start(options.hintboxBin, ['run', path.join(folder, 'fs-1.yaml')], env);
    const stdio = overStdio;
    const opened = await LeanHttpClient.connect(endpoint, token);
    lean = opened;
    const overServe = async (name: string, args: Record<string, unknown>) => {
      if (!overHttp || overHttp.closed) overHttp = await RawHttpClient.connect(endpoint, { ...opened.session, token });
      return overHttp.callTool(name, args);
    };
    const ways: PairedWay[] = [
      { call: overServe, pid: servePid, samples: [], ms: 0, clientCpuUs: 0 },
      { call: (name, args) => stdio.callTool(name, args), pid: stdio.pid, samples: [], ms: 0, clientCpuUs: 0 },
    ];
    // A few calls (a smoke run) make one short batch each.
    const plan = (calls: number) => {
      const size = Math.max(1, Math.min(PAIRED_BATCH, calls));
      return { size, count: Math.ceil(calls / size) };
    };
    const inTurn = (b: number) => (b % 2 === 0 ? ways : [...ways].reverse());
    const warmup = plan(options.warmup);
    for (let b = 0; b < warmup.count; b++) for (const way of inTurn(b)) await batch(way, warmup.size, false);
    const timed = plan(options.calls);
    const cpu0 = ways.map((way) => cpuUs(way.pid));
    for (let b = 0; b < timed.count; b++) for (const way of inTurn(b)) await batch(way, timed.size, true);
    const [serve, run] = ways.map((way, i) => sampleOf(way, cpuUs(way.pid) - (cpu0[i] as number))) as [Sample, Sample];
    return { serve, run };
  } finally {
    overHttp?.close();
    try {
      await overStdio?.close();
      await lean?.close();
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  }
}

/** One way of the paired figure: its call, its process, and what its timed batches took. */
interface PairedWay {
  call: (name: string, args: Record<string, unknown>) => Promise<unknown>;
  pid: number;
  samples: number[];
  ms: number;
  clientCpuUs: number;
}

/** One batch of `size` calls of a way, each answer checked; timed ones add to its figures. */
async function batch(way: PairedWay, size: number, timed: boolean): Promise<void> {
  const client0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < size; i++) {
    const start = performance.now();
    const result = await way.call(READ.name, READ.arguments);
    if (timed) way.samples.push(performance.now() - start);
    checked(result);
  }
  if (!timed) return;
  const client = process.cpuUsage(client0);
  way.ms += performance.now() - t0;
  way.clientCpuUs += client.user + client.system;
}

/** A paired way's figures; `serverCpuUs`: its process's CPU over the whole timed span. */
function sampleOf(way: PairedWay, serverCpuUs: number): Sample {
  return {
    p50: percentile(way.samples, 50),
    p99: percentile(way.samples, 99),
    perSecond: way.samples.length / (way.ms / 1000),
    serverCpuUs: serverCpuUs / way.samples.length,
    clientCpuUs: way.clientCpuUs / way.samples.length,
  };
}
