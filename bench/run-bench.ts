/**
 * hintbox against the same MCP server run bare and under `docker run -i`.
 *
 *   npm run bench                     # table on stdout, progress on stderr
 *   npm run bench -- --json           # the same as JSON
 *   npm run bench -- --rounds 3 --calls 100 --warmup 50 --scale 1,5
 *   npm run bench -- --verbose        # and hintbox's own log on stderr
 *   npm run bench -- --serve no       # without hintbox serve's figures (--serve-scale 1,5,20)
 *
 * Variants are interleaved round by round (bare, docker, hintbox, bare, …) so drift on a noisy
 * machine hits each alike; ratios to docker are taken pair by pair within a round, then the
 * median over rounds is reported.
 */
import { formatAuditLogFigures, measureAuditLog, type AuditLogFigures } from './audit-log-bench.js';
import { formatServe, measureServe } from './serve-bench.js';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import type Docker from 'dockerode';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ImageBuilder, IMAGES_DIR } from '../src/engine/docker/image-builder.js';
import { LABEL_OWNER_PID } from '../src/engine/docker/container-spec.js';
import { connectDocker } from '../src/engine/docker/docker-connection.js';
import { createLogger } from '../src/util/logger.js';
import { relocatedProfileText } from '../src/profile/relocate-profile.js';
import { median, percentile, spread } from './stats.js';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const IMAGE = 'hintbox/server-filesystem:2026.8.31';
const SERVER_ENTRY = 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js';
const CACHE = path.join(REPO, '.hintbox', 'bench');
/** The `hintbox` bin as a client's config runs it (the bundle, through its shebang). */
const HINTBOX_BIN = path.join(REPO, 'dist', 'hintbox.mjs');
const log = createLogger('info', (line) => process.stderr.write(line + '\n'), { prefix: 'bench' });

type VariantName = 'bare' | 'docker' | 'hintbox';
const VARIANTS: VariantName[] = ['bare', 'docker', 'hintbox'];
/** What the launched process is, per variant. */
const LAUNCHED: Record<VariantName, string> = { bare: 'server', docker: 'docker CLI', hintbox: 'hintbox' };

interface Running {
  client: Client;
  /** The workspace as the server sees it (the host folder for bare, the mount target otherwise). */
  workspace: string;
  /** Process whose resident memory is the variant's own overhead (hintbox itself; the docker CLI; the bare server). */
  pid: number;
  close(): Promise<void>;
}

interface RoundResult {
  coldStartMs: number;
  /** Launch → first answered call of each sandbox class (for hintbox: read-only, then writing). */
  firstReadMs: number;
  firstWriteMs: number;
  latency: { p50: number; p99: number };
  throughput: Record<number, number>;
  rssMb: number;
  sandboxMb: number[];
  /** CPU time per call (µs) at the highest concurrency, by component, all processes of the machine. */
  cpu: Record<string, number>;
}

/** Set in main(): the trusted profile copy and the environment hintbox runs with. */
let hintboxProfile = '';
/** Set in main(): copies whose write_file runs unasked, held between calls or free. */
let heldProfile = '';
let freeProfile = '';
let hintboxEnv: Record<string, string> = {};

const { values } = parseArgs({
  options: {
    json: { type: 'boolean' },
    /** hintbox's own log (info) on stderr, to see where its time goes. */
    verbose: { type: 'boolean' },
    rounds: { type: 'string', default: '5' },
    calls: { type: 'string', default: '1000' },
    /** Calls before measuring: MCP sessions are long-lived, the figures are of the steady state. */
    warmup: { type: 'string', default: '200' },
    scale: { type: 'string', default: '1,5,20' },
    /** `no`: leave out what holding costs a write call (held against hold: false). */
    holding: { type: 'string', default: 'yes' },
    /** Records of the audit log read by `hintbox audit` and `audit verify` (0: left out). */
    'audit-records': { type: 'string', default: '1000000' },
    concurrency: { type: 'string', default: '1,8,32' },
    /** `no`: leave out hintbox serve (calls over HTTP with 1 and 8 clients; memory per servers). */
    serve: { type: 'string', default: 'yes' },
    'serve-scale': { type: 'string', default: '1,5,20' },
  },
});
const ROUNDS = Number(values.rounds);
const CALLS = Number(values.calls);
const WARMUP = Number(values.warmup);
const SCALE = values.scale
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const CONCURRENCY = values.concurrency
  .split(',')
  .map(Number)
  .filter((n) => n > 0);

