/**
 * Where one call's time goes on its way through `hintbox run` (the trusted filesystem profile,
 * `list_allowed_directories`, as the bench calls it), after `--warmup` calls, for `--calls` calls
 * at each `--in-flight`, in one of four ways:
 *
 *   node --import tsx bench/call-timeline.ts --keep DIR      # perf trace of the client, hintbox and its sandboxes' processes
 *   node --import tsx bench/call-timeline.ts --sched          # per call: µs on a CPU, µs waiting for one, run slices, per process
 *   node --import tsx bench/call-timeline.ts --cpu-prof DIR  # hintbox under node --cpu-prof
 *   node --import tsx bench/call-timeline.ts --perf PREFIX   # perf record -g of hintbox's process (PREFIX-N.data)
 *
 * `--repo <checkout>`: another checkout's build. `TIMELINE_NODE_OPTIONS` is given to hintbox as
 * NODE_OPTIONS (e.g. `--perf-basic-prof-only-functions`, so that perf names its JIT code). The
 * trace (`--keep`) has every read and write with its time and duration (`perf trace` uses
 * tracepoints, not ptrace): the segments of one call at 1 in flight are read off it in order
 * (client write → hintbox read → intent written → forwarded → server read → server write →
 * hintbox read → answer written → client read), as docs/benchmarks.md shows.
 */
import { execFileSync, spawn } from 'node:child_process';
import { chownSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { relocatedProfileText } from '../src/profile/relocate-profile.js';
import { spawnServer, type Running } from './spawn-server.js';
import { toolArgs } from './tool-args.js';

const { values } = toolArgs(
  'call-timeline',
  "Where one call's time goes on its way through hintbox run, after --warmup calls, for --calls calls at each --in-flight.",
  {
    options: {
      repo: { type: 'string', default: fileURLToPath(new URL('../', import.meta.url)) },
      calls: { type: 'string', default: '400' },
      warmup: { type: 'string', default: '500' },
      'in-flight': { type: 'string', default: '1,8' },
      keep: { type: 'string' },
      'cpu-prof': { type: 'string' },
      sched: { type: 'boolean', default: false },
      perf: { type: 'string' },
    },
  },
);
const repo = path.resolve(values.repo);
const calls = Number(values.calls);

async function run(client: Running['client'], n: number, concurrency: number): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < n) await client.callTool({ name: 'list_allowed_directories', arguments: {} });
    }),
  );
  return performance.now() - t0;
}

/** The processes of the sandboxes hintbox `pid` owns (gates and servers). */
function sandboxPids(pid: number): number[] {
  const ids = execFileSync('docker', ['ps', '-q', '--filter', `label=hintbox.owner-pid=${pid}`], { encoding: 'utf8' })
    .trim()
    .split(/\s+/)
    .filter(Boolean);
  const gates = ids.map((id) =>
    Number(execFileSync('docker', ['inspect', '-f', '{{.State.Pid}}', id], { encoding: 'utf8' }).trim()),
  );
  const all: number[] = [...gates];
  const parents = new Map<number, number>();
  for (const p of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      parents.set(Number(p), Number(/PPid:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1]));
    } catch {
      // gone
    }
  }
  for (let grew = true; grew;) {
    grew = false;
    for (const [p, pp] of parents) {
      if (all.includes(pp) && !all.includes(p)) {
        all.push(p);
        grew = true;
      }
    }
  }
  return all;
}

/** Summed over every thread of `pids`: ns on CPU, ns waiting on a run queue, slices run (/proc/PID/task/TID/schedstat). */
function schedOf(pids: number[]): [number, number, number] {
  const sum: [number, number, number] = [0, 0, 0];
  for (const pid of pids) {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const [cpu, wait, slices] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8')
          .trim()
          .split(' ')
          .map(Number);
        sum[0] += cpu ?? 0;
        sum[1] += wait ?? 0;
        sum[2] += slices ?? 0;
      } catch {
        // the thread ended
      }
    }
  }
  return sum;
}

