import { EventBudget } from './event-budget.js';

/**
 * How many refusals a client can have written down: a token bucket per key (a remote address)
 * and one over all keys, so that neither one client nor many can make the audit log and the
 * log grow with each refused request. What is over is counted, per key, and handed over when
 * the window closes ({@link closeWindow}), to be recorded as a count. Pure apart from the clock.
 *
 * Keys are remembered up to `maxKeys` (the least recently seen is forgotten: its bucket starts
 * full again, which the overall bucket still bounds); skipped counts up to `maxKeys` keys, the
 * rest counted in the total only.
 */
export interface DenialBudgetOptions {
  /** Per key: records at once, then per second. Default 10, then 0.1 (one every 10 s). */
  perKeyBurst?: number;
  perKeyPerSecond?: number;
  /** Over all keys: records at once, then per second. Default 100, then 1. */
  overallBurst?: number;
  overallPerSecond?: number;
  /** Keys remembered. Default 1024. */
  maxKeys?: number;
  /** Milliseconds; default Date.now. */
  now?: () => number;
}

export const DENIAL_BUDGET_DEFAULTS = {
  perKeyBurst: 10,
  perKeyPerSecond: 0.1,
  overallBurst: 100,
  overallPerSecond: 1,
  maxKeys: 1024,
} as const;

/** What a window left out: how many, since when (ms), and the keys with the most (at most 10). */
export interface DenialWindow {
  since: number;
  skipped: number;
  top: { key: string; skipped: number }[];
}

export class DenialBudget {
  private readonly options: Required<Omit<DenialBudgetOptions, 'now'>>;
  private readonly now: () => number;
  private readonly overall: EventBudget;
  private readonly keys = new Map<string, EventBudget>();
  private skippedBy = new Map<string, number>();
  private skipped = 0;
  private since: number;

  constructor(options: DenialBudgetOptions = {}) {
    const { now = Date.now, ...rest } = options;
    this.options = { ...DENIAL_BUDGET_DEFAULTS, ...rest };
    this.now = now;
    this.overall = new EventBudget(this.options.overallBurst, this.options.overallPerSecond, now);
    this.since = now();
  }

  /** Whether this refusal of `key` may be written down; when not, it is counted. */
  take(key: string): boolean {
    let bucket = this.keys.get(key);
    if (bucket)
      this.keys.delete(key); // re-inserted last: the map is in order of last use
    else {
      bucket = new EventBudget(this.options.perKeyBurst, this.options.perKeyPerSecond, this.now);
      if (this.keys.size >= this.options.maxKeys) this.keys.delete(this.keys.keys().next().value as string);
    }
    this.keys.set(key, bucket);
    if (bucket.take().record && this.overall.take().record) return true;
    this.skipped++;
    const count = this.skippedBy.get(key);
    if (count !== undefined || this.skippedBy.size < this.options.maxKeys) this.skippedBy.set(key, (count ?? 0) + 1);
    return false;
  }

  /** Ends the window: what it left out (undefined when nothing), and a new window starts. */
  closeWindow(): DenialWindow | undefined {
    const window =
      this.skipped === 0
        ? undefined
        : {
            since: this.since,
            skipped: this.skipped,
            top: [...this.skippedBy]
              .sort((a, b) => b[1] - a[1])
              .slice(0, 10)
              .map(([key, skipped]) => ({ key, skipped })),
          };
    this.skipped = 0;
    this.skippedBy = new Map();
    this.since = this.now();
    return window;
  }
}