async function main(): Promise<void> {
  const { docker } = await connectDocker();
  log.info('preparing: image, host copy of the server, workspace');
  await new ImageBuilder({ docker, log }).ensure(IMAGE, path.join(IMAGES_DIR, 'server-filesystem'));
  const bareDir = prepareBareServer();
  const workspace = mkdtempSync(path.join(os.tmpdir(), 'hintbox-bench-'));
  // hintbox as a platform team would run a server it vouches for: trusted, so a read-only
  // tool its sandbox enforces runs without a confirmation (each call is still audited), with
  // its state folder (and audit log) in a scratch folder.
  const state = mkdtempSync(path.join(os.tmpdir(), 'hintbox-bench-state-'));
  const profile = path.join(state, 'filesystem-trusted.yaml');
  heldProfile = path.join(state, 'filesystem-held.yaml');
  freeProfile = path.join(state, 'filesystem-free.yaml');
  // write_file runs unasked, so that the first answered call of the writing class is measured.
  const allowWrites = '\ntools:\n  write_file:\n    approval: allow\n';
  const trustedText = relocatedProfileText(path.join(REPO, 'profiles/filesystem.yaml')).replace(
    /^trust: untrusted$/m,
    'trust: trusted',
  );
  writeFileSync(profile, trustedText + allowWrites);
  hintboxEnv = {
    WORKSPACE: workspace,
    HINTBOX_LOG_LEVEL: values.verbose ? 'debug' : 'warn',
    HINTBOX_STATE_DIR: state,
  };
  hintboxProfile = profile;
  // The sandbox user (10001 when hintbox runs as root) must be able to write the workspace.
  writeFileSync(path.join(workspace, 'file.txt'), 'benchmark\n');
  if (process.getuid?.() === 0) {
    chownSync(workspace, 10001, 10001);
    chownSync(path.join(workspace, 'file.txt'), 10001, 10001);
  }
  // Cold start with an approved lock file, as in production: approve once (not timed).
  execFileSync(HINTBOX_BIN, ['approve', profile, '--all'], { env: { ...process.env, ...hintboxEnv }, stdio: 'ignore' });
  // The same server without a lock file (trusted on first use: no cold start), held (the default:
  // thawed for each call, frozen after) and let run free (hold: false), for the cost of holding.
  writeFileSync(heldProfile, trustedText + allowWrites);
  writeFileSync(freeProfile, trustedText + allowWrites + 'hold: false\n');

  const starters: Record<VariantName, () => Promise<Running>> = {
    bare: () => spawnServer(workspace, process.execPath, [path.join(bareDir, SERVER_ENTRY), workspace]),
    docker: () =>
      spawnServer('/workspace', 'docker', [
        'run',
        '-i',
        '--rm',
        '--network',
        'none',
        '-v',
        `${workspace}:/workspace`,
        IMAGE,
      ]),
    hintbox: () => spawnServer('/workspace', HINTBOX_BIN, ['run', hintboxProfile], hintboxEnv),
  };

  const rounds: Record<VariantName, RoundResult>[] = [];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      const results = {} as Record<VariantName, RoundResult>;
      for (const variant of VARIANTS) {
        log.info(`round ${round}/${ROUNDS}: ${variant}`);
        results[variant] = await measure(starters[variant], docker);
        await settle(docker);
      }
      rounds.push(results);
    }
    const holding = values.holding === 'no' ? [] : await measureHolding(docker);
    const scale = await measureScale(docker);
    const freshApprove = measureFreshApprove(trustedText + allowWrites, workspace);
    const auditRecords = Number(values['audit-records']);
    const auditLog = auditRecords > 0 ? await measureAuditLog(auditRecords) : undefined;
    const serve =
      values.serve === 'no'
        ? undefined
        : await measureServe({
            hintboxBin: HINTBOX_BIN,
            profileText: trustedText,
            env: hintboxEnv,
            rounds: ROUNDS,
            calls: CALLS,
            warmup: WARMUP,
            scale: values['serve-scale']
              .split(',')
              .map(Number)
              .filter((n) => n > 0),
            log,
          });
    const report = {
      ...summarize(rounds, scale),
      freshApprove,
      holding,
      ...(auditLog ? { auditLog } : {}),
      ...(serve ? { serve } : {}),
    };
    const text = formatReport(report) + (serve ? `\n\n${formatServe(serve)}` : '');
    process.stdout.write(values.json ? JSON.stringify(report, null, 2) + '\n' : text + '\n');
  } finally {
    rmSync(workspace, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
  }
}

