import { delay } from '../util/delay.js';
import type { Logger } from '../util/logger.js';
import type { Upstream } from './sandbox-pool.js';

/** Listings of one kind start at most this often: a server that announces without end gets no more. */
export const MIN_RELISTING_INTERVAL_MS = 250;

/**
 * A server's announcements that a list changed (tools; prompts and resources), answered one at
 * a time: the session lists again from the sandbox that announced. One announced while a
 * listing runs is listed after it, from the latest announcer (the first may be a held sandbox
 * frozen again by then), and no sooner than {@link MIN_RELISTING_INTERVAL_MS} after the last
 * one started; a failed listing is logged and the last one stands.
 */
export class Relisting {
  private running?: Promise<void>;
  private next?: Upstream;
  private lastStart = -Infinity;

  constructor(
    private readonly what: string,
    private readonly list: (from: Upstream) => Promise<void>,
    private readonly log: Logger,
    private readonly stopped: () => boolean,
  ) {}

  announced(from: Upstream): void {
    if (this.stopped()) return;
    this.next = from;
    this.running ??= this.loop();
  }

  private async loop(): Promise<void> {
    try {
      while (this.next && !this.stopped()) {
        const wait = this.lastStart + MIN_RELISTING_INTERVAL_MS - Date.now();
        if (wait > 0) await delay(wait);
        const source = this.next;
        this.next = undefined;
        if (this.stopped()) return;
        this.lastStart = Date.now();
        try {
          await this.list(source);
        } catch (error) {
          this.log.error(`listing the ${this.what} again failed: ${(error as Error).message}`);
        }
      }
    } finally {
      this.running = undefined;
      // Announced after the loop's last look and before this: not lost.
      if (this.next && !this.stopped()) this.running = this.loop();
    }
  }
}
