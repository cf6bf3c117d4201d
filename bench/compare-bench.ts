/**
 * The benchmark's figures for two builds side by side: before and after a change.
 *
 *   node --import tsx bench/compare-bench.ts --before ../main --after . --runs 3 -- --rounds 1 --serve no
 *
 * Builds each checkout once (`npm run build`: the bench runs a checkout's own dist/hintbox.mjs),
 * then runs each checkout's own bench (`bench/run-bench.ts --json` and the flags after `--`) in
 * turn, before, after, before, after, …, so that drift on a shared machine hits both alike. For
 * each figure it prints hintbox's value before and after (median over runs), after ÷ before
 * (median of the per-pair ratios), and which way is better. It measures and does not judge.
 * `--json` prints the same as JSON; `--save PREFIX` keeps each run's whole report (its JSON).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { median } from './stats.js';

/** One figure of a report: hintbox's value, and whether less of it is better. */
export interface FlatFigure {
  name: string;
  unit: string;
  value: number;
  lowerIsBetter: boolean;
  /** The bare server's figure: the same code in both builds, so it moves only with the machine. */
  machine?: true;
}

interface Stat {
  median: number;
}
/** The parts of `run-bench.ts --json` that are compared (the rest is left out). */
export interface BenchJson {
  figures: { name: string; unit: string; values: { hintbox: Stat; bare?: Stat }; ratio: number }[];
  freshApprove?: Stat;
  holding?: { name: string; held: number; free: number }[];
  scale?: { servers: number; startMs: number; hintboxRssMb: number; sandboxMb: number }[];
  serve?: {
    calls: { clients: number; p50Ms: Stat; p99Ms: Stat; callsPerSecond: Stat }[];
    /** serve with the lean node:http client (a report of a build before it has none). */
    lean?: { p50Ms: Stat; p99Ms: Stat; callsPerSecond: Stat };
    memory: { servers: number; rssMb: number; readyMs: number; verifiedMs?: number }[];
  };
  auditLog?: { appendUs: number; audit: { ms: number }; auditAll: { ms: number }; verify: { ms: number } };
}

/** Every figure of one report as a flat list, hintbox's side of each. Pure. */
export function flatFigures(report: BenchJson): FlatFigure[] {
  const out: FlatFigure[] = [];
  const add = (name: string, unit: string, value: number, lowerIsBetter = true) =>
    out.push({ name, unit, value, lowerIsBetter });
  for (const f of report.figures) {
    const higher = f.unit === 'calls/s';
    add(f.name, f.unit, f.values.hintbox.median, !higher);
    add(`${f.name}, hintbox ÷ docker`, '×', f.ratio, !higher);
    if (f.values.bare)
      out.push({
        name: `${f.name}, bare server (machine)`,
        unit: f.unit,
        value: f.values.bare.median,
        lowerIsBetter: !higher,
        machine: true,
      });
  }
  if (report.freshApprove) add('first approve --all on a fresh machine', 'ms', report.freshApprove.median);
  for (const h of report.holding ?? []) add(`holding: ${h.name}, held`, 'ms', h.held);
  for (const s of report.scale ?? []) {
    add(`scale ${s.servers}: all up`, 'ms', s.startMs);
    add(`scale ${s.servers}: hintbox processes`, 'MB', s.hintboxRssMb);
    add(`scale ${s.servers}: sandboxes`, 'MB', s.sandboxMb);
  }
  for (const c of report.serve?.calls ?? []) {
    add(`serve, ${c.clients} client(s): p50`, 'ms', c.p50Ms.median);
    add(`serve, ${c.clients} client(s): p99`, 'ms', c.p99Ms.median);
    add(`serve, ${c.clients} client(s): throughput`, 'calls/s', c.callsPerSecond.median, false);
  }
  if (report.serve?.lean) {
    add('serve, lean client: p50', 'ms', report.serve.lean.p50Ms.median);
    add('serve, lean client: p99', 'ms', report.serve.lean.p99Ms.median);
    add('serve, lean client: throughput', 'calls/s', report.serve.lean.callsPerSecond.median, false);
  }
  for (const m of report.serve?.memory ?? []) {
    add(`serve memory, ${m.servers} server(s)`, 'MB', m.rssMb);
    add(`serve ready, ${m.servers} server(s)`, 'ms', m.readyMs);
    if (m.verifiedMs !== undefined) add(`serve verified, ${m.servers} server(s)`, 'ms', m.verifiedMs);
  }
  if (report.auditLog) {
    add('audit log: append per record', 'µs', report.auditLog.appendUs);
    add('hintbox audit (newest 100)', 'ms', report.auditLog.audit.ms);
    add('hintbox audit --all --json', 'ms', report.auditLog.auditAll.ms);
    add('hintbox audit verify', 'ms', report.auditLog.verify.ms);
  }
  return out;
}

/** One row of the comparison: medians over runs, and after ÷ before taken pair by pair. */
export interface ComparedFigure {
  name: string;
  unit: string;
  before: number;
  after: number;
  /** after ÷ before, median of the per-pair ratios. */
  ratio: number;
  /** The lowest and highest per-pair ratio: how far the pairs agree. */
  low: number;
  high: number;
  lowerIsBetter: boolean;
  machine?: true;
}

/** How much worse a pair must be to count as worse (the machines' run-to-run noise is larger than this). */
export const WORSE_BY = 0.05;

/** Worse in every pair by more than {@link WORSE_BY}: a change, not noise (one worse pair is not enough). Pure. */
export function worseInEveryPair(row: ComparedFigure): boolean {
  return row.lowerIsBetter ? row.low > 1 + WORSE_BY : row.high < 1 - WORSE_BY;
}

