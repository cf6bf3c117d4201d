/**
 * Where `hintbox run`'s resident memory goes, after the bench's load: the figures the bench's
 * "resident memory of the launched process" is made of, read from /proc and from V8 inside the
 * process (a preloaded hook, memory-probe-hook.mjs), with the call latency and throughput of the
 * same round beside them, and a bare Node (the floor) for comparison.
 *
 *   npm run build && node --import tsx bench/memory-breakdown.ts --rounds 3
 *   node --import tsx bench/memory-breakdown.ts --variant 'lite=dist/hintbox.mjs:--max-semi-space-size=1 --lite-mode'
 *   node --import tsx bench/memory-breakdown.ts --snapshot /tmp/heap   # one heap snapshot per variant, last round
 *
 * A variant is `name=BIN` (the bin through its shebang) or `name=BIN:FLAGS` (node FLAGS BIN,
 * with the environment the bin's shebang sets: its node flags replaced; leading VAR=value words
 * add to that environment). Variants are interleaved round by round, as the
 * bench does, so drift on a shared machine hits each alike.
 */
import { execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { callsPerSecond } from './cpu-per-call.js';
import { CLOCK_TICKS_PER_SECOND, procStat } from './proc-stat.js';
import { settle, spawnServer, type Running } from './spawn-server.js';
import { median, percentile } from './stats.js';
import { connectDocker } from '../src/engine/docker/docker-connection.js';
import { ImageBuilder, IMAGES_DIR } from '../src/engine/docker/image-builder.js';
import { relocatedProfileText } from '../src/profile/relocate-profile.js';
import { createLogger } from '../src/util/logger.js';
import { toolArgs } from './tool-args.js';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const IMAGE = 'hintbox/server-filesystem:2026.8.31';
const HOOK = pathToFileURL(path.join(REPO, 'bench', 'memory-probe-hook.mjs')).href;
const MB = 1024 * 1024;

const { values } = toolArgs(
  'memory-breakdown',
  "Where hintbox run's resident memory goes after the bench's load, by part, beside a bare node; --variant name=BIN[:FLAGS] weighs node flags.",
  {
    options: {
      rounds: { type: 'string', default: '3' },
      'idle-ms': { type: 'string', default: '2000' },
      calls: { type: 'string', default: '1000' },
      warmup: { type: 'string', default: '200' },
      variant: { type: 'string', multiple: true },
      snapshot: { type: 'string' },
      live: { type: 'boolean', default: false },
    },
  },
);
const ROUNDS = Number(values.rounds);
/** How long after the load the idle reading is taken. */
const IDLE_WAIT_MS = Number(values['idle-ms']);
const CALLS = Number(values.calls);
const WARMUP = Number(values.warmup);

interface Variant {
  name: string;
  bin: string;
  /** Node's flags in place of the shebang's; undefined: the bin as a client launches it. */
  flags?: string[];
}

const variants: Variant[] = (values.variant ?? ['hintbox=dist/hintbox.mjs']).map((spec) => {
  const match = /^([^=]+)=([^:]+)(?::(.*))?$/.exec(spec);
  if (!match) throw new Error(`--variant ${spec}: expected name=BIN or name=BIN:FLAGS`);
  const [, name, bin, flags] = match as unknown as [string, string, string, string | undefined];
  return {
    name,
    bin: path.resolve(bin),
    ...(flags !== undefined ? { flags: flags.split(/\s+/).filter(Boolean) } : {}),
  };
});

/** One reading of a process: /proc and, through the hook, V8. */
interface Reading {
  rss: number;
  rssAnon: number;
  rssFile: number;
  v8: ProbeStats;
}

interface ProbeStats {
  memoryUsage: NodeJS.MemoryUsage;
  heap: { total_physical_size: number; used_heap_size: number; malloced_memory: number; total_heap_size: number };
  spaces: { space_name: string; space_size: number; space_used_size: number; physical_space_size: number }[];
  code: { code_and_metadata_size: number; bytecode_and_metadata_size: number; external_script_source_size: number };
  /** V8's heap in use after a full collection (`--live`). */
  liveHeap?: number;
  /** process.moduleLoadList: Node's own modules and bindings loaded so far. */
  builtins?: string[];
}

interface RoundFigures {
  start: Reading;
  loaded: Reading;
  /** {@link IDLE_WAIT_MS} idle after the load: what hintbox (and V8's memory reducer, ~8 s after the load) gives back once idle. */
  idle: Reading;
  p50: number;
  throughput: Record<number, number>;
  /** CPU time of the measured process per call at 32 in flight (µs; counted by /proc, load moves it little). */
  cpuUs: number;
}

/** CPU time (user + system) of a process so far, in µs. */
function cpuUs(pid: number): number {
  const { fields } = procStat(pid);
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS_PER_SECOND;
}

function procKb(pid: number, field: string): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
}

