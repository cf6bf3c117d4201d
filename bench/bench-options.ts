/**
 * The flags of `npm run bench` (run-bench.ts): parsed and checked before anything starts, so a
 * typo is one line and exit 2, and `--help` prints them. Pure: no I/O.
 */
import { parseArgs } from 'node:util';

/** The run as its flags set it. */
export interface BenchOptions {
  json: boolean;
  verbose: boolean;
  rounds: number;
  calls: number;
  latencyCalls: number;
  warmup: number;
  scale: number[];
  holding: boolean;
  auditRecords: number;
  concurrency: number[];
  serve: boolean;
  serveScale: number[];
  steady: boolean;
}

/** A flag the bench does not know, or a value it cannot use: one line for stderr. */
export class BenchUsageError extends Error {}

/** What `--help` prints. */
export const BENCH_HELP = `usage: npm run bench -- [options]

Measures the filesystem MCP server bare, under docker run -i and under hintbox run, interleaved
round by round, then what holding a writer costs, N servers at once, the audit log and serve.

  --json                  the report as JSON on stdout (progress stays on stderr)
  --verbose               hintbox's own log (with ms since launch) on stderr
  --rounds N              rounds of each variant (default 5)
  --calls N               calls per throughput figure (default 5000: at 32 in flight 1000
                          calls pass in ~0.15 s, a window one collection or one scheduler
                          hiccup decides; 5 × N for the CPU per call at the highest)
  --latency-calls N       calls timed one at a time for p50 and p99 (default 10000: the p99 of
                          1000 calls is their 10th worst, and whether one of a process's full
                          collections falls among them decides it)
  --warmup N              calls before measuring, per variant (default 8000: until every
                          variant's JIT has settled; the report shows the curve by 1000)
  --concurrency A,B,...   calls in flight for the throughput figures (default 1,8,32)
  --scale A,B,...         hintbox run processes started at once (default 1,5,20)
  --holding yes|no        held writer against hold: false (default yes)
  --audit-records N       records of the audit-log figures, 0 leaves them out (default 1000000)
  --serve yes|no          hintbox serve's figures (default yes): serve and run each with a raw client
                          of the same weight, in alternating batches (the target's figure); serve with
                          the SDK's HTTP client and a lean node:http one, run with the SDK's stdio
                          client and the SDK's HTTP alone, interleaved round by round
  --serve-scale A,B,...   servers in one serve process for its ready and memory figures (default 1,5,20)
  --steady yes|no         the three variants' rounds (the table), --scale and the first approve
                          (default yes); no: only the parts asked besides (--holding, --audit-records,
                          --serve), e.g. the serve part alone:
                          --steady no --holding no --audit-records 0 --serve yes --serve-scale 1
  -h, --help              this text`;

const DEFAULTS = {
  rounds: '5',
  calls: '5000',
  'latency-calls': '10000',
  warmup: '8000',
  scale: '1,5,20',
  holding: 'yes',
  'audit-records': '1000000',
  concurrency: '1,8,32',
  serve: 'yes',
  'serve-scale': '1,5,20',
  steady: 'yes',
} as const;

/**
 * The bench's options from its arguments; `'help'` for `-h`/`--help`. Throws
 * {@link BenchUsageError} naming the flag for an unknown flag or a value it cannot use.
 */
export function parseBenchOptions(args: string[]): BenchOptions | 'help' {
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({
      args,
      options: {
        json: { type: 'boolean' },
        verbose: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        ...Object.fromEntries(Object.keys(DEFAULTS).map((name) => [name, { type: 'string' as const }])),
      },
    }).values;
  } catch (error) {
    // parseArgs says "Unknown option '--x'. …" and more: the first sentence is the line.
    throw new BenchUsageError(`${(error as Error).message.split('. ')[0]} (npm run bench -- --help lists them)`);
  }
  if (values.help) return 'help';
  const text = (name: keyof typeof DEFAULTS) => (values[name] as string | undefined) ?? DEFAULTS[name];
  const count = (name: keyof typeof DEFAULTS, min: number): number => {
    const value = text(name);
    if (!/^\d+$/.test(value) || Number(value) < min)
      throw new BenchUsageError(`--${name}: expected a whole number ≥ ${min}, got '${value}'`);
    return Number(value);
  };
  const list = (name: keyof typeof DEFAULTS): number[] => {
    const value = text(name);
    if (!/^\d+(,\d+)*$/.test(value) || value.split(',').some((n) => Number(n) < 1))
      throw new BenchUsageError(`--${name}: expected whole numbers ≥ 1 separated by commas, got '${value}'`);
    return value.split(',').map(Number);
  };
  const yesNo = (name: keyof typeof DEFAULTS): boolean => {
    const value = text(name);
    if (value !== 'yes' && value !== 'no') throw new BenchUsageError(`--${name}: expected yes or no, got '${value}'`);
    return value === 'yes';
  };
  return {
    json: values.json === true,
    verbose: values.verbose === true,
    rounds: count('rounds', 1),
    calls: count('calls', 1),
    latencyCalls: count('latency-calls', 1),
    warmup: count('warmup', 0),
    scale: list('scale'),
    holding: yesNo('holding'),
    auditRecords: count('audit-records', 0),
    concurrency: list('concurrency'),
    serve: yesNo('serve'),
    serveScale: list('serve-scale'),
    steady: yesNo('steady'),
  };
}
