import fc from 'fast-check';

/**
 * What the fuzz tests (`test/unit/fuzz-*.test.ts`) share: how long they run, and the hostile
 * values they are made of.
 *
 * `npm test` runs them with a fixed seed and each property's own few runs; `npm run fuzz` with
 * `HINTBOX_FUZZ_RUNS` runs of every property (e.g. 20000) and, to look elsewhere, another
 * `HINTBOX_FUZZ_SEED`. A failure prints its seed and path: run again with that seed (and the
 * same runs) to replay it.
 */

/** The seed of every property (default fixed, so CI runs the same inputs each time). */
export const FUZZ_SEED = integerFromEnv('HINTBOX_FUZZ_SEED', 17);

/** Runs per property: `HINTBOX_FUZZ_RUNS` when set, else the property's own (a short run). */
export function fuzzRuns(defaultRuns: number): number {
  const asked = integerFromEnv('HINTBOX_FUZZ_RUNS', 0);
  return asked > 0 ? asked : defaultRuns;
}

/** The parameters of one property: its seed, its runs, and a bound on each async run (a hang fails it). */
export function fuzzParameters<T>(defaultRuns: number, timeoutMs = 5_000): fc.Parameters<T> {
  return {
    seed: FUZZ_SEED,
    numRuns: fuzzRuns(defaultRuns),
    timeout: timeoutMs,
    includeErrorInReport: true,
  };
}

function integerFromEnv(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new Error(`${name} must be an integer, not ${JSON.stringify(text)}`);
  return value;
}

/** Text with what breaks lines and terminals: line feeds, NUL, ESC, bidi overrides, lone surrogates. */
export const hostileText = (maxLength = 24): fc.Arbitrary<string> =>
  fc.oneof(
    fc.string({ maxLength }),
    fc.string({ unit: 'binary', maxLength }),
    fc.constantFrom('', '\n', 'a\nb', '\r', '\u0000', '\u001b[31m', '\u202e', '\u2028', '\ud800', '__proto__'),
  );

/** A JSON-RPC id, mostly from a small pool (so that ids are reused), often of a type JSON-RPC does not allow. */
export const anyId: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(0, 1, 2, 'a', '1') },
  { weight: 2, arbitrary: fc.oneof(fc.integer(), fc.string({ maxLength: 8 })) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(null, true, false, 1.5, -0, 2 ** 53, 1e300, {}, [], [1], { id: 1 }, 'hintbox:g1:1'),
  },
);

/** Whether an id is one MCP allows (a string or a safe integer, as the SDK's schema says). */
export function isRequestId(id: unknown): id is string | number {
  return typeof id === 'string' || Number.isSafeInteger(id);
}

/** Any JSON value (any Unicode in its strings and keys), four levels deep at most. */
export const anyJson: fc.Arbitrary<unknown> = fc.jsonValue({ maxDepth: 4 }).map((value) => value as unknown);

/** A JSON object (the usual shape of params, results, definitions). */
export const anyJsonObject: fc.Arbitrary<Record<string, unknown>> = fc.dictionary(hostileText(8), anyJson, {
  maxKeys: 4,
});

/** A nesting depth: shallow, about as deep as the stack allows, or far beyond. */
export const nestingDepth: fc.Arbitrary<number> = fc.oneof(
  fc.integer({ min: 0, max: 64 }),
  fc.constantFrom(2_000, 10_000, 100_000),
);