/** Before and after runs (paired by index) figure by figure; a figure missing from a run is left out. Pure. */
export function compareRuns(before: BenchJson[], after: BenchJson[]): ComparedFigure[] {
  const pairs = before.slice(0, after.length).map((b, i) => [flatFigures(b), flatFigures(after[i] as BenchJson)]);
  const names = pairs[0]?.[0]?.map((f) => f.name) ?? [];
  const out: ComparedFigure[] = [];
  for (const name of names) {
    const found = pairs.map(([b, a]) => [b?.find((f) => f.name === name), a?.find((f) => f.name === name)]);
    if (found.some(([b, a]) => !b || !a)) continue;
    const both = found as [FlatFigure, FlatFigure][];
    const first = both[0]![0];
    const ratios = both.map(([b, a]) => a.value / b.value);
    out.push({
      name,
      unit: first.unit,
      before: median(both.map(([b]) => b.value)),
      after: median(both.map(([, a]) => a.value)),
      ratio: median(ratios),
      low: Math.min(...ratios),
      high: Math.max(...ratios),
      lowerIsBetter: first.lowerIsBetter,
      ...(first.machine ? { machine: true as const } : {}),
    });
  }
  return out;
}

/** The comparison as a table. Pure. */
export function formatComparison(rows: ComparedFigure[], runs: number): string {
  const fmt = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
  const cells = rows.map((r) => [
    r.name,
    fmt(r.before),
    fmt(r.after),
    r.unit,
    `${r.ratio.toFixed(2)}×`,
    `${r.low.toFixed(2)}–${r.high.toFixed(2)}`,
    r.lowerIsBetter ? 'lower' : 'higher',
    r.machine ? 'machine' : worseInEveryPair(r) ? 'WORSE' : '',
  ]);
  const header = ['figure (hintbox)', 'before', 'after', 'unit', 'after/before', 'pairs', 'better', 'every pair worse'];
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] ?? '').length)));
  const line = (c: string[]) =>
    c
      .map((x, i) => x.padEnd(widths[i] ?? 0))
      .join(' | ')
      .trimEnd();
  return [
    `${runs} run(s) of each build, in turn; median over runs, after/before taken pair by pair ` +
      `(pairs: its lowest and highest; WORSE: more than ${WORSE_BY * 100} % worse in every pair). ` +
      'A "bare server (machine)" row is the same server without hintbox, the same code in both ' +
      'builds: where it moved, so did the machine, and hintbox ÷ docker is the figure to read.',
    '',
    line(header),
    widths.map((w) => '-'.repeat(w)).join('-|-'),
    ...cells.map(line),
  ].join('\n');
}

function runBench(checkout: string, flags: string[]): BenchJson {
  const run = spawnSync(
    process.execPath,
    ['--import', 'tsx', path.join(checkout, 'bench', 'run-bench.ts'), '--json', ...flags],
    { cwd: checkout, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 * 1024 * 1024 },
  );
  if (run.status !== 0) throw new Error(`the bench in ${checkout} exited with ${run.status ?? run.signal}`);
  return JSON.parse(run.stdout) as BenchJson;
}

const USAGE = `usage: node --import tsx bench/compare-bench.ts --before <checkout> [options] [-- <bench flags>]

Builds two checkouts, runs each one's own bench in turn (before, after, before, ...) and prints
hintbox's figures of both, after ÷ before taken pair by pair.

  --before DIR     the checkout to compare against (required), e.g. a git worktree of an older commit
  --after DIR      the checkout of the change (default .)
  --runs N         runs of each build (default 3)
  --json           the comparison as JSON on stdout
  --save PREFIX    keep each run's whole report as PREFIX-before-1.json, PREFIX-after-1.json, ...
  -h, --help       this text
  -- FLAGS         passed to both benches (npm run bench -- --help lists them)
`;

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      before: { type: 'string' },
      after: { type: 'string', default: '.' },
      runs: { type: 'string', default: '3' },
      json: { type: 'boolean' },
      /** Each run's whole report, as `<prefix>-before-1.json`, `<prefix>-after-1.json`, … */
      save: { type: 'string' },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  if (!values.before) throw new Error('--before <checkout> is required (the build to compare against); see --help');
  const checkouts = { before: path.resolve(values.before), after: path.resolve(values.after) };
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a whole number from 1: ${values.runs}`);
  for (const dir of Object.values(checkouts)) {
    process.stderr.write(`compare: building ${dir}\n`);
    execFileSync('npm', ['run', 'build'], { cwd: dir, stdio: ['ignore', 2, 2] });
  }
  const results: { before: BenchJson[]; after: BenchJson[] } = { before: [], after: [] };
  for (let run = 1; run <= runs; run++) {
    for (const side of ['before', 'after'] as const) {
      process.stderr.write(`compare: run ${run}/${runs}, ${side} (${checkouts[side]})\n`);
      const report = runBench(checkouts[side], positionals);
      if (values.save) writeFileSync(`${values.save}-${side}-${run}.json`, JSON.stringify(report, null, 2) + '\n');
      results[side].push(report);
    }
  }
  const rows = compareRuns(results.before, results.after);
  process.stdout.write(
    (values.json ? JSON.stringify({ checkouts, runs, figures: rows }, null, 2) : formatComparison(rows, runs)) + '\n',
  );
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  try {
    main();
  } catch (error) {
    const { code, message } = error as { code?: string; message?: string };
    const usage = code?.startsWith('ERR_PARSE_ARGS_') === true;
    const line = usage ? `${(message ?? '').split('. ')[0]}; see --help` : (message ?? String(error));
    process.stderr.write(`compare: ${line}\n`);
    process.exitCode = usage ? 2 : 1;
  }
}
