/**
 * hintbox against the same MCP server run bare and under `docker run -i`.
 *
 *   npm run bench                     # table on stdout, progress on stderr
 *   npm run bench -- --json           # the same as JSON
 *   npm run bench -- --rounds 3 --calls 100 --warmup 500 --scale 1,5
 *   npm run bench -- --verbose        # and hintbox's own log on stderr
 *   npm run bench -- --serve no       # without hintbox serve's figures (--serve-scale 1,5,20)
 *
 * Variants are interleaved round by round (bare, docker, hintbox, bare, …) so drift on a noisy
 * machine hits each alike; ratios to docker are taken pair by pair within a round, then the
 * median over rounds is reported.
 *
 * This file is the run (its flags, the three variants' rounds, what is printed); beside it:
 * spawn-server.ts starts a measured server, cpu-per-call.ts and proc-stat.ts read what the
 * processes spent, holding-bench.ts, scale-bench.ts, audit-log-bench.ts and serve-bench.ts
 * measure the parts after the rounds, bench-report.ts sums the rounds up into the table.
 */
import { formatAuditLogFigures, measureAuditLog } from './audit-log-bench.js';
import { BENCH_HELP, BenchUsageError, parseBenchOptions } from './bench-options.js';
import {
  formatHolding,
  formatReport,
  summarize,
  REST_MS,
  VARIANTS,
  WARMUP_BLOCK,
  type RoundResult,
  type VariantName,
} from './bench-report.js';
import { callsPerSecond, cpuPerCall, CPU_CALLS_FACTOR } from './cpu-per-call.js';
import { measureHolding } from './holding-bench.js';
import { rssMb } from './proc-stat.js';
import { measureScale } from './scale-bench.js';
import { measureServe } from './serve-bench.js';
import { formatServe } from './serve-report.js';
import { sandboxMemory, settle, spawnServer, type Running } from './spawn-server.js';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type Docker from 'dockerode';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ImageBuilder, IMAGES_DIR } from '../src/engine/docker/image-builder.js';
import { connectDocker } from '../src/engine/docker/docker-connection.js';
import { createLogger } from '../src/util/logger.js';
import { delay } from '../src/util/delay.js';
import { relocatedProfileText } from '../src/profile/relocate-profile.js';
import { median, percentile, spread } from './stats.js';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const IMAGE = 'hintbox/server-filesystem:2026.8.31';
const SERVER_ENTRY = 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js';
const CACHE = path.join(REPO, '.hintbox', 'bench');
/** The `hintbox` bin as a client's config runs it (the bundle, through its shebang). */
const HINTBOX_BIN = path.join(REPO, 'dist', 'hintbox.mjs');
const log = createLogger('info', (line) => process.stderr.write(line + '\n'), { prefix: 'bench' });

