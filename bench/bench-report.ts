/**
 * The benchmark's rounds summed up (median and spread over rounds, hintbox ÷ docker pair by
 * pair) and printed as its table.
 */
import os from 'node:os';
import { formatAuditLogFigures, type AuditLogFigures } from './audit-log-bench.js';
import { CPU_CALLS_FACTOR } from './cpu-per-call.js';
import type { HoldingFigure } from './holding-bench.js';
import type { ScaleResult } from './scale-bench.js';
import { median, spread } from './stats.js';

export type VariantName = 'bare' | 'docker' | 'hintbox';
export const VARIANTS: VariantName[] = ['bare', 'docker', 'hintbox'];
/** What the launched process is, per variant. */
const LAUNCHED: Record<VariantName, string> = { bare: 'server', docker: 'docker CLI', hintbox: 'hintbox' };

/** One variant's figures in one round. */
export interface RoundResult {
  coldStartMs: number;
  /** Launch → first answered call of each sandbox class (for hintbox: read-only, then writing). */
  firstReadMs: number;
  firstWriteMs: number;
  latency: { p50: number; p99: number };
  throughput: Record<number, number>;
  /** Resident memory right after the load (where V8's collection cycle stood then: it swings MBs). */
  rssMb: number;
  /** Resident memory at rest: {@link REST_MS} after the load's last call. */
  restRssMb: number;
  sandboxMb: number[];
  /** CPU time per call (µs) at the highest concurrency, by component, all processes of the machine. */
  cpu: Record<string, number>;
  /** Latency (ms) of each block of `WARMUP_BLOCK` warm-up calls, in order: how the steady state was reached. */
  warmup: { p50: number; p99: number }[];
}

/**
 * How long after the load's last call the resident memory at rest is read: `hintbox run`
 * collects once its client has been quiet for 1 s (src/util/idle-collection.ts).
 */
export const REST_MS = 3000;

/** Warm-up calls per block of the warm-up curve. */
export const WARMUP_BLOCK = 1000;

/** One row of the table: a figure of each variant over the rounds, and hintbox ÷ docker. */
export interface Figure {
  name: string;
  unit: string;
  values: Record<VariantName, { median: number; spread: number }>;
  /** hintbox ÷ docker, median of per-round ratios. */
  ratio: number;
  target?: { text: string; met: boolean };
}

/** The rounds summed up into figures (the JSON of `--json`, with what main adds to it). */
export function summarize(
  rounds: Record<VariantName, RoundResult>[],
  scale: ScaleResult[],
  run: { calls: number; latencyCalls: number; concurrency: number[] },
) {
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
    ...run.concurrency.map((c) =>
      figure(`throughput, ${c} in flight`, 'calls/s', (r) => r.throughput[c] ?? 0, atLeast(0.95)),
    ),
    figure(`CPU per call, ${Math.max(...run.concurrency)} in flight (all processes)`, 'µs', (r) => r.cpu.total ?? 0),
    figure('resident memory of the launched process, right after the load', 'MB', (r) => r.rssMb),
    figure(
      `resident memory of the launched process, at rest (${REST_MS / 1000} s after the load)`,
      'MB',
      (r) => r.restRssMb,
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
    calls: run.calls,
    latencyCalls: run.latencyCalls,
    figures,
    sandboxMemoryMb: { median: median(sandboxMb), perSandbox: sandboxMb.length / Math.max(rounds.length, 1) },
    cpuPerCall: Object.fromEntries(
      VARIANTS.map((v) => {
        const components = [...new Set(rounds.flatMap((r) => Object.keys(r[v].cpu)))];
        return [v, Object.fromEntries(components.map((c) => [c, median(rounds.map((r) => r[v].cpu[c] ?? 0))]))];
      }),
    ) as Record<VariantName, Record<string, number>>,
    scale,
    /** Per variant, p50 and p99 (ms) of each warm-up block, median over rounds. */
    warmup: Object.fromEntries(
      VARIANTS.map((v) => {
        const blocks = Math.min(...rounds.map((r) => r[v].warmup.length));
        const at = (i: number, pick: (b: { p50: number; p99: number }) => number) =>
          median(rounds.map((r) => pick(r[v].warmup[i] ?? { p50: 0, p99: 0 })));
        return [v, Array.from({ length: blocks }, (_, i) => ({ p50: at(i, (b) => b.p50), p99: at(i, (b) => b.p99) }))];
      }),
    ) as Record<VariantName, { p50: number; p99: number }[]>,
  };
}

