/**
 * The audit trail's cost per call: the store directly (one INSERT, then one UPDATE, each a
 * round trip to the state daemon) against the write-ahead journal in front of it (one local
 * append each; the store is written in batches behind).
 *
 *   npm run build && node --import tsx bench/audit-journal-bench.ts [--calls 2000] [--rounds 3]
 *
 * The embedded store is served by a real state daemon (`dist/hintbox.mjs state-daemon`, a
 * process of its own, as under `hintbox run`) on a temp folder. Per round and variant:
 *
 * - sequential: `calls` calls one after the other, each `await recordIntent` then
 *   `await recordOutcome`; the intent's latency is what a forwarded call waits for;
 * - drained: for the journal, the time until the store has every record (`flushed()`), which
 *   bounds the throughput the store sustains behind the journal;
 * - event loop turning: sequential again, but with a `setImmediate` turn after each record (as
 *   when calls arrive as I/O), so the flusher writes while calls go on; until all are stored;
 * - 32 in flight: `calls` calls, 32 at a time, until the store has every record.
 *
 * Variants alternate round by round. Not a test: nothing asserts timings.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { JournaledAuditLog } from '../src/store/audit-journal.js';
import { openDaemonStateStore } from '../src/store/open-state-store.js';
import type { AuditIntent, AuditLog } from '../src/store/state-store.js';
import { silentLogger } from '../src/util/logger.js';
import { median, percentile } from './stats.js';

const { values } = parseArgs({ options: { calls: { type: 'string' }, rounds: { type: 'string' } } });
const CALLS = Number(values.calls ?? 2000);
const ROUNDS = Number(values.rounds ?? 3);

const intent = (n: number): AuditIntent => ({
  session: 'bench',
  server: 'filesystem',
  tool: 'list_allowed_directories',
  tags: [{ name: 'files', source: 'profile' }],
  claimedHints: { readOnlyHint: true, openWorldHint: false },
  effectiveHints: { readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  sandbox: 'ro-offline',
  decision: 'allowed',
  decidedBy: 'auto',
  arguments: { n },
  pinHash: 'a'.repeat(64),
});

interface Figures {
  intentP50: number;
  intentP99: number;
  perCallUs: number;
  drainedCallsPerS: number;
  yieldingCallsPerS: number;
  concurrentCallsPerS: number;
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function measure(audit: AuditLog, drain: () => Promise<void>): Promise<Figures> {
  const intentMs: number[] = [];
  const start = performance.now();
  for (let n = 0; n < CALLS; n++) {
    const t0 = performance.now();
    const id = await audit.recordIntent(intent(n));
    intentMs.push(performance.now() - t0);
    await audit.recordOutcome(id, { outcome: 'ok' });
  }
  const sequentialMs = performance.now() - start;
  await drain();
  const drainedMs = performance.now() - start;

  // As under hintbox run, where calls arrive as I/O: the event loop turns between calls, so
  // the journal's flusher runs while calls go on (small batches, coalesced while one is in flight).
  const yieldingStart = performance.now();
  for (let n = 0; n < CALLS; n++) {
    const id = await audit.recordIntent(intent(n));
    await turn();
    await audit.recordOutcome(id, { outcome: 'ok' });
    await turn();
  }
  await drain();
  const yieldingMs = performance.now() - yieldingStart;

  const concurrentStart = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < CALLS) {
        const id = await audit.recordIntent(intent(next++));
        await audit.recordOutcome(id, { outcome: 'ok' });
      }
    }),
  );
  await drain();
  const concurrentMs = performance.now() - concurrentStart;
  return {
    intentP50: percentile(intentMs, 50),
    intentP99: percentile(intentMs, 99),
    perCallUs: (sequentialMs / CALLS) * 1000,
    drainedCallsPerS: CALLS / (drainedMs / 1000),
    yieldingCallsPerS: CALLS / (yieldingMs / 1000),
    concurrentCallsPerS: CALLS / (concurrentMs / 1000),
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hintbox-journal-bench-'));
  process.env.HINTBOX_STATE_DAEMON_IDLE = '3';
  const store = await openDaemonStateStore({ dir });
  const results: Record<'store' | 'journal', Figures[]> = { store: [], journal: [] };
  try {
    const journal = new JournaledAuditLog({ store: store.audit, dir: path.join(dir, 'journal'), log: silentLogger });
    const variants = {
      store: () => measure(store.audit, async () => {}),
      journal: () => measure(journal, () => journal.flushed()),
    };
    // Warm-up: the daemon's first statements, the JIT.
    for (const run of Object.values(variants)) await run();
    for (let round = 0; round < ROUNDS; round++) {
      for (const name of round % 2 ? (['journal', 'store'] as const) : (['store', 'journal'] as const)) {
        results[name].push(await variants[name]());
        process.stderr.write(`round ${round + 1}/${ROUNDS}: ${name} done\n`);
      }
    }
    await journal.close();
  } finally {
    await store.close();
  }
  const row = (label: string, unit: string, pick: (f: Figures) => number, digits = 3): string => {
    const cells = (['store', 'journal'] as const).map((v) => median(results[v].map(pick)).toFixed(digits));
    return `${label.padEnd(46)}| ${cells[0]!.padStart(9)} | ${cells[1]!.padStart(9)} | ${unit}`;
  };
  process.stdout.write(
    [
      `${CALLS} calls per figure, median of ${ROUNDS} rounds, ${os.cpus().length} CPUs, Node ${process.version}; ` +
        'embedded store through its state daemon',
      '',
      `${'figure'.padEnd(46)}| ${'store'.padStart(9)} | ${'journal'.padStart(9)} | unit`,
      `${'-'.repeat(46)}|-----------|-----------|--------`,
      row('recordIntent latency p50 (a call waits)', 'ms', (f) => f.intentP50),
      row('recordIntent latency p99', 'ms', (f) => f.intentP99),
      row('recordIntent + recordOutcome, sequential', 'µs/call', (f) => f.perCallUs, 0),
      row('sequential, until all are in the store', 'calls/s', (f) => f.drainedCallsPerS, 0),
      row('sequential, event loop turning between calls', 'calls/s', (f) => f.yieldingCallsPerS, 0),
      row('32 in flight, until all are in the store', 'calls/s', (f) => f.concurrentCallsPerS, 0),
    ].join('\n') + '\n',
  );
  setTimeout(() => rmSync(dir, { recursive: true, force: true }), 4000).unref();
}

await main();