/** The VAR=value words of a bin's `#!/usr/bin/env -S` line: what its flags' variants run with too. */
function shebangEnvironment(bin: string): Record<string, string> {
  const first = readFileSync(bin, 'utf8').split('\n', 1)[0] ?? '';
  return Object.fromEntries([...first.matchAll(/\b([A-Z_]+)=(\S+)/g)].map((m) => [m[1] as string, m[2] as string]));
}

/** Signals the hook and waits for its file; then /proc, read right after. */
async function read(pid: number, out: string): Promise<Reading> {
  rmSync(out, { force: true });
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 600 && !existsSync(out); i++) await new Promise((r) => setTimeout(r, 50));
  const v8 = JSON.parse(readFileSync(out, 'utf8')) as ProbeStats;
  return { rss: procKb(pid, 'VmRSS'), rssAnon: procKb(pid, 'RssAnon'), rssFile: procKb(pid, 'RssFile'), v8 };
}

async function measure(
  variant: Variant,
  profile: string,
  env: Record<string, string>,
  scratch: string,
  snapshot?: string,
): Promise<RoundFigures> {
  const out = path.join(scratch, `probe-${variant.name}.json`);
  const probeEnv = {
    ...env,
    NODE_OPTIONS: `--import=${HOOK}`,
    HINTBOX_MEMORY_PROBE_OUT: out,
    ...(values.live ? { HINTBOX_MEMORY_PROBE_LIVE: '1' } : {}),
    ...(snapshot ? { HINTBOX_MEMORY_PROBE_SNAPSHOT: snapshot } : {}),
  };
  // FLAGS may start with VAR=value words: the environment of that variant (as `env -S` would set it).
  const envWords = (variant.flags ?? []).filter((f) => /^[A-Z_]+=/.test(f));
  const nodeFlags = (variant.flags ?? []).filter((f) => !/^[A-Z_]+=/.test(f));
  const running: Running = variant.flags
    ? await spawnServer('/workspace', 'node', [...nodeFlags, variant.bin, 'run', profile], {
        ...probeEnv,
        ...shebangEnvironment(variant.bin),
        ...Object.fromEntries(envWords.map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)])),
      })
    : await spawnServer('/workspace', variant.bin, ['run', profile], probeEnv);
  try {
    await running.client.listTools();
    const call = () => running.client.callTool({ name: 'list_allowed_directories', arguments: {} });
    await call();
    await running.client.callTool({
      name: 'write_file',
      arguments: { path: `${running.workspace}/first.txt`, content: 'first\n' },
    });
    const start = await read(running.pid, out);
    // The bench's load, in its order: warm-up, latency, throughput at 1, 8 and 32, the CPU figure.
    for (let i = 0; i < WARMUP; i++) await call();
    const samples: number[] = [];
    for (let i = 0; i < CALLS; i++) {
      const t = performance.now();
      await call();
      samples.push(performance.now() - t);
    }
    const throughput: Record<number, number> = {};
    for (const inFlight of [1, 8, 32]) throughput[inFlight] = await callsPerSecond(call, inFlight, CALLS);
    const before = cpuUs(running.pid);
    await callsPerSecond(call, 32, CALLS * 5);
    const spent = (cpuUs(running.pid) - before) / (CALLS * 5);
    const loaded = await read(running.pid, out);
    await new Promise((r) => setTimeout(r, IDLE_WAIT_MS));
    const idle = await read(running.pid, out);
    return { start, loaded, idle, p50: percentile(samples, 50), throughput, cpuUs: spent };
  } finally {
    await running.close();
  }
}

