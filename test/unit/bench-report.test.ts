import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatReport, summarize, VARIANTS, type RoundResult, type VariantName } from '../../bench/bench-report.js';

/** One variant's round: every figure `x`, its warm-up blocks as given. */
function round(x: number, warmup: { p50: number; p99: number }[]): RoundResult {
  return {
    coldStartMs: x,
    firstReadMs: x,
    firstWriteMs: x,
    latency: { p50: x, p99: x },
    throughput: { 1: x },
    rssMb: x,
    restRssMb: x,
    sandboxMb: [],
    cpu: { total: x },
    warmup,
  };
}

const rounds = (blocks: { p50: number; p99: number }[][]): Record<VariantName, RoundResult>[] =>
  blocks.map(
    (warmup) => Object.fromEntries(VARIANTS.map((v) => [v, round(1, warmup)])) as Record<VariantName, RoundResult>,
  );

describe('the bench report', () => {
  it('holds the memory target against the resident memory at rest, not right after the load', () => {
    const hintbox = { ...round(1, []), rssMb: 66, restRssMb: 59 };
    const report = summarize([{ bare: round(1, []), docker: round(1, []), hintbox }], [], {
      calls: 1000,
      latencyCalls: 10000,
      concurrency: [1],
    });
    const memory = report.figures.filter((f) => f.name.startsWith('resident memory'));
    assert.deepEqual(
      memory.map((f) => [f.values.hintbox.median, f.target?.met]),
      [
        [66, undefined],
        [59, true],
      ],
    );
  });

  it('gives each warm-up block the median over rounds, as many blocks as every round has', () => {
    const report = summarize(
      rounds([
        [
          { p50: 3, p99: 9 },
          { p50: 1, p99: 2 },
        ],
        [
          { p50: 5, p99: 7 },
          { p50: 2, p99: 4 },
          { p50: 1, p99: 1 },
        ],
        [
          { p50: 4, p99: 8 },
          { p50: 3, p99: 3 },
        ],
      ]),
      [],
      { calls: 1000, latencyCalls: 10000, concurrency: [1] },
    );
    assert.deepEqual(report.warmup.hintbox, [
      { p50: 4, p99: 8 },
      { p50: 2, p99: 3 },
    ]);
  });

  it('prints the curve of each variant under the table, and nothing of it without warm-up', () => {
    const print = (warmup: { p50: number; p99: number }[]) =>
      formatReport(
        {
          ...summarize(rounds([warmup]), [], { calls: 1000, latencyCalls: 10000, concurrency: [1] }),
          freshApprove: { median: 1, spread: 0 },
          holding: [],
        },
        [1],
      );
    const text = print([
      { p50: 0.93, p99: 6.1 },
      { p50: 0.24, p99: 0.72 },
    ]);
    assert.match(text, /^warm-up: p50 \/ p99 \(ms\) of each 1000 warm-up calls/m);
    assert.match(text, /^ {2}hintbox 0\.93\/6\.10 {2}0\.24\/0\.72$/m);
    assert.doesNotMatch(print([]), /warm-up/);
  });
});
