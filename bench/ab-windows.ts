/**
 * Two or more builds' `hintbox run` alive at once, on the bench's steady-state call (the trusted
 * filesystem profile, `list_allowed_directories`), taking turns in short windows of calls
 * (a b, b a, a b, …): on a shared machine a window of each variant meets the same load within a
 * second of the other's, which rounds of whole processes (`ab-steady.ts`) cannot give. Per window
 * and variant, hintbox's own process: µs on a CPU per call (`/proc/PID/task/*\/schedstat`),
 * sleeps per call (voluntary context switches: each one is a sleep in `epoll_pwait` and a
 * wake-up), `read` and `write` system calls per call (`/proc/PID/io`: the batch sizes, whatever
 * the load), and calls per second. Each variant's ratio to the first is taken window pair by
 * window pair, then the median; "worse in" counts the windows.
 *
 *   node --import tsx bench/ab-windows.ts --v a=/tmp/base --v b=. [--windows 12] [--calls 500] [--in-flight 1,32]
 *
 * `--v name=CHECKOUT[@BIN]`: the checkout's build (its `dist/hintbox.mjs`, run through its own
 * shebang line), or `BIN` in its place (a script that runs node with other flags or environment);
 * the checkout's profile and `approve` are used either way. `--per-window`: every window's CPU.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { relocatedProfileText } from '../src/profile/relocate-profile.js';
import { callsPerSecond } from './cpu-per-call.js';
import { spawnServer, type Running } from './spawn-server.js';
import { median } from './stats.js';
import { toolArgs } from './tool-args.js';

const { values } = toolArgs(
  'ab-windows',
  "Two or more builds' hintbox run alive together (--v name=checkout), timed in alternating windows of calls.",
  {
    options: {
      v: { type: 'string', multiple: true },
      windows: { type: 'string', default: '12' },
      calls: { type: 'string', default: '500' },
      warmup: { type: 'string', default: '1000' },
      'in-flight': { type: 'string', default: '1,32' },
      'per-window': { type: 'boolean', default: false },
    },
  },
);
const calls = Number(values.calls);

interface Variant {
  name: string;
  running: Running;
  folders: string[];
}

/** What a window is read from: ns on a CPU (all threads), voluntary switches, read and write system calls. */
function counters(pid: number): number[] {
  let cpu = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      cpu += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended
    }
  }
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  const num = (re: RegExp, text: string) => Number(re.exec(text)?.[1] ?? NaN);
  return [
    cpu / 1000,
    num(/^voluntary_ctxt_switches:\s+(\d+)/m, status),
    num(/^syscr: (\d+)/m, io),
    num(/^syscw: (\d+)/m, io),
  ];
}

async function start(spec: string): Promise<Variant> {
  const [name = '', rest = ''] = spec.split(/=(.*)/s);
  const [checkout = '.', bin] = rest.split('@');
  const repo = path.resolve(checkout);
  const workspace = mkdtempSync(path.join(os.tmpdir(), 'hintbox-abw-'));
  const state = mkdtempSync(path.join(os.tmpdir(), 'hintbox-abw-state-'));
  const profile = path.join(state, 'filesystem-trusted.yaml');
  const text = relocatedProfileText(path.join(repo, 'profiles/filesystem.yaml'));
  writeFileSync(profile, text.replace(/^trust: untrusted$/m, 'trust: trusted'));
  if (process.getuid?.() === 0) chownSync(workspace, 10001, 10001);
  const env = { WORKSPACE: workspace, HINTBOX_LOG_LEVEL: 'warn', HINTBOX_STATE_DIR: state };
  const own = path.join(repo, 'dist', 'hintbox.mjs');
  // Builds from before `approve --yes` approve without asking when stdin is not a terminal.
  const approve = (flags: string[]) =>
    execFileSync(own, ['approve', profile, '--all', ...flags], { env: { ...process.env, ...env }, stdio: 'ignore' });
  try {
    approve(['--yes']);
  } catch {
    approve([]);
  }
  const running = await spawnServer('/workspace', bin ?? own, ['run', profile], env);
  return { name, running, folders: [workspace, state] };
}

async function main(): Promise<void> {
  const variants: Variant[] = [];
  try {
    for (const spec of values.v ?? []) variants.push(await start(spec));
    if (variants.length < 2) throw new Error('give at least two variants: --v a=CHECKOUT --v b=CHECKOUT');
    const callOf = (v: Variant) => () => v.running.client.callTool({ name: 'list_allowed_directories', arguments: {} });
    for (const v of variants) await callsPerSecond(callOf(v), 1, Number(values.warmup));
    for (const inFlight of values['in-flight'].split(',').map(Number)) {
      // figures[variant][window] = [cpu µs, sleeps, reads, writes, calls/s], each per call but the last
      const figures: number[][][] = variants.map(() => []);
      for (let w = 0; w < Number(values.windows); w++) {
        const order = w % 2 ? [...variants.keys()].reverse() : [...variants.keys()];
        for (const i of order) {
          const v = variants[i]!;
          const before = counters(v.running.pid);
          const rate = await callsPerSecond(callOf(v), inFlight, calls);
          const after = counters(v.running.pid);
          figures[i]!.push([...after.map((x, k) => (x - before[k]!) / calls), rate]);
        }
      }
      const load = os.loadavg()[0]!.toFixed(1);
      process.stdout.write(`${inFlight} in flight, load ${load}, ${values.windows} windows × ${calls} calls:\n`);
      const med = (i: number, k: number) => median(figures[i]!.map((f) => f[k]!));
      variants.forEach((v, i) => {
        let line =
          `  ${v.name}: CPU ${med(i, 0).toFixed(1)} µs/call, ${med(i, 1).toFixed(2)} sleeps/call, ` +
          `read ${med(i, 2).toFixed(2)} / write ${med(i, 3).toFixed(2)} per call, ${med(i, 4).toFixed(0)} calls/s`;
        if (i > 0) {
          const ratio = (k: number) => figures[i]!.map((f, w) => f[k]! / figures[0]![w]![k]!);
          const worse = ratio(0).filter((r) => r > 1).length;
          line +=
            ` (÷ ${variants[0]!.name}: CPU ${median(ratio(0)).toFixed(3)}×, worse in ${worse}/${values.windows};` +
            ` calls/s ${median(ratio(4)).toFixed(3)}×)`;
        }
        process.stdout.write(`${line}\n`);
        if (values['per-window'])
          process.stdout.write(`    CPU per window: ${figures[i]!.map((f) => f[0]!.toFixed(0)).join(' ')}\n`);
      });
    }
  } finally {
    for (const v of variants) {
      await v.running.close();
      for (const folder of v.folders) rmSync(folder, { recursive: true, force: true });
    }
  }
}

await main();
