import type { Logger } from '../util/logger.js';

/** The first retry of a kept outcome after this long; each that fails doubles it, up to MAX_RETRY_MS. */
const FIRST_RETRY_MS = 1000;
const MAX_RETRY_MS = 30_000;

/**
 * Outcomes of calls that have ended but could not be written (a full disk): kept as they were
 * when the call ended, queued ahead of the writer's next record, or written by a retry on a
 * timer when no record comes, backing off while it fails.
 */
export class KeptOutcomes {
  private kept: { callId: string; body: string }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private delayMs = FIRST_RETRY_MS;
  private stopped = false;

  constructor(
    private readonly options: {
      log: Logger;
      /** Queues a line in the writer (throws when it cannot; `settle` hears whether it was written). */
      queue(body: string, settle: (error?: Error) => void): void;
      /** Writes what is queued. */
      flush(): void;
    },
  ) {}

  get size(): number {
    return this.kept.length;
  }

  /** Keeps an outcome that could not be written, and schedules a retry. */
  keep(callId: string, body: string): void {
    this.kept.push({ callId, body });
    this.schedule();
  }

  /** Queues the kept outcomes, in order, ahead of what comes next; throws (keeping the rest) when one cannot be. */
  queueAll(): void {
    const kept = this.kept;
    this.kept = [];
    for (let i = 0; i < kept.length; i++) {
      const { callId, body } = kept[i]!;
      try {
        this.options.queue(body, (error) => {
          if (error) return this.keep(callId, body);
          this.delayMs = FIRST_RETRY_MS;
          this.options.log.info(`the outcome of call ${callId} is written late to the audit log`);
        });
      } catch (error) {
        this.kept = [...kept.slice(i), ...this.kept];
        this.schedule();
        throw error;
      }
    }
  }

  /** No more retries (the log closes). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** The outcomes still unwritten, handed over and forgotten. */
  drop(): { callId: string; body: string }[] {
    const kept = this.kept;
    this.kept = [];
    return kept;
  }

  private schedule(): void {
    if (this.timer !== undefined || this.stopped) return;
    const delayMs = this.delayMs;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.stopped || this.kept.length === 0) return;
      this.delayMs = Math.min(delayMs * 2, MAX_RETRY_MS); // for a retry that fails again
      try {
        this.queueAll();
        this.options.flush(); // one that fails again is kept again, and the next retry is scheduled
      } catch (error) {
        this.options.log.debug(
          `audit log: still cannot write ${this.kept.length} outcome(s): ${(error as Error).message}`,
        );
      }
    }, delayMs);
    this.timer.unref();
  }
}
