/**
 * A token bucket for records a sandbox can cause at will (egress refusals): a burst of `burst`,
 * then `perSecond`; what is over is counted, and the next record that passes says how many were
 * left out. Pure apart from the clock it is given.
 */
export class EventBudget {
  private tokens: number;
  private last: number;
  private skipped = 0;

  constructor(
    private readonly burst: number,
    private readonly perSecond: number,
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = burst;
    this.last = now();
  }

  /** Whether to record this one; when so, how many were left out since the last recorded. */
  take(): { record: true; skipped: number } | { record: false } {
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.perSecond);
    this.last = now;
    if (this.tokens < 1) {
      this.skipped++;
      return { record: false };
    }
    this.tokens--;
    const skipped = this.skipped;
    this.skipped = 0;
    return { record: true, skipped };
  }
}