async function main(): Promise<void> {
  const workspace = mkdtempSync(path.join(os.tmpdir(), 'hintbox-timeline-'));
  const state = mkdtempSync(path.join(os.tmpdir(), 'hintbox-timeline-state-'));
  const keep = values.keep ?? mkdtempSync(path.join(os.tmpdir(), 'hintbox-timeline-traces-'));
  mkdirSync(keep, { recursive: true });
  const bin = path.join(repo, 'dist', 'hintbox.mjs');
  const profile = path.join(state, 'filesystem-trusted.yaml');
  const text = relocatedProfileText(path.join(repo, 'profiles/filesystem.yaml'));
  writeFileSync(profile, text.replace(/^trust: untrusted$/m, 'trust: trusted'));
  if (process.getuid?.() === 0) chownSync(workspace, 10001, 10001);
  const env = { WORKSPACE: workspace, HINTBOX_LOG_LEVEL: 'warn', HINTBOX_STATE_DIR: state };
  const approve = (yes: string[]) =>
    execFileSync(bin, ['approve', profile, '--all', ...yes], { env: { ...process.env, ...env }, stdio: 'ignore' });
  try {
    approve(['--yes']);
  } catch {
    approve([]);
  }
  const cpuProf = values['cpu-prof'] && path.resolve(values['cpu-prof']);
  // --cpu-prof is not allowed in NODE_OPTIONS: node runs the bin itself then.
  const running = cpuProf
    ? await spawnServer(
        '/workspace',
        process.execPath,
        ['--cpu-prof', `--cpu-prof-dir=${cpuProf}`, '--cpu-prof-interval=100', bin, 'run', profile],
        env,
      )
    : await spawnServer('/workspace', bin, ['run', profile], {
        ...env,
        ...(process.env.TIMELINE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.TIMELINE_NODE_OPTIONS } : {}),
      });
  try {
    await run(running.client, Number(values.warmup), 1);
    const sandboxes = sandboxPids(running.pid);
    for (const c of values['in-flight'].split(',').map(Number)) {
      if (values.perf) {
        const rec = spawn(
          'perf',
          ['record', '-F', '4999', '-g', '-o', `${values.perf}-${c}.data`, '-p', String(running.pid)],
          {
            stdio: 'ignore',
          },
        );
        await new Promise((r) => setTimeout(r, 1000));
        const ms = await run(running.client, calls, c);
        rec.kill('SIGINT');
        await new Promise((r) => rec.on('exit', r));
        process.stdout.write(
          `in flight ${c}: ${calls} calls in ${ms.toFixed(0)} ms (perf record ${values.perf}-${c}.data)\n`,
        );
        continue;
      }
      if (values.sched) {
        const pids = { client: [process.pid], hintbox: [running.pid], sandbox: sandboxes };
        const before = Object.fromEntries(Object.entries(pids).map(([k, v]) => [k, schedOf(v)]));
        const ms = await run(running.client, calls, c);
        const per = (k: keyof typeof pids, i: 0 | 1 | 2) =>
          ((schedOf(pids[k])[i] - before[k]![i]) / calls / (i === 2 ? 1 : 1000)).toFixed(i === 2 ? 2 : 1);
        process.stdout.write(
          `in flight ${c}: ${((calls / ms) * 1000).toFixed(0)} calls/s; per call on CPU / waiting for one (µs) / run slices: ` +
            (['client', 'hintbox', 'sandbox'] as const)
              .map((k) => `${k} ${per(k, 0)} / ${per(k, 1)} / ${per(k, 2)}`)
              .join(', ') +
            '\n',
        );
        continue;
      }
      if (cpuProf) {
        const ms = await run(running.client, calls, c);
        process.stdout.write(`in flight ${c}: ${calls} calls in ${ms.toFixed(0)} ms (profiled into ${cpuProf})\n`);
        continue;
      }
      const out = path.join(keep, `trace-${c}.txt`);
      const pids = [process.pid, running.pid, ...sandboxes].join(',');
      const perf = spawn(
        'perf',
        [
          'trace',
          '-o',
          out,
          '-p',
          pids,
          '-e',
          'read,write,writev,readv,epoll_wait,epoll_pwait,futex,pwrite64,recvfrom,sendto,recvmsg,sendmsg',
        ],
        { stdio: 'ignore' },
      );
      await new Promise((r) => setTimeout(r, 1500));
      const ms = await run(running.client, calls, c);
      perf.kill('SIGINT');
      await new Promise((r) => perf.on('exit', r));
      process.stdout.write(
        `in flight ${c}: ${calls} calls in ${ms.toFixed(0)} ms (traced); client ${process.pid}, hintbox ${running.pid}, sandboxes ${sandboxes.join(' ')}; trace ${out}\n`,
      );
    }
  } finally {
    await running.close();
    rmSync(workspace, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
    if (!values.keep) rmSync(keep, { recursive: true, force: true });
  }
}

await main();
