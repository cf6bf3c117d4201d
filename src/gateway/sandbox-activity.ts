/**
 * The calls in flight in one sandbox, and what follows when there are none.
 *
 * A sandbox whose grant can change something (a writable mount, a network, a database role
 * above read) may run server code only while a call allowed into it is in flight. The gateway
 * counts those calls here: the first to enter thaws the sandbox (and waits for it), the last to
 * leave freezes it again. Freezing and thawing go one at a time, in order, and each step does
 * what the count asks *when it runs*, so a call that enters while a freeze is under way finds
 * the sandbox thawed after it, never frozen under it. The work to do once a sandbox is idle (end
 * its database sessions) is a step of the same line: a call that enters meanwhile goes in only
 * after it, so that it never cuts the new call's connections.
 *
 * Pure of Docker: the freezer is passed in (the engine's pause and unpause), so the logic is
 * tested with a fake.
 */

/** Freezes and thaws one sandbox's processes (Docker: the cgroup freezer behind pause). */
export interface SandboxFreezer {
  freeze(): Promise<void>;
  thaw(): Promise<void>;
}

export interface SandboxActivityOptions {
  /** Absent: the sandbox runs freely (read-only and offline, or `hold: false`). */
  freezer?: SandboxFreezer;
  /** A freeze failed: the sandbox may be running with nobody's call in flight (remove it). */
  onFreezeFailed(error: Error): void;
  /**
   * The last call left and the sandbox is frozen (or runs freely): e.g. end its database
   * sessions. The next call waits until it is done. It handles its own errors.
   */
  onIdle?(): Promise<void> | void;
}

export class SandboxActivity {
  private inFlight = 0;
  /** What the sandbox is now, as far as the last finished step knows. Starts running (just released). */
  private frozen = false;
  private steps: Promise<void> = Promise.resolve();

  constructor(private readonly options: SandboxActivityOptions) {}

  /** Calls now counted in this sandbox. */
  get calls(): number {
    return this.inFlight;
  }

  /** Whether the sandbox is held between calls (it has a freezer). */
  get held(): boolean {
    return this.options.freezer !== undefined;
  }

  /**
   * A call goes in: resolves once the sandbox runs. Rejects when it cannot be thawed. Every
   * `enter` is matched by one `leave`, whether it resolved or not.
   */
  enter(): Promise<void> {
    this.inFlight++;
    return this.settle();
  }

  /** A call ended (answer, error, cancellation, deadline): the last one freezes the sandbox. */
  leave(): void {
    if (this.inFlight === 0) return;
    this.inFlight--;
    if (this.inFlight > 0) return;
    void this.settle().catch((error: Error) => this.options.onFreezeFailed(error));
  }

  /** Brings the sandbox to the state the count asks for, after the steps before it. */
  private settle(): Promise<void> {
    const { freezer } = this.options;
    if (!freezer && !this.options.onIdle) return Promise.resolve();
    const step = this.steps.then(async () => {
      const idle = this.inFlight === 0;
      if (freezer && idle !== this.frozen) {
        await (idle ? freezer.freeze() : freezer.thaw());
        this.frozen = idle;
      }
      if (idle) await Promise.resolve(this.options.onIdle?.()).catch(() => undefined);
    });
    // A failed step does not stop the ones after it: each reads the count afresh.
    this.steps = step.catch(() => undefined);
    return step;
  }
}
