/**
 * The calls in flight in one sandbox, and what follows when there are none.
 *
 * A sandbox whose grant can change something (a writable mount, a network, a database role
 * above read) may run server code only while a call allowed into it is in flight. The gateway
 * counts those calls here: the first to enter thaws the sandbox, the last to leave freezes it
 * again. Freezing and thawing go one at a time, in order, and each step does what the count asks
 * *when it runs*, so a call that enters while a freeze is under way goes in only once that freeze
 * was answered (or cancelled, below) and the thaw sent after it, never frozen under it. A call
 * does not wait for the thaw's answer: the gate obeys its commands in order and a stopped server
 * reads nothing, so the call's bytes wait in its input until the thaw lets it run (one round
 * trip less per call). The answer is checked when it comes, and a failed or missing one breaks
 * the sandbox as a failed freeze does. A freeze is waited for, unless cancelled (below). The
 * work to do once a sandbox is idle (end its database sessions) is a step of the same line: a call that enters meanwhile goes in only
 * after it, so that it never cuts the new call's connections. So is a hold of hintbox's own
 * (`holdFrozenDuring`: the preview copying the folders the sandbox can write): the sandbox stays
 * frozen for it, calls in flight included, and no call goes in until it is over.
 *
 * A call that comes in while the freeze after the last call is still under way (the server's
 * tasks on their way into the freezer) cancels it, where the freezer can: it goes in at once,
 * without waiting for a freeze that its thaw would undo. The server then ran between the two
 * calls no longer than it would have until the freeze held. So that a server whose tasks are slow
 * to freeze cannot stay unfrozen by calls coming often, cancelling is allowed only for
 * {@link FREEZE_CANCEL_WINDOW_MS} from the first freeze since the sandbox was last seen frozen;
 * after that a freeze is waited for, and one that does not hold breaks the sandbox as before.
 *
 * Pure of Docker: the freezer is passed in (the sandbox's gate, src/engine/gate-control.ts), so the logic is
 * tested with a fake.
 */

/**
 * How long a sandbox may go unfrozen, its freezes cancelled by calls that came in, before a
 * freeze is waited for again: the freezers' own bound on a freeze (2 s).
 */
export const FREEZE_CANCEL_WINDOW_MS = 2000;

/** Freezes and thaws one sandbox's processes (its gate stops and continues them). */
export interface SandboxFreezer {
  /**
   * Resolves once every process of the sandbox is seen stopped; rejects when that could not be
   * made sure of. When `cancel` aborts first, a freezer that can undoes the freeze (every
   * process runs again) and resolves to `'cancelled'`; one that cannot ignores it.
   */
  freeze(cancel?: AbortSignal): Promise<void | 'cancelled'>;
  /**
   * Lets them run again. The command is on its way when `thaw` returns (what is sent to the
   * sandbox after it is read only once it runs); the promise is the answer.
   */
  thaw(): Promise<void>;
}

export interface SandboxActivityOptions {
  /** How to freeze the sandbox; absent: it cannot be frozen (tests of routing). */
  freezer?: SandboxFreezer;
  /**
   * Freeze it whenever no call is in flight. Default true when there is a freezer; false lets it
   * run free between calls (read-only and offline, or `hold: false`) until `holdBetweenCalls`.
   */
  holdBetweenCalls?: boolean;
  /**
   * A freeze failed (between calls, or for hintbox's own hold), or the answer to a call's thaw
   * did: what the sandbox runs is not known, so remove it. Called once; every call after it is
   * refused.
   */
  onFreezeFailed(error: Error): void;
  /**
   * The last call left and the sandbox is frozen (or runs freely): e.g. end its database
   * sessions. The next call waits until it is done. It handles its own errors.
   */
  onIdle?(): Promise<void> | void;
  /** The clock (ms) the cancel window is read on; tests pass their own. */
  now?: () => number;
}