/** The server's npm package installed on the host, from the same lock file as the image. */
function prepareBareServer(): string {
  const dir = path.join(CACHE, 'server-filesystem');
  const lock = readFileSync(path.join(IMAGES_DIR, 'server-filesystem', 'package-lock.json'), 'utf8');
  if (existsSync(path.join(dir, SERVER_ENTRY)) && readFileSync(path.join(dir, 'package-lock.json'), 'utf8') === lock) {
    return dir;
  }
  mkdirSync(dir, { recursive: true });
  for (const f of ['package.json', 'package-lock.json'])
    cpSync(path.join(IMAGES_DIR, 'server-filesystem', f), path.join(dir, f));
  execFileSync('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: dir,
    // npm's report goes to stderr: stdout is the table or the JSON.
    stdio: ['ignore', 2, 2],
  });
  return dir;
}

async function spawnServer(
  workspace: string,
  command: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<Running> {
  const transport = new StdioClientTransport({
    command,
    args,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...env },
    stderr: values.verbose && command === HINTBOX_BIN ? 'pipe' : 'ignore',
  });
  const launched = performance.now();
  transport.stderr?.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
      process.stderr.write(`${(performance.now() - launched).toFixed(0).padStart(6)} ms  ${line}\n`);
    }
  });
  const client = new Client({ name: 'hintbox-bench', version: '1.0.0' });
  await client.connect(transport);
  return {
    client,
    workspace,
    pid: transport.pid ?? -1,
    close: async () => {
      await client.close();
      await waitForExit(transport.pid ?? -1);
    },
  };
}

async function measure(start: () => Promise<Running>, docker: Docker): Promise<RoundResult> {
  const t0 = performance.now();
  const running = await start();
  try {
    await running.client.listTools();
    const coldStartMs = performance.now() - t0;
    // The first call of each class, sent together: each figure is launch → its answer.
    const answeredAt = async (call: Promise<CallToolResult>) => {
      const result = await call;
      if (result.isError) throw new Error(`first call failed: ${JSON.stringify(result.content)}`);
      return performance.now() - t0;
    };
    const [firstReadMs, firstWriteMs] = await Promise.all([
      answeredAt(
        running.client.callTool({ name: 'list_allowed_directories', arguments: {} }) as Promise<CallToolResult>,
      ),
      answeredAt(
        running.client.callTool({
          name: 'write_file',
          arguments: { path: `${running.workspace}/first.txt`, content: 'first\n' },
        }) as Promise<CallToolResult>,
      ),
    ]);

    const call = () => running.client.callTool({ name: 'list_allowed_directories', arguments: {} });
    for (let i = 0; i < WARMUP; i++) await call();
    const samples: number[] = [];
    for (let i = 0; i < CALLS; i++) {
      const s = performance.now();
      await call();
      samples.push(performance.now() - s);
    }
    const throughput: Record<number, number> = {};
    for (const inFlight of CONCURRENCY) throughput[inFlight] = await callsPerSecond(call, inFlight, CALLS);
    const cpu = await cpuPerCall(call, Math.max(...CONCURRENCY), CALLS * CPU_CALLS_FACTOR, running.pid);

    const sandboxMb = await sandboxMemory(docker, running.pid);
    return {
      coldStartMs,
      firstReadMs,
      firstWriteMs,
      latency: { p50: percentile(samples, 50), p99: percentile(samples, 99) },
      throughput,
      rssMb: rssMb(running.pid),
      sandboxMb,
      cpu,
    };
  } finally {
    await running.close();
  }
}

