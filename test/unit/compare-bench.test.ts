import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  compareRuns,
  flatFigures,
  formatComparison,
  worseInEveryPair,
  type BenchJson,
} from '../../bench/compare-bench.js';

const report = (p50: number, perSecond: number, docker: number): BenchJson => ({
  figures: [
    { name: 'call latency p50', unit: 'ms', values: { hintbox: { median: p50 } }, ratio: p50 / docker },
    { name: 'throughput, 1 in flight', unit: 'calls/s', values: { hintbox: { median: perSecond } }, ratio: 1 },
  ],
  freshApprove: { median: 600 },
});

describe('the bench compared for two builds', () => {
  it('takes hintbox figures and knows which way each is better', () => {
    const flat = flatFigures(report(0.5, 2000, 0.5));
    assert.deepEqual(
      flat.map((f) => [f.name, f.value, f.lowerIsBetter]),
      [
        ['call latency p50', 0.5, true],
        ['call latency p50, hintbox ÷ docker', 1, true],
        ['throughput, 1 in flight', 2000, false],
        ['throughput, 1 in flight, hintbox ÷ docker', 1, false],
        ['first approve --all on a fresh machine', 600, true],
      ],
    );
  });

  it('pairs runs by index: medians of each side, and the median of the per-pair ratios', () => {
    // Pair 1 on a slow machine, pair 2 on a fast one: each pair says after is 2× before.
    const rows = compareRuns([report(1, 1000, 1), report(4, 250, 1)], [report(2, 500, 1), report(8, 125, 1)]);
    const p50 = rows.find((r) => r.name === 'call latency p50');
    assert.deepEqual(p50, {
      name: 'call latency p50',
      unit: 'ms',
      before: 2.5,
      after: 5,
      ratio: 2,
      low: 2,
      high: 2,
      lowerIsBetter: true,
    });
    assert.match(
      formatComparison(rows, 2),
      /call latency p50 .*\| 2\.50 .*\| 5\.00 .*\| ms .*\| 2\.00× .*\| 2\.00–2\.00 \| lower .*\| WORSE/,
    );
  });

  it('calls a figure worse only when every pair says so, by more than 5 %', () => {
    // p50: 1.3× worse in one pair, 0.9× in the other (noise); throughput: 0.8× in both pairs (worse).
    const rows = compareRuns([report(1, 1000, 1), report(1, 1000, 1)], [report(1.3, 800, 1), report(0.9, 800, 1)]);
    const row = (name: string) => rows.find((r) => r.name === name)!;
    assert.equal(worseInEveryPair(row('call latency p50')), false);
    assert.deepEqual([row('call latency p50').low, row('call latency p50').high], [0.9, 1.3]);
    assert.equal(worseInEveryPair(row('throughput, 1 in flight')), true);
    // 4 % worse in every pair is within the noise the verdict allows.
    const slight = compareRuns([report(1, 1000, 1)], [report(1.04, 1000, 1)]);
    assert.equal(worseInEveryPair(slight.find((r) => r.name === 'call latency p50')!), false);
  });

  it('shows the bare server beside each figure, as the machine, never judged WORSE', () => {
    const withBare = (p50: number, bare: number): BenchJson => ({
      figures: [
        {
          name: 'call latency p50',
          unit: 'ms',
          values: { hintbox: { median: p50 }, bare: { median: bare } },
          ratio: 1,
        },
      ],
    });
    // The machine was twice as slow in both after runs: bare moved as much as hintbox.
    const rows = compareRuns([withBare(1, 0.5), withBare(1, 0.5)], [withBare(2, 1), withBare(2, 1)]);
    const bare = rows.find((r) => r.name === 'call latency p50, bare server (machine)')!;
    assert.deepEqual([bare.before, bare.after, bare.ratio, bare.machine], [0.5, 1, 2, true]);
    const table = formatComparison(rows, 2);
    assert.match(table, /bare server \(machine\) .*\| 2\.00–2\.00 \| lower .*\| machine/);
    assert.match(table, /^call latency p50 .*\| WORSE$/m);
  });

  it('leaves out a figure that one side lacks (a flag only one build knows)', () => {
    const before = report(1, 1000, 1);
    const after = { ...report(1, 1000, 1), freshApprove: undefined };
    assert.ok(!compareRuns([before], [after]).some((r) => r.name.startsWith('first approve')));
  });
});