export class SandboxActivity {
  private inFlight = 0;
  /** What the sandbox is now, as far as the last finished step knows. Starts running (just released). */
  private frozen = false;
  private betweenCalls: boolean;
  private steps: Promise<unknown> = Promise.resolve();
  /** Steps queued and not finished: while there are none, a call into a free, running sandbox need not queue one. */
  private queued = 0;
  /**
   * A freeze failed: what the sandbox runs is not known (some processes stopped, or the engine's
   * pause holding all of them), so it is removed, and no call goes into it from then on.
   */
  private broken?: Error;
  /** The freeze after the last call, while it is under way: a call that comes in may cancel it. */
  private freezing?: AbortController;
  /** Since when the sandbox was not seen frozen while idle: its freezes were cancelled meanwhile (see the top). */
  private unfrozenSince?: number;
  private readonly now: () => number;

  constructor(private readonly options: SandboxActivityOptions) {
    this.betweenCalls = options.freezer !== undefined && options.holdBetweenCalls !== false;
    this.now = options.now ?? Date.now;
  }

  /** Calls now counted in this sandbox. */
  get calls(): number {
    return this.inFlight;
  }

  /** Whether the sandbox is frozen between calls. */
  get held(): boolean {
    return this.betweenCalls;
  }

  /**
   * A call goes in: resolves once the sandbox runs, or its thaw is sent (see the top). Rejects
   * when the sandbox is broken. Every `enter` is matched by one `leave`, whether it resolved or not.
   */
  enter(): Promise<void> {
    this.inFlight++;
    this.cancelFreeze();
    return this.settle();
  }

  /**
   * {@link enter}, without a promise when the sandbox already runs as the call needs it and no
   * step is queued (the hot path of a free sandbox): undefined then.
   */
  enterNow(): Promise<void> | undefined {
    this.inFlight++;
    this.cancelFreeze();
    return this.asAsked() ? undefined : this.settle();
  }

  /**
   * A call ended (answer, error, cancellation, deadline): the last one freezes the sandbox, in
   * a microtask, so after the ending call was recorded and answered in the same turn. Asking
   * the freeze wakes every task of the server to stop it; on a machine of few cores they took
   * the answer's CPU (bench: held ÷ free p50 1.30× asked within leave, 1.20× after the answer).
   * The step reads the count when it runs: a call that came in meanwhile keeps the sandbox thawed.
   */
  leave(): void {
    if (this.inFlight === 0) return;
    this.inFlight--;
    if (this.inFlight > 0 || this.asAsked()) return; // a free sandbox with nothing to do: no microtask
    queueMicrotask(() => void this.settle().catch(() => undefined)); // a failed freeze is reported where it fails
  }

  /** From now on the sandbox is frozen between calls (its server lost the trust that let it run free). */
  holdBetweenCalls(): Promise<void> {
    if (!this.options.freezer || this.betweenCalls) return Promise.resolve();
    this.betweenCalls = true;
    return this.settle().catch(() => undefined); // a failed freeze is reported where it fails
  }

  /**
   * Runs `work` with the sandbox frozen, calls in flight included; no call goes in meanwhile.
   * Afterwards the sandbox is as the count asks. Rejects (without running `work`) when it
   * cannot be frozen. Without a freezer, `work` just runs.
   */
  holdFrozenDuring<T>(work: () => Promise<T>): Promise<T> {
    const freezer = this.options.freezer;
    if (!freezer) return work();
    return this.queue(async () => {
      if (this.broken) throw this.broken;
      if (!this.frozen) {
        await this.freeze(freezer);
        this.frozen = true;
      }
      try {
        return await work();
      } finally {
        if (!this.wantFrozen()) {
          await freezer.thaw();
          this.frozen = false;
        }
      }
    });
  }

  private wantFrozen(): boolean {
    return this.inFlight === 0 && this.betweenCalls;
  }

