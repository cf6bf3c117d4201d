/**
 * Two builds' `hintbox run` side by side on the bench's steady-state calls (the trusted
 * filesystem profile, `list_allowed_directories`): p50 latency at 1 in flight and throughput at
 * 1, 8 and 32 in flight, the builds alternating round by round (a, b, a, b, …) so that the load
 * of a shared machine hits both alike; b ÷ a taken pair by pair, then the median.
 *
 *   node --import tsx bench/ab-steady.ts --a <checkout> --b <checkout> [--rounds 5] [--calls 1000]
 */
import { execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { relocatedProfileText } from '../src/profile/relocate-profile.js';
import { callsPerSecond } from './cpu-per-call.js';
import { spawnServer } from './spawn-server.js';
import { median, percentile } from './stats.js';
import { toolArgs } from './tool-args.js';

const { values } = toolArgs(
  'ab-steady',
  "Two builds' hintbox run side by side (--a and --b: checkouts): p50 and throughput at 1, 8 and 32 in flight, alternating round by round.",
  {
    options: {
      a: { type: 'string' },
      b: { type: 'string' },
      rounds: { type: 'string', default: '5' },
      calls: { type: 'string', default: '1000' },
      warmup: { type: 'string', default: '8000' },
    },
  },
);
const calls = Number(values.calls);
const CONCURRENCY = [1, 8, 32];

interface Figures {
  p50: number;
  throughput: number[];
  /** hintbox's process per call at 1 in flight: µs on a CPU, run slices (wake-ups). */
  cpuUs: number;
  slices: number;
}

/** Summed over the threads of `pid`: ns on a CPU and run slices (/proc/PID/task/TID/schedstat). */
function schedOf(pid: number): [number, number] {
  let cpu = 0;
  let slices = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const f = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').trim().split(' ').map(Number);
      cpu += f[0] ?? 0;
      slices += f[2] ?? 0;
    } catch {
      // the thread ended
    }
  }
  return [cpu, slices];
}

async function measure(repo: string): Promise<Figures> {
  const workspace = mkdtempSync(path.join(os.tmpdir(), 'hintbox-ab-'));
  const state = mkdtempSync(path.join(os.tmpdir(), 'hintbox-ab-state-'));
  const bin = path.join(repo, 'dist', 'hintbox.mjs');
  const profile = path.join(state, 'filesystem-trusted.yaml');
  const text = relocatedProfileText(path.join(repo, 'profiles/filesystem.yaml'));
  writeFileSync(profile, text.replace(/^trust: untrusted$/m, 'trust: trusted'));
  if (process.getuid?.() === 0) chownSync(workspace, 10001, 10001);
  const env = { WORKSPACE: workspace, HINTBOX_LOG_LEVEL: 'warn', HINTBOX_STATE_DIR: state };
  // Builds from before `approve --yes` approve without asking when stdin is not a terminal.
  const approve = (flags: string[]) =>
    execFileSync(bin, ['approve', profile, ...flags], { env: { ...process.env, ...env }, stdio: 'ignore' });
  try {
    approve(['--all', '--yes']);
  } catch {
    approve(['--all']);
  }
  const running = await spawnServer('/workspace', bin, ['run', profile], env);
  try {
    const call = () => running.client.callTool({ name: 'list_allowed_directories', arguments: {} });
    for (let i = 0; i < Number(values.warmup); i++) await call();
    const samples: number[] = [];
    const before = schedOf(running.pid);
    for (let i = 0; i < calls; i++) {
      const s = performance.now();
      await call();
      samples.push(performance.now() - s);
    }
    const after = schedOf(running.pid);
    const throughput: number[] = [];
    for (const c of CONCURRENCY) throughput.push(await callsPerSecond(call, c, calls));
    return {
      p50: percentile(samples, 50),
      throughput,
      cpuUs: (after[0] - before[0]) / calls / 1000,
      slices: (after[1] - before[1]) / calls,
    };
  } finally {
    await running.close();
    rmSync(workspace, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
    await new Promise((r) => setTimeout(r, 1500)); // its sandboxes removed
  }
}

async function main(): Promise<void> {
  const a = path.resolve(values.a ?? '.');
  const b = path.resolve(values.b ?? '.');
  const ratios: number[][] = [];
  for (let round = 1; round <= Number(values.rounds); round++) {
    const fa = await measure(a);
    const fb = await measure(b);
    const load = os.loadavg()[0]!.toFixed(1);
    const row = [fb.p50 / fa.p50, ...fb.throughput.map((t, i) => t / fa.throughput[i]!), fb.cpuUs / fa.cpuUs];
    ratios.push(row);
    process.stdout.write(
      `round ${round} (load ${load}): a p50 ${fa.p50.toFixed(3)} ms, CPU ${fa.cpuUs.toFixed(0)} µs ${fa.slices.toFixed(2)} slices, calls/s ${fa.throughput.map((t) => t.toFixed(0)).join(' / ')}; ` +
        `b p50 ${fb.p50.toFixed(3)} ms, CPU ${fb.cpuUs.toFixed(0)} µs ${fb.slices.toFixed(2)} slices, calls/s ${fb.throughput.map((t) => t.toFixed(0)).join(' / ')}; ` +
        `b÷a ${row.map((r) => r.toFixed(2)).join(' ')}\n`,
    );
  }
  const med = (i: number) => median(ratios.map((r) => r[i]!)).toFixed(3);
  process.stdout.write(
    `b ÷ a, median over rounds: p50 ${med(0)}×, throughput 1 / 8 / 32 in flight ${med(1)}× / ${med(2)}× / ${med(3)}×; hintbox CPU per call at 1 in flight ${med(4)}×\n`,
  );
}

await main();
