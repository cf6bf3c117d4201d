import { writeFileSync } from 'node:fs';
import { ensureFaultyImage } from '../integration/support/docker.js';
import {
  auditDiskFull,
  crashAnywhere,
  crashDuringPreview,
  crashWithDatabase,
  engineRestart,
  faultTable,
  load,
  sandboxFaults,
  sinkDownUnderLoad,
  type CaseResult,
} from './fault-cases.js';

/**
 * `npm run faults`: the long forms of the fault cases (issue 17), with a table of case, runs,
 * failures, records lost and leftovers, also written to faults-report.md. Runs and seed from
 * HINTBOX_FAULTS_CRASH_RUNS (default 50), HINTBOX_FAULTS_PREVIEW_RUNS (10), HINTBOX_FAULTS_DATABASE_RUNS (10), HINTBOX_FAULTS_SANDBOX_RUNS (3), HINTBOX_FAULTS_DISK_RUNS
 * (3; needs root), HINTBOX_FAULTS_LOAD (1000 calls), HINTBOX_FAULTS_SINK_DOWN_SECONDS (60: how long
 * the audit sink's Postgres is down under load) and HINTBOX_FAULTS_SEED (1);
 * HINTBOX_FAULTS_ENGINE_RESTART=1 adds the engine restart (it stops every container of the engine). Exits 1 when any case failed.
 */
const numberFrom = (name: string, fallback: number): number => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(value) || value < 0)
    throw new Error(`${name}: expected a whole number, got ${process.env[name]}`);
  return value;
};

const seed = numberFrom('HINTBOX_FAULTS_SEED', 1);
const crashRuns = numberFrom('HINTBOX_FAULTS_CRASH_RUNS', 50);
const previewRuns = numberFrom('HINTBOX_FAULTS_PREVIEW_RUNS', 10);
const databaseRuns = numberFrom('HINTBOX_FAULTS_DATABASE_RUNS', 10);
const sandboxRuns = numberFrom('HINTBOX_FAULTS_SANDBOX_RUNS', 3);
const diskRuns = numberFrom('HINTBOX_FAULTS_DISK_RUNS', 3);
const loadCalls = numberFrom('HINTBOX_FAULTS_LOAD', 1000);
const sinkDownSeconds = numberFrom('HINTBOX_FAULTS_SINK_DOWN_SECONDS', 60);
// A case given 0 runs is left out.
const cases: [string, number, () => Promise<CaseResult>][] = [
  ['crash', crashRuns, () => crashAnywhere(crashRuns, seed)],
  ['preview', previewRuns, () => crashDuringPreview(previewRuns, seed)],
  ['database', databaseRuns, () => crashWithDatabase(databaseRuns, seed)],
  ['sandbox', sandboxRuns, () => sandboxFaults(sandboxRuns)],
  ['disk', diskRuns, () => auditDiskFull(diskRuns)],
  ['load', loadCalls, () => load(loadCalls)],
  ['sink', sinkDownSeconds, () => sinkDownUnderLoad(sinkDownSeconds)],
  // Restarts this machine's Docker engine (every container of it stops): only when asked.
  ['engine', process.env.HINTBOX_FAULTS_ENGINE_RESTART === '1' ? 2 : 0, () => engineRestart(2)],
];

await ensureFaultyImage();
const results: CaseResult[] = [];
for (const [name, runs, run] of cases) {
  if (runs === 0) continue;
  const started = Date.now();
  process.stderr.write(`faults: ${name}…\n`);
  const result = await run();
  results.push(result);
  process.stderr.write(`faults: ${name} done in ${Math.round((Date.now() - started) / 1000)} s\n`);
  for (const problem of result.problems) process.stderr.write(`  ${problem}\n`);
}
const table = faultTable(results);
const report = `# hintbox fault suite (${new Date().toISOString()}, seed ${seed})\n\n${table}\n`;
writeFileSync('faults-report.md', report);
process.stdout.write(`${table}\n`);
process.exit(results.some((r) => r.failures > 0) ? 1 : 0);
