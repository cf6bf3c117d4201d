/**
 * What holding costs a write call, for two builds in one run: each build's held writer against
 * its `hold: false` writer (as holding-bench.ts measures one), interleaved round by round —
 * before held, before free, after held, after free — so that both ratios are taken under the
 * same load.
 *
 *   node --import tsx bench/holding-ab.ts --before ../main --after . [--rounds 3] [--calls 1000] [--warmup 8000]
 *
 * Each checkout must be built (`npm run build`): its own dist/hintbox.mjs runs.
 */
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ImageBuilder, IMAGES_DIR } from '../src/engine/docker/image-builder.js';
import { connectDocker } from '../src/engine/docker/docker-connection.js';
import { relocatedProfileText } from '../src/profile/relocate-profile.js';
import { createLogger } from '../src/util/logger.js';
import { settle, spawnServer } from './spawn-server.js';
import { median, percentile } from './stats.js';
import { toolArgs } from './tool-args.js';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const IMAGE = 'hintbox/server-filesystem:2026.8.31';
const log = createLogger('info', (line) => process.stderr.write(line + '\n'), { prefix: 'holding-ab' });

async function main(): Promise<void> {
  const { values } = toolArgs(
    'holding-ab',
    'What holding costs a write call, for two builds in one run (--before, --after), interleaved round by round.',
    {
      options: {
        before: { type: 'string' },
        after: { type: 'string', default: '.' },
        rounds: { type: 'string', default: '3' },
        calls: { type: 'string', default: '1000' },
        warmup: { type: 'string', default: '8000' },
      },
    },
  );
  if (!values.before)
    throw new Error('usage: holding-ab.ts --before DIR [--after DIR] [--rounds N] [--calls N] [--warmup N]');
  const { docker } = await connectDocker();
  await new ImageBuilder({ docker, log }).ensure(IMAGE, path.join(IMAGES_DIR, 'server-filesystem'));
  const workspace = mkdtempSync(path.join(os.tmpdir(), 'hintbox-bench-'));
  const state = mkdtempSync(path.join(os.tmpdir(), 'hintbox-bench-state-'));
  writeFileSync(path.join(workspace, 'file.txt'), 'benchmark\n');
  if (process.getuid?.() === 0) {
    chownSync(workspace, 10001, 10001);
    chownSync(path.join(workspace, 'file.txt'), 10001, 10001);
  }
  const text = relocatedProfileText(path.join(REPO, 'profiles/filesystem.yaml')).replace(
    /^trust: untrusted$/m,
    'trust: trusted',
  );
  const allowWrites = '\ntools:\n  write_file:\n    approval: allow\n';
  const profiles = { held: path.join(state, 'held.yaml'), free: path.join(state, 'free.yaml') };
  writeFileSync(profiles.held, text + allowWrites);
  writeFileSync(profiles.free, text + allowWrites + 'hold: false\n');
  const env = { WORKSPACE: workspace, HINTBOX_LOG_LEVEL: 'warn', HINTBOX_STATE_DIR: state };
  const builds = { before: path.resolve(values.before), after: path.resolve(values.after) };
  const calls = Number(values.calls);
  const rounds: Record<string, { p50: number; p99: number }>[] = [];
  try {
    for (let round = 1; round <= Number(values.rounds); round++) {
      const result: Record<string, { p50: number; p99: number }> = {};
      for (const build of ['before', 'after'] as const) {
        for (const variant of ['held', 'free'] as const) {
          log.info(`round ${round}: ${build} ${variant}`);
          const bin = path.join(builds[build], 'dist', 'hintbox.mjs');
          const running = await spawnServer('/workspace', bin, ['run', profiles[variant]], env);
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
            // The steady state, as the bench's: every process has compiled its hot code (docs/benchmarks.md).
            for (let i = 0; i < Number(values.warmup); i++) await write();
            const samples: number[] = [];
            for (let i = 0; i < calls; i++) {
              const t = performance.now();
              await write();
              samples.push(performance.now() - t);
            }
            result[`${build} ${variant}`] = { p50: percentile(samples, 50), p99: percentile(samples, 99) };
          } finally {
            await running.close();
          }
          await settle(docker, IMAGE);
        }
      }
      rounds.push(result);
    }
  } finally {
    rmSync(workspace, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
  }
  const ms = (v: number) => v.toFixed(2);
  const of = (key: string, p: 'p50' | 'p99') => median(rounds.map((r) => r[key]![p]));
  const ratio = (a: string, b: string, p: 'p50' | 'p99') => median(rounds.map((r) => r[a]![p] / r[b]![p]));
  process.stdout.write(
    `load ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}; ${rounds.length} rounds × ${calls} calls\n`,
  );
  for (const p of ['p50', 'p99'] as const) {
    for (const build of ['before', 'after']) {
      process.stdout.write(
        `${build.padEnd(6)} ${p}: held ${ms(of(`${build} held`, p))} free ${ms(of(`${build} free`, p))} ms, held/free ${ratio(`${build} held`, `${build} free`, p).toFixed(2)}×\n`,
      );
    }
    process.stdout.write(`held after/before ${p}: ${ratio('after held', 'before held', p).toFixed(2)}×\n`);
  }
}

main().catch((error: Error) => {
  process.stderr.write(`${error.stack ?? error.message}\n`);
  process.exit(1);
});
