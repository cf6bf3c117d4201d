import type { Logger } from '../src/util/logger.js';
import type { Running } from './spawn-server.js';
import { median, percentile } from './stats.js';

export interface HoldingBenchOptions {
  rounds: number;
  /** `--calls`: a fifth of it (at least 20) are timed per variant and round. */
  calls: number;
  /** `--warmup`: write calls before the timed ones, per variant and round (the steady state, as the table's). */
  warmup: number;
  /** Copies of the trusted profile whose write_file runs unasked: held (the default), and `hold: false`. */
  heldProfile: string;
  freeProfile: string;
  /** Starts `hintbox run` on a profile. */
  startHintbox: (profile: string) => Promise<Running>;
  /** Waits until the run's containers are gone and the engine is idle. */
  settle: () => Promise<void>;
  log: Logger;
}

type HoldVariant = 'held' | 'free';
interface HoldRound {
  /** The first write_file call: a held sandbox's server starts (released) in it. */
  firstWriteMs: number;
  /** Calls back to back: the next comes in while the freeze after the last may be under way. */
  write: { p50: number; p99: number };
  /** Calls after a pause of {@link PAUSE_MS}: the freeze after the last one has held (a held sandbox is frozen). */
  paused: { p50: number; p99: number };
}

/**
 * The pause before each call of the second series: longer than a freeze takes (~0.3 ms), so
 * that each call of a held writer thaws a sandbox that was frozen, as an agent's calls do, with
 * seconds of thought between them.
 */
export const PAUSE_MS = 5;
/** One figure of holding: held against free (ms). */
export interface HoldingFigure {
  name: string;
  held: number;
  free: number;
  /** held ÷ free, median of per-round ratios. */
  ratio: number;
  /** Issue 34's target for held ÷ free, where it sets one. */
  target?: { text: string; met: boolean };
}

/**
 * What holding costs a write call: the same trusted profile with write_file allowed unasked,
 * held (released at the first call, thawed and frozen around each) against `hold: false`,
 * interleaved round by round. Two series of sequential calls: back to back, where a call may
 * come in while the freeze after the last one is under way (and cancel it: see
 * src/gateway/sandbox-activity.ts), and each after a pause of {@link PAUSE_MS}, where every call
 * of the held writer thaws a frozen sandbox.
 */
export async function measureHolding(options: HoldingBenchOptions): Promise<HoldingFigure[]> {
  const { heldProfile, freeProfile, startHintbox, settle, log } = options;
  const rounds: Record<HoldVariant, HoldRound>[] = [];
  const calls = Math.max(20, Math.round(options.calls / 5));
  for (let round = 1; round <= options.rounds; round++) {
    const result = {} as Record<HoldVariant, HoldRound>;
    for (const variant of ['held', 'free'] as const) {
      log.info(`holding, round ${round}/${options.rounds}: ${variant}, ${calls} write calls`);
      const running = await startHintbox(variant === 'held' ? heldProfile : freeProfile);
      try {
        await running.client.listTools();
        let n = 0;
        const writeOnce = async () => {
          const r = await running.client.callTool({
            name: 'write_file',
            arguments: { path: '/workspace/written.txt', content: `write ${n++}\n` },
          });
          if (r.isError) throw new Error(`write_file failed: ${JSON.stringify(r.content)}`);
        };
        const s = performance.now();
        await writeOnce();
        const firstWriteMs = performance.now() - s;
        for (let i = 0; i < options.warmup; i++) await writeOnce();
        const timed = async (pauseMs: number) => {
          const samples: number[] = [];
          for (let i = 0; i < calls; i++) {
            if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
            const t = performance.now();
            await writeOnce();
            samples.push(performance.now() - t);
          }
          return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
        };
        result[variant] = { firstWriteMs, write: await timed(0), paused: await timed(PAUSE_MS) };
      } finally {
        await running.close();
      }
      await settle();
    }
    rounds.push(result);
  }
  const figure = (name: string, pick: (r: HoldRound) => number, atMost?: number): HoldingFigure => {
    const ratio = median(rounds.map((r) => pick(r.held) / pick(r.free)));
    return {
      name,
      held: median(rounds.map((r) => pick(r.held))),
      free: median(rounds.map((r) => pick(r.free))),
      ratio,
      ...(atMost === undefined ? {} : { target: { text: `held ≤ ${atMost} × free`, met: ratio <= atMost } }),
    };
  };
  return [
    figure('first write call (held: the server starts in it)', (r) => r.firstWriteMs),
    figure('write call latency p50', (r) => r.write.p50, 1.5),
    figure('write call latency p99', (r) => r.write.p99, 2),
    figure(`write p50, ${PAUSE_MS} ms apart (held: frozen before each)`, (r) => r.paused.p50, 1.5),
    figure(`write p99, ${PAUSE_MS} ms apart (held: frozen before each)`, (r) => r.paused.p99, 2),
  ];
}
