/**
 * A cold start's verification (`HintboxSession.openFromLock`): the session is served from the
 * lock file while the server is discovered in the background. The discovery begins at once, or
 * (`hintbox serve`, which starts many servers a few at a time) when the owner asks for it
 * (`begin`); what a call waits for is `verified`: the discovery, then the serving of the
 * verified server by every gateway made meanwhile.
 */
export class ColdStart {
  /** `waiting`: not begun; `running`; `answered`: discovery answered; `abandoned`: closed before it began. */
  private state: 'waiting' | 'running' | 'answered' | 'abandoned' = 'waiting';
  /** The discovery alone: what `begin` returns. */
  readonly discovered: Promise<void>;
  /** What a call waits for (a gateway made while discovery runs chains its own serving on it). */
  verified: Promise<void>;
  private settle!: { resolve: () => void; reject: (error: Error) => void };

  constructor(private readonly discover: () => Promise<void>) {
    this.discovered = new Promise<void>((resolve, reject) => (this.settle = { resolve, reject }));
    // Heard by whoever waits; a failure nobody waits for is not an unhandled rejection.
    this.discovered.catch(() => undefined);
    this.verified = this.discovered;
  }

  /** Whether a gateway made now must wait for the discovery (it has not answered yet). */
  get pending(): boolean {
    return this.state !== 'answered';
  }

  /** Begins the discovery (once; later calls get the same promise). */
  begin(): Promise<void> {
    if (this.state === 'waiting') {
      this.state = 'running';
      this.discover().then(() => {
        this.state = 'answered';
        this.settle.resolve();
      }, this.settle.reject);
    }
    return this.discovered;
  }

  /** The session closed before the discovery began: what waits for it is told so, and it never begins. */
  abandon(reason: Error): void {
    if (this.state !== 'waiting') return;
    this.state = 'abandoned';
    this.settle.reject(reason);
  }
}