const parsed = (() => {
  try {
    return parseBenchOptions(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof BenchUsageError)) throw error;
    process.stderr.write(`bench: ${error.message}\n`);
    process.exit(2);
  }
})();
if (parsed === 'help') {
  process.stdout.write(BENCH_HELP + '\n');
  process.exit(0);
}
const values = parsed;
const ROUNDS = values.rounds;
const CALLS = values.calls;
const WARMUP = values.warmup;
const LATENCY_CALLS = values.latencyCalls;
const SCALE = values.scale;
const CONCURRENCY = values.concurrency;

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
  // Copies whose write_file runs unasked, held between calls or free.
  const heldProfile = path.join(state, 'filesystem-held.yaml');
  const freeProfile = path.join(state, 'filesystem-free.yaml');
  // write_file runs unasked, so that the first answered call of the writing class is measured.
  const allowWrites = '\ntools:\n  write_file:\n    approval: allow\n';
  const trustedText = relocatedProfileText(path.join(REPO, 'profiles/filesystem.yaml')).replace(
    /^trust: untrusted$/m,
    'trust: trusted',
  );
  writeFileSync(profile, trustedText + allowWrites);
  // The environment hintbox runs with.
  const hintboxEnv = {
    WORKSPACE: workspace,
    HINTBOX_LOG_LEVEL: values.verbose ? 'debug' : 'warn',
    HINTBOX_STATE_DIR: state,
    // `HINTBOX_FREEZER=gate npm run bench`: held writers frozen by their gate, not the cgroup freezer.
    ...(process.env.HINTBOX_FREEZER ? { HINTBOX_FREEZER: process.env.HINTBOX_FREEZER } : {}),
  };
  // The sandbox user (10001 when hintbox runs as root) must be able to write the workspace.
  writeFileSync(path.join(workspace, 'file.txt'), 'benchmark\n');
  if (process.getuid?.() === 0) {
    chownSync(workspace, 10001, 10001);
    chownSync(path.join(workspace, 'file.txt'), 10001, 10001);
  }
  // Cold start with an approved lock file, as in production: approve once (not timed).
  execFileSync(HINTBOX_BIN, ['approve', profile, '--all', '--yes'], {
    env: { ...process.env, ...hintboxEnv },
    stdio: 'ignore',
  });
  // The same server without a lock file (trusted on first use: no cold start), held (the default:
  // thawed for each call, frozen after) and let run free (hold: false), for the cost of holding.
  writeFileSync(heldProfile, trustedText + allowWrites);
  writeFileSync(freeProfile, trustedText + allowWrites + 'hold: false\n');

  const startHintbox = (file: string) =>
    spawnServer('/workspace', HINTBOX_BIN, ['run', file], hintboxEnv, values.verbose);
  const settled = () => settle(docker, IMAGE);
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
    hintbox: () => startHintbox(profile),
  };

  const rounds: Record<VariantName, RoundResult>[] = [];
  try {
    for (let round = 1; round <= (values.steady ? ROUNDS : 0); round++) {
      const results = {} as Record<VariantName, RoundResult>;
      for (const variant of VARIANTS) {
        log.info(`round ${round}/${ROUNDS}: ${variant}`);
        results[variant] = await measure(starters[variant], docker);
        await settled();
      }
      rounds.push(results);
    }
    const holding = !values.holding
      ? []
      : await measureHolding({
          rounds: ROUNDS,
          calls: CALLS,
          warmup: WARMUP,
          heldProfile,
          freeProfile,
          startHintbox,
          settle: settled,
          log,
        });
    // --steady no: none of the three variants' parts (the table, the scale, the first approve).
    const steady = values.steady
      ? {
          ...summarize(
            rounds,
            await measureScale({ docker, scale: SCALE, profile, startHintbox, settle: settled, log }),
            {
              calls: CALLS,
              latencyCalls: LATENCY_CALLS,
              concurrency: CONCURRENCY,
            },
          ),
          freshApprove: measureFreshApprove(trustedText + allowWrites, workspace),
        }
      : undefined;
    const auditRecords = values.auditRecords;
    const auditLog = auditRecords > 0 ? await measureAuditLog(auditRecords) : undefined;
    const serve = !values.serve
      ? undefined
      : await measureServe({
          hintboxBin: HINTBOX_BIN,
          profileText: trustedText,
          env: hintboxEnv,
          rounds: ROUNDS,
          calls: CALLS,
          warmup: WARMUP,
          scale: values.serveScale,
          log,
        });
    const report = {
      ...steady,
      holding,
      ...(auditLog ? { auditLog } : {}),
      ...(serve ? { serve } : {}),
    };
    const parts = steady
      ? [formatReport({ ...steady, ...report }, CONCURRENCY)]
      : [
          holding.length > 0 ? formatHolding(holding).join('\n') : undefined,
          auditLog ? formatAuditLogFigures(auditLog).join('\n') : undefined,
        ];
    if (serve) parts.push(formatServe(serve));
    const text = parts.filter((p) => p !== undefined).join('\n\n');
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
    // Each block of warm-up calls timed: the curve shows where every variant's steady state begins.
    const warmup: RoundResult['warmup'] = [];
    for (let done = 0; done < WARMUP;) {
      const block: number[] = [];
      for (; block.length < WARMUP_BLOCK && done < WARMUP; done++) {
        const s = performance.now();
        await call();
        block.push(performance.now() - s);
      }
      warmup.push({ p50: percentile(block, 50), p99: percentile(block, 99) });
    }
    const samples: number[] = [];
    for (let i = 0; i < LATENCY_CALLS; i++) {
      const s = performance.now();
      await call();
      samples.push(performance.now() - s);
    }
    const throughput: Record<number, number> = {};
    for (const inFlight of CONCURRENCY) throughput[inFlight] = await callsPerSecond(call, inFlight, CALLS);
    const cpu = await cpuPerCall(call, Math.max(...CONCURRENCY), CALLS * CPU_CALLS_FACTOR, running.pid);

    const loaded = performance.now();
    const afterLoadMb = rssMb(running.pid);
    const sandboxMb = await sandboxMemory(docker, running.pid);
    await delay(REST_MS - (performance.now() - loaded));
    return {
      coldStartMs,
      firstReadMs,
      firstWriteMs,
      latency: { p50: percentile(samples, 50), p99: percentile(samples, 99) },
      throughput,
      rssMb: afterLoadMb,
      restRssMb: rssMb(running.pid),
      sandboxMb,
      cpu,
      warmup,
    };
  } finally {
    await running.close();
  }
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
      execFileSync(HINTBOX_BIN, ['approve', file, '--all', '--yes'], {
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

main().catch((error: unknown) => {
  log.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
  process.exitCode = 1;
});