const fmt = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

/** The holding figures' lines. */
export function formatHolding(holding: HoldingFigure[]): string[] {
  return [
    'holding: write_file under hintbox, held (thawed for each call, frozen after) vs hold: false (ms, median over rounds)',
    ...holding.map(
      (h) =>
        `  ${h.name.padEnd(50)} held ${fmt(h.held)}  free ${fmt(h.free)}  held/free ${h.ratio.toFixed(2)}×  (+${fmt(h.held - h.free)} ms)` +
        (h.target ? `  ${h.target.text}: ${h.target.met ? 'met' : 'MISSED'}` : ''),
    ),
  ];
}

/**
 * The warm-up curve: p50 / p99 of each block of warm-up calls, per variant. The table's latency
 * and throughput are of the steady state only when each variant's last blocks have stopped
 * falling (every process's JIT has settled); the first block is what a short session sees.
 */
function formatWarmup(warmup: Record<VariantName, { p50: number; p99: number }[]>): string[] {
  if (VARIANTS.every((v) => warmup[v].length === 0)) return [];
  return [
    `warm-up: p50 / p99 (ms) of each ${WARMUP_BLOCK} warm-up calls, in order (median over rounds); the table starts after the last`,
    ...VARIANTS.map((v) => `  ${v.padEnd(7)} ${warmup[v].map((b) => `${fmt(b.p50)}/${fmt(b.p99)}`).join('  ')}`),
    '',
  ];
}

/** The table and the lines under it, as `npm run bench` prints them. */
export function formatReport(
  report: ReturnType<typeof summarize> & {
    freshApprove: { median: number; spread: number };
    holding: HoldingFigure[];
    auditLog?: AuditLogFigures;
  },
  concurrency: number[],
): string {
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
    `${report.rounds} round(s), ${report.latencyCalls} calls for p50 and p99, ${report.calls} per throughput figure, ${report.machine.cpus} CPUs, Node ${report.machine.node}; median ±(max−min)/2 over rounds`,
    '',
    line(header),
    widths.map((w) => '-'.repeat(w)).join('-|-'),
    ...rows.map(line),
    '',
    ...formatWarmup(report.warmup),
    `first hintbox approve --all on a fresh machine (no lock file, empty state folder; image built): ${fmt(report.freshApprove.median)} ±${fmt(report.freshApprove.spread)} ms`,
    '',
    `memory per hintbox sandbox (container, without page cache): median ${fmt(report.sandboxMemoryMb.median)} MB, ${report.sandboxMemoryMb.perSandbox} sandboxes per server`,
    '',
    `CPU per call at ${Math.max(...concurrency)} in flight, by process (µs, median over rounds; ${CPU_CALLS_FACTOR} × ${report.calls} calls):`,
    ...VARIANTS.map((v) => {
      const parts = Object.entries(report.cpuPerCall[v])
        .filter(([c, us]) => c !== 'total' && us >= 0.5)
        .sort((a, b) => b[1] - a[1])
        .map(([c, us]) => `${c === 'launched' ? LAUNCHED[v] : c} ${fmt(us)}`);
      return `  ${v.padEnd(7)} ${fmt(report.cpuPerCall[v].total ?? 0)} = ${parts.join(' + ')}`;
    }),
    '',
    ...formatHolding(report.holding),
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