/** A bare Node with the bin's flags and one arena, idle: the floor under any Node program. */
async function floor(scratch: string): Promise<Reading> {
  const out = path.join(scratch, 'probe-floor.json');
  const child = spawn(
    'node',
    ['--max-semi-space-size=1', '--optimize-for-size', '--bytecode-old-age=1', '-e', 'setInterval(() => {}, 1000)'],
    {
      env: {
        PATH: process.env.PATH ?? '',
        MALLOC_ARENA_MAX: '1',
        NODE_OPTIONS: `--import=${HOOK}`,
        HINTBOX_MEMORY_PROBE_OUT: out,
      },
      stdio: 'ignore',
    },
  );
  try {
    await new Promise((r) => setTimeout(r, 1500));
    return await read(child.pid ?? -1, out);
  } finally {
    child.kill();
  }
}

function rows(reading: Reading): [string, number][] {
  const { v8 } = reading;
  const committed = v8.heap.total_physical_size;
  const out: [string, number][] = [
    ['VmRSS', reading.rss],
    ['  RssFile (mapped files: the node binary, libraries)', reading.rssFile],
    ['  RssAnon (heap, malloc, stacks)', reading.rssAnon],
    ['V8 heap committed (physical)', committed],
    ['V8 heap used', v8.heap.used_heap_size],
    ['V8 heap live (after a full collection; --live)', v8.liveHeap ?? NaN],
  ];
  for (const s of v8.spaces) {
    out.push([`  ${s.space_name}: physical`, s.physical_space_size]);
    out.push([`  ${s.space_name}: used`, s.space_used_size]);
  }
  out.push(
    ['V8 code and metadata', v8.code.code_and_metadata_size],
    ['V8 bytecode and metadata', v8.code.bytecode_and_metadata_size],
    ['V8 external script source', v8.code.external_script_source_size],
    ['V8 malloced (zone, outside the heap)', v8.heap.malloced_memory],
    ['external (Buffers, strings outside the heap)', v8.memoryUsage.external],
    ['  of it array buffers', v8.memoryUsage.arrayBuffers],
    ['RssAnon − V8 committed (malloc, stacks, the rest)', reading.rssAnon - committed],
  );
  return out;
}

function table(title: string, columns: string[], readings: Reading[][]): string {
  const names = rows(readings[0]?.[0] as Reading).map(([n]) => n);
  const lines = [`${title.padEnd(56)}${columns.map((c) => c.padStart(12)).join('')}  (MB, median over rounds)`];
  names.forEach((name, i) => {
    const cells = readings.map((rs) => median(rs.map((r) => rows(r)[i]?.[1] ?? NaN)) / MB);
    lines.push(`${name.padEnd(56)}${cells.map((c) => c.toFixed(2).padStart(12)).join('')}`);
  });
  return lines.join('\n');
}

/** How many of Node's own modules each variant had loaded, and those that differ from the first variant's. */
function builtinsLoaded(names: string[], lists: string[][]): string[] {
  const modules = lists.map((l) => new Set(l.filter((m) => m.startsWith('NativeModule '))));
  const first = modules[0] ?? new Set<string>();
  const strip = (m: string) => m.slice('NativeModule '.length);
  return [
    `${"Node's own modules loaded".padEnd(56)}${modules.map((m) => String(m.size).padStart(12)).join('')}`,
    ...names.slice(1).map((name, i) => {
      const m = modules[i + 1] ?? new Set<string>();
      const gone = [...first].filter((x) => !m.has(x)).map(strip);
      const added = [...m].filter((x) => !first.has(x)).map(strip);
      return `  ${name} against ${names[0]}: without ${gone.join(', ') || '-'}; with ${added.join(', ') || '-'}`;
    }),
  ];
}

