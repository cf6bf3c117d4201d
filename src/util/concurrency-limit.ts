/**
 * At most `limit` tasks at once; the others wait their turn in the order they came. Used where
 * starting everything at once would make each start slower than its own timeout (many
 * sandboxes on a few cores), not to serialise.
 */
export class ConcurrencyLimit {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new Error(`concurrency limit must be a whole number ≥ 1, not ${limit}`);
  }

  /** Runs `task` once a slot is free; its result or failure is the returned promise's. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.running++;
    try {
      return await task();
    } finally {
      this.running--;
      this.waiting.shift()?.();
    }
  }
}
