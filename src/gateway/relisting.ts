import type { Logger } from '../util/logger.js';
import type { Upstream } from './sandbox-pool.js';

/**
 * A server's announcements that a list changed (tools; prompts and resources), answered one at
 * a time: the session lists again from the sandbox that announced. One announced while a
 * listing runs is listed after it, from the latest announcer (the first may be a held sandbox
 * frozen again by then); a failed listing is logged and the last one stands.
 */
export class Relisting {
  private running?: Promise<void>;
  private next?: Upstream;

  constructor(
    private readonly what: string,
    private readonly list: (from: Upstream) => Promise<void>,
    private readonly log: Logger,
    private readonly stopped: () => boolean,
  ) {}

  announced(from: Upstream): void {
    if (this.stopped()) return;
    this.next = from;
    this.running ??= (async () => {
      while (this.next && !this.stopped()) {
        const source = this.next;
        this.next = undefined;
        try {
          await this.list(source);
        } catch (error) {
          this.log.error(`listing the ${this.what} again failed: ${(error as Error).message}`);
        }
      }
    })().finally(() => (this.running = undefined));
  }
}
