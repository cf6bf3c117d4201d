import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BENCH_HELP, BenchUsageError, parseBenchOptions } from '../../bench/bench-options.js';

describe('the bench flags', () => {
  it('defaults to the full run', () => {
    const options = parseBenchOptions([]);
    assert.notEqual(options, 'help');
    assert.deepEqual(options, {
      json: false,
      verbose: false,
      rounds: 5,
      calls: 5000,
      latencyCalls: 10000,
      warmup: 8000,
      scale: [1, 5, 20],
      holding: true,
      auditRecords: 1_000_000,
      concurrency: [1, 8, 32],
      serve: true,
      serveScale: [1, 5, 20],
      steady: true,
    });
  });

  it('--help and -h ask for the help text, which names every flag', () => {
    assert.equal(parseBenchOptions(['--help']), 'help');
    assert.equal(parseBenchOptions(['-h']), 'help');
    for (const flag of [
      '--json',
      '--rounds',
      '--calls',
      '--warmup',
      '--concurrency',
      '--scale',
      '--holding',
      '--steady',
    ])
      assert.match(BENCH_HELP, new RegExp(`${flag}\\b`));
  });

  it('an unknown flag, a stray argument or an unusable value is one line naming it', () => {
    const cases: [string[], RegExp][] = [
      [['--bogus'], /^Unknown option '--bogus' \(npm run bench -- --help lists them\)$/],
      [['extra'], /^Unexpected argument 'extra'/],
      [['--rounds', '0'], /^--rounds: expected a whole number ≥ 1, got '0'$/],
      [['--scale', '1,x'], /^--scale: expected whole numbers ≥ 1 separated by commas, got '1,x'$/],
      [['--serve', 'maybe'], /^--serve: expected yes or no, got 'maybe'$/],
      [['--steady', 'nope'], /^--steady: expected yes or no, got 'nope'$/],
    ];
    for (const [args, message] of cases) {
      assert.throws(
        () => parseBenchOptions(args),
        (error: Error) =>
          error instanceof BenchUsageError && message.test(error.message) && !error.message.includes('\n'),
      );
    }
  });

  it('takes the values given', () => {
    const options = parseBenchOptions(['--rounds', '3', '--scale', '1,5', '--serve', 'no', '--audit-records', '0']);
    assert.ok(options !== 'help');
    assert.equal(options.rounds, 3);
    assert.deepEqual(options.scale, [1, 5]);
    assert.equal(options.serve, false);
    assert.equal(options.auditRecords, 0);
    const serveAlone = parseBenchOptions(['--steady', 'no', '--holding', 'no']);
    assert.ok(serveAlone !== 'help');
    assert.equal(serveAlone.steady, false);
    assert.equal(serveAlone.serve, true);
  });
});