/**
 * Waits until the variant's containers are gone and the engine is idle again: Docker removes a
 * container (and its mounts and namespaces) after the client has gone, and the next variant's
 * start must not pay for that.
 */
async function settle(docker: Docker): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const left = await docker.listContainers({ all: true, filters: { ancestor: [IMAGE] } });
    if (left.length === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 1000));
}

async function callsPerSecond(call: () => Promise<unknown>, inFlight: number, total: number): Promise<number> {
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next++ < total) await call();
    }),
  );
  return (total / (performance.now() - start)) * 1000;
}

/** The CPU figure runs this many times `--calls`: /proc counts CPU time in 10 ms ticks. */
const CPU_CALLS_FACTOR = 5;

/** CPU time (user + system, in clock ticks) of every process now, with what it is. */
/**
 * `/proc/<pid>/stat` read: the command name and the fields after it (`fields[0]` is field 3,
 * the state). Throws when the process is gone.
 */
function procStat(pid: number | string): { comm: string; fields: string[] } {
  const match = /^\d+ \((.*)\) (.*)$/s.exec(readFileSync(`/proc/${pid}/stat`, 'utf8').trim());
  return { comm: match?.[1] ?? '', fields: (match?.[2] ?? '').split(' ') };
}

function processTicks(): Map<number, { comm: string; ticks: number; inContainer: boolean }> {
  const out = new Map<number, { comm: string; ticks: number; inContainer: boolean }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const { comm, fields } = procStat(entry);
      // Fields 14 and 15 of stat (utime, stime).
      const ticks = Number(fields[11]) + Number(fields[12]);
      const cgroup = readFileSync(`/proc/${entry}/cgroup`, 'utf8');
      out.set(Number(entry), {
        comm,
        ticks,
        inContainer: /\/docker[/-]/.test(cgroup),
      });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/**
 * `total` calls with `inFlight` at a time, and the CPU time every process of the machine spent
 * meanwhile, per call, by component: the client (this process), the launched process (hintbox,
 * the docker CLI, the bare server), the containers' processes, the Docker
 * engine (dockerd, containerd, its shims) and the rest. The machine is otherwise idle, so
 * "the rest" is small; it is reported, not hidden. Processes that ended during the window
 * are not counted (none of the variants starts any per call).
 */
async function cpuPerCall(
  call: () => Promise<unknown>,
  inFlight: number,
  total: number,
  launchedPid: number,
): Promise<Record<string, number>> {
  const before = processTicks();
  await callsPerSecond(call, inFlight, total);
  const after = processTicks();
  const tickUs = 1e6 / CLOCK_TICKS_PER_SECOND;
  const out: Record<string, number> = {};
  for (const [pid, now] of after) {
    // A process started meanwhile spent all its time in the window; one that ended meanwhile
    // is not counted (its time went to its parent's children, not kept per child).
    const spent = now.ticks - (before.get(pid)?.ticks ?? 0);
    if (spent <= 0) continue;
    const component =
      pid === process.pid
        ? 'client'
        : pid === launchedPid
          ? 'launched'
          : now.inContainer
            ? 'containers'
            : /^(dockerd|containerd|containerd-shim|docker-proxy|runc)/.test(now.comm)
              ? 'docker engine'
              : 'other';
    out[component] = (out[component] ?? 0) + (spent * tickUs) / total;
  }
  out.total = Object.values(out).reduce((a, b) => a + b, 0);
  return out;
}

/** USER_HZ: the unit of /proc's CPU times (100 on Linux everywhere that matters). */
const CLOCK_TICKS_PER_SECOND = 100;

function rssMb(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
}

/** Memory of the containers that hintbox process `pid` owns (empty for other variants). */
async function sandboxMemory(docker: Docker, pid: number): Promise<number[]> {
  const containers = await docker.listContainers({ filters: { label: [`${LABEL_OWNER_PID}=${pid}`] } });
  return Promise.all(
    containers.map(async (c) => {
      const stats = (await docker.getContainer(c.Id).stats({ stream: false })) as {
        memory_stats?: { usage?: number; stats?: { cache?: number } };
      };
      const usage = (stats.memory_stats?.usage ?? 0) - (stats.memory_stats?.stats?.cache ?? 0);
      return usage / 1024 / 1024;
    }),
  );
}

type HoldVariant = 'held' | 'free';
interface HoldRound {
  /** The first write_file call: a held sandbox's server starts (released) in it. */
  firstWriteMs: number;
  write: { p50: number; p99: number };
}
interface HoldingFigure {
  name: string;
  held: number;
  free: number;
  /** held ÷ free, median of per-round ratios. */
  ratio: number;
}

/**
 * What holding costs a write call: the same trusted profile with write_file allowed unasked,
 * held (released at the first call, thawed and frozen around each) against `hold: false`,
 * interleaved round by round. Sequential calls: each pays a thaw before and a freeze after.
 */
async function measureHolding(docker: Docker): Promise<HoldingFigure[]> {
  const rounds: Record<HoldVariant, HoldRound>[] = [];
  const calls = Math.max(20, Math.round(CALLS / 5));
  for (let round = 1; round <= ROUNDS; round++) {
    const result = {} as Record<HoldVariant, HoldRound>;
    for (const variant of ['held', 'free'] as const) {
      log.info(`holding, round ${round}/${ROUNDS}: ${variant}, ${calls} write calls`);
      const running = await spawnServer(
        '/workspace',
        HINTBOX_BIN,
        ['run', variant === 'held' ? heldProfile : freeProfile],
        hintboxEnv,
      );
      try {
        await running.client.listTools();
        let n = 0;
        const write = async () => {
          const r = await running.client.callTool({
            name: 'write_file',
            arguments: { path: '/workspace/written.txt', content: `write ${n++}\n` },
          });
          if (r.isError) throw new Error(`write_file failed: ${JSON.stringify(r.content)}`);
        };
        const s = performance.now();
        await write();
        const firstWriteMs = performance.now() - s;
        for (let i = 0; i < Math.round(calls / 4); i++) await write();
        const samples: number[] = [];
        for (let i = 0; i < calls; i++) {
          const t = performance.now();
          await write();
          samples.push(performance.now() - t);
        }
        result[variant] = { firstWriteMs, write: { p50: percentile(samples, 50), p99: percentile(samples, 99) } };
      } finally {
        await running.close();
      }
      await settle(docker);
    }
    rounds.push(result);
  }
  const figure = (name: string, pick: (r: HoldRound) => number): HoldingFigure => ({
    name,
    held: median(rounds.map((r) => pick(r.held))),
    free: median(rounds.map((r) => pick(r.free))),
    ratio: median(rounds.map((r) => pick(r.held) / pick(r.free))),
  });
  return [
    figure('first write call (held: the server starts in it)', (r) => r.firstWriteMs),
    figure('write call latency p50', (r) => r.write.p50),
    figure('write call latency p99', (r) => r.write.p99),
  ];
}

/**
 * `hintbox approve --all` as a new user's first command: a fresh state folder (no kept tools, no
 * audit log) and no lock file; the image is built (as after `hintbox images build`). Once per
 * round; the median and spread in ms.
 */
function measureFreshApprove(profileText: string, workspace: string): { median: number; spread: number } {
  const times: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const fresh = mkdtempSync(path.join(os.tmpdir(), 'hintbox-bench-fresh-'));
    try {
      const file = path.join(fresh, 'filesystem.yaml');
      writeFileSync(file, profileText);
      const t0 = performance.now();
      execFileSync(HINTBOX_BIN, ['approve', file, '--all'], {
        env: { ...process.env, WORKSPACE: workspace, HINTBOX_STATE_DIR: path.join(fresh, 'state') },
        stdio: 'ignore',
      });
      times.push(performance.now() - t0);
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  }
  return { median: median(times), spread: spread(times) };
}

interface ScaleResult {
  servers: number;
  startMs: number;
  hintboxRssMb: number;
  sandboxMb: number;
}

async function measureScale(docker: Docker): Promise<ScaleResult[]> {
  const out: ScaleResult[] = [];
  for (const n of SCALE) {
    log.info(`scale: ${n} server(s) under hintbox at once`);
    const t0 = performance.now();
    const all = await Promise.all(
      Array.from({ length: n }, () =>
        // Up: its first call answered (with the lock file tools/list is answered before the
        // server is up).
        spawnServer('/workspace', HINTBOX_BIN, ['run', hintboxProfile], hintboxEnv).then(
          async (r) => (await r.client.callTool({ name: 'list_allowed_directories', arguments: {} }), r),
        ),
      ),
    );
    const startMs = performance.now() - t0;
    const sandbox = (await Promise.all(all.map((r) => sandboxMemory(docker, r.pid)))).flat();
    out.push({
      servers: n,
      startMs,
      hintboxRssMb: all.reduce((sum, r) => sum + rssMb(r.pid), 0),
      sandboxMb: sandbox.reduce((a, b) => a + b, 0),
    });
    await Promise.all(all.map((r) => r.close()));
    await settle(docker);
  }
  return out;
}

/** Until the process is gone (or only a zombie, which its parent reaps in its own time). */
async function waitForExit(pid: number): Promise<void> {
  for (let i = 0; i < 300; i++) {
    let state: string;
    try {
      state = procStat(pid).fields[0] || 'Z';
    } catch {
      return;
    }
    if (state === 'Z' || state === 'X') return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Figure {
  name: string;
  unit: string;
  values: Record<VariantName, { median: number; spread: number }>;
  /** hintbox ÷ docker, median of per-round ratios. */
  ratio: number;
  target?: { text: string; met: boolean };
}

function summarize(rounds: Record<VariantName, RoundResult>[], scale: ScaleResult[]) {
  const figure = (
    name: string,
    unit: string,
    pick: (r: RoundResult) => number,
    target?: (ratio: number, hintbox: number) => { text: string; met: boolean },
  ): Figure => {
    const values = Object.fromEntries(
      VARIANTS.map((v) => {
        const xs = rounds.map((r) => pick(r[v]));
        return [v, { median: median(xs), spread: spread(xs) }];
      }),
    ) as Figure['values'];
    const ratio = median(rounds.map((r) => pick(r.hintbox) / pick(r.docker)));
    return { name, unit, values, ratio, ...(target ? { target: target(ratio, values.hintbox.median) } : {}) };
  };
  const atMost = (limit: number) => (ratio: number) => ({ text: `≤ ${limit} × docker`, met: ratio <= limit });
  const atLeast = (limit: number) => (ratio: number) => ({ text: `≥ ${limit} × docker`, met: ratio >= limit });
  const figures: Figure[] = [
    figure('cold start (launch → first tools/list; approved lock file)', 'ms', (r) => r.coldStartMs, atMost(1.0)),
    figure('launch → first answered read-only call (ro-offline)', 'ms', (r) => r.firstReadMs),
    figure('launch → first answered write call (rw-offline)', 'ms', (r) => r.firstWriteMs),
    figure('call latency p50', 'ms', (r) => r.latency.p50, atMost(1.05)),
    figure('call latency p99', 'ms', (r) => r.latency.p99, atMost(1.5)),
    ...CONCURRENCY.map((c) =>
      figure(`throughput, ${c} in flight`, 'calls/s', (r) => r.throughput[c] ?? 0, atLeast(0.9)),
    ),
    figure(`CPU per call, ${Math.max(...CONCURRENCY)} in flight (all processes)`, 'µs', (r) => r.cpu.total ?? 0),
    figure(
      'resident memory of the launched process',
      'MB',
      (r) => r.rssMb,
      (_ratio, hintbox) => ({
        text: 'hintbox ≤ 60 MB',
        met: hintbox <= 60,
      }),
    ),
  ];
  const sandboxMb = rounds.flatMap((r) => r.hintbox.sandboxMb);
  return {
    machine: { cpus: os.cpus().length, memGb: Math.round(os.totalmem() / 2 ** 30), node: process.version },
    rounds: rounds.length,
    calls: CALLS,
    figures,
    sandboxMemoryMb: { median: median(sandboxMb), perSandbox: sandboxMb.length / Math.max(rounds.length, 1) },
    cpuPerCall: Object.fromEntries(
      VARIANTS.map((v) => {
        const components = [...new Set(rounds.flatMap((r) => Object.keys(r[v].cpu)))];
        return [v, Object.fromEntries(components.map((c) => [c, median(rounds.map((r) => r[v].cpu[c] ?? 0))]))];
      }),
    ) as Record<VariantName, Record<string, number>>,
    scale,
  };
}

function formatReport(
  report: ReturnType<typeof summarize> & {
    freshApprove: { median: number; spread: number };
    holding: HoldingFigure[];
    auditLog?: AuditLogFigures;
  },
): string {
  const fmt = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
  const rows = report.figures.map((f) => [
    f.name,
    ...VARIANTS.map((v) => `${fmt(f.values[v].median)} ±${fmt(f.values[v].spread)}`),
    f.unit,
    `${f.ratio.toFixed(2)}×`,
    f.target ? `${f.target.text}: ${f.target.met ? 'met' : 'MISSED'}` : '',
  ]);
  const header = ['figure', 'bare', 'docker', 'hintbox', 'unit', 'hintbox/docker', 'target'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join(' | ')
      .trimEnd();
  const out = [
    `${report.rounds} round(s), ${report.calls} calls per figure, ${report.machine.cpus} CPUs, Node ${report.machine.node}; median ±(max−min)/2 over rounds`,
    '',
    line(header),
    widths.map((w) => '-'.repeat(w)).join('-|-'),
    ...rows.map(line),
    '',
    `first hintbox approve --all on a fresh machine (no lock file, empty state folder; image built): ${fmt(report.freshApprove.median)} ±${fmt(report.freshApprove.spread)} ms`,
    '',
    `memory per hintbox sandbox (container, without page cache): median ${fmt(report.sandboxMemoryMb.median)} MB, ${report.sandboxMemoryMb.perSandbox} sandboxes per server`,
    '',
    `CPU per call at ${Math.max(...CONCURRENCY)} in flight, by process (µs, median over rounds; ${CPU_CALLS_FACTOR} × ${report.calls} calls):`,
    ...VARIANTS.map((v) => {
      const parts = Object.entries(report.cpuPerCall[v])
        .filter(([c, us]) => c !== 'total' && us >= 0.5)
        .sort((a, b) => b[1] - a[1])
        .map(([c, us]) => `${c === 'launched' ? LAUNCHED[v] : c} ${fmt(us)}`);
      return `  ${v.padEnd(7)} ${fmt(report.cpuPerCall[v].total ?? 0)} = ${parts.join(' + ')}`;
    }),
    '',
    'holding: write_file under hintbox, held (thawed for each call, frozen after) vs hold: false (ms, median over rounds)',
    ...report.holding.map(
      (h) =>
        `  ${h.name.padEnd(50)} held ${fmt(h.held)}  free ${fmt(h.free)}  held/free ${h.ratio.toFixed(2)}×  (+${fmt(h.held - h.free)} ms)`,
    ),
    '',
    'scale: N filesystem servers under hintbox at once (up: first call answered)',
    ...report.scale.map(
      (s) =>
        `  ${String(s.servers).padStart(2)} server(s): all up in ${fmt(s.startMs)} ms; hintbox processes ${fmt(s.hintboxRssMb)} MB, sandboxes ${fmt(s.sandboxMb)} MB`,
    ),
    ...(report.auditLog ? ['', ...formatAuditLogFigures(report.auditLog)] : []),
  ];
  return out.join('\n');
}

main().catch((error: unknown) => {
  log.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
  process.exitCode = 1;
});