  /** Nothing to do for the count as it is: not broken, and running free with nothing queued, or nothing to freeze or end at all. */
  private asAsked(): boolean {
    if (this.broken) return false;
    if (!this.options.freezer && !this.options.onIdle) return true;
    // The hot path of a free sandbox: running, nothing to change, nothing queued before it.
    const idleWork = this.inFlight === 0 && this.options.onIdle !== undefined;
    return this.queued === 0 && !this.frozen && !this.wantFrozen() && !idleWork;
  }

  /** Brings the sandbox to the state the count asks for, after the steps before it. */
  private settle(): Promise<void> {
    const { freezer } = this.options;
    if (this.broken) return Promise.reject(this.broken);
    if (this.asAsked()) return Promise.resolve();
    return this.queue(async () => {
      if (this.broken) throw this.broken;
      const want = this.wantFrozen();
      if (freezer && want && !this.frozen) {
        // Cancelled: a call came in, and the freezer has thawed what it had frozen.
        if ((await this.freezeBetweenCalls(freezer)) === 'cancelled') return;
        this.frozen = true;
      } else if (freezer && !want && this.frozen) {
        this.thawAhead(freezer);
        this.frozen = false;
      }
      if (this.inFlight === 0) await Promise.resolve(this.options.onIdle?.()).catch(() => undefined);
    });
  }

  /** The freeze after the last call: one a call may cancel while the window allows (see the top). */
  private async freezeBetweenCalls(freezer: SandboxFreezer): Promise<void | 'cancelled'> {
    this.unfrozenSince ??= this.now();
    const freezing = (this.freezing = new AbortController());
    try {
      const outcome = await this.freeze(freezer, freezing.signal);
      if (outcome !== 'cancelled') this.unfrozenSince = undefined;
      return outcome;
    } finally {
      this.freezing = undefined;
    }
  }

  /** A call came in: cancels the freeze under way, unless the sandbox has gone unfrozen for the whole window. */
  private cancelFreeze(): void {
    if (!this.freezing || this.unfrozenSince === undefined) return;
    if (this.now() - this.unfrozenSince < FREEZE_CANCEL_WINDOW_MS) this.freezing.abort();
  }

  /**
   * Freezes the sandbox; a failure breaks the activity for good, whatever the count: a call
   * that entered meanwhile would otherwise go into a sandbox the failed freeze left stopped
   * (or paused by the engine as a fallback) and wait there until its deadline.
   */
  private async freeze(freezer: SandboxFreezer, cancel?: AbortSignal): Promise<void | 'cancelled'> {
    try {
      return await freezer.freeze(cancel);
    } catch (error) {
      throw this.breakFor('freeze', error as Error);
    }
  }

  /**
   * Thaws the sandbox for a call without waiting for the answer (see the top). A failed or
   * missing answer breaks the activity for good: the call sent meanwhile may sit in a stopped
   * sandbox, which is removed (its calls end with it), and no call goes in after it.
   */
  private thawAhead(freezer: SandboxFreezer): void {
    freezer.thaw().catch((error: Error) => this.breakFor('thaw', error));
  }

  /** Breaks the activity (once: the first failure is the one reported) and returns why. */
  private breakFor(step: 'freeze' | 'thaw', error: Error): Error {
    if (!this.broken) {
      this.broken = new Error(`its ${step} failed (${error.message}); it is being removed`);
      this.options.onFreezeFailed(error);
    }
    return this.broken;
  }

  /**
   * Runs `work` after the steps queued before it; at once when none is (so that a freeze is on
   * its way in the turn the last call ended). A failed step
   * does not stop the ones after it.
   */
  private queue<T>(work: () => Promise<T>): Promise<T> {
    const idle = this.queued === 0;
    this.queued++;
    const step = (idle ? work() : this.steps.then(work)).finally(() => this.queued--);
    this.steps = step.catch(() => undefined);
    return step;
  }
}