async function main(): Promise<void> {
  const { docker } = await connectDocker();
  const log = createLogger('info', (line) => process.stderr.write(line + '\n'), { prefix: 'memory' });
  await new ImageBuilder({ docker, log }).ensure(IMAGE, path.join(IMAGES_DIR, 'server-filesystem'));
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'hintbox-memory-'));
  const workspace = path.join(scratch, 'workspace');
  const state = path.join(scratch, 'state');
  try {
    mkdirSync(workspace);
    mkdirSync(state);
    writeFileSync(path.join(workspace, 'file.txt'), 'benchmark\n');
    if (process.getuid?.() === 0) {
      chownSync(workspace, 10001, 10001);
      chownSync(path.join(workspace, 'file.txt'), 10001, 10001);
    }
    // As the bench runs it: trusted, write_file unasked, approved into a lock file first.
    const profile = path.join(state, 'filesystem-trusted.yaml');
    const text = relocatedProfileText(path.join(REPO, 'profiles/filesystem.yaml')).replace(
      /^trust: untrusted$/m,
      'trust: trusted',
    );
    writeFileSync(profile, text + '\ntools:\n  write_file:\n    approval: allow\n');
    const env = { WORKSPACE: workspace, HINTBOX_LOG_LEVEL: 'warn', HINTBOX_STATE_DIR: state };
    execFileSync(variants[0]?.bin ?? '', ['approve', profile, '--all', '--yes'], {
      env: { ...process.env, ...env },
      stdio: 'ignore',
    });
    const results = new Map<string, RoundFigures[]>(variants.map((v) => [v.name, []]));
    const floors: Reading[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      floors.push(await floor(scratch));
      for (const variant of variants) {
        process.stderr.write(`memory: round ${round}/${ROUNDS}: ${variant.name}\n`);
        const snapshot =
          values.snapshot && round === ROUNDS ? `${values.snapshot}-${variant.name}.heapsnapshot` : undefined;
        results.get(variant.name)?.push(await measure(variant, profile, env, scratch, snapshot));
        await settle(docker, IMAGE);
      }
    }
    const names = variants.map((v) => v.name);
    const all = names.map((n) => results.get(n) ?? []);
    const load = os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
    process.stdout.write(
      [
        `${ROUNDS} round(s), ${CALLS} calls per figure, load average ${load}`,
        '',
        table(
          'after the bench load',
          names,
          all.map((rs) => rs.map((r) => r.loaded)),
        ),
        '',
        table(
          `idle ${IDLE_WAIT_MS / 1000} s after the load`,
          names,
          all.map((rs) => rs.map((r) => r.idle)),
        ),
        '',
        table(
          'after start (first calls answered)',
          names,
          all.map((rs) => rs.map((r) => r.start)),
        ),
        '',
        table('bare node, idle (the floor)', ['node'], [floors]),
        '',
        `${'calls'.padEnd(56)}${names.map((c) => c.padStart(12)).join('')}`,
        `${'latency p50 (ms)'.padEnd(56)}${all
          .map((rs) =>
            median(rs.map((r) => r.p50))
              .toFixed(3)
              .padStart(12),
          )
          .join('')}`,
        `${'CPU of the measured process per call, 32 in flight (µs)'.padEnd(56)}${all
          .map((rs) =>
            median(rs.map((r) => r.cpuUs))
              .toFixed(1)
              .padStart(12),
          )
          .join('')}`,
        ...builtinsLoaded(
          names,
          all.map((rs) => rs.at(-1)?.loaded.v8.builtins ?? []),
        ),
        ...[1, 8, 32].map(
          (n) =>
            `${`throughput, ${n} in flight (calls/s)`.padEnd(56)}${all
              .map((rs) =>
                median(rs.map((r) => r.throughput[n] ?? NaN))
                  .toFixed(0)
                  .padStart(12),
              )
              .join('')}`,
        ),
      ].join('\n') + '\n',
    );
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`memory: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
