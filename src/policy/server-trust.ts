import type { ServerTrust } from './approval-decision.js';

/**
 * A server's trust for one session: the profile's, until the server is seen breaking a hint;
 * then untrusted for the rest of the session, with no way back. One owner for the session and
 * its call guard: the guard asks every call, the session stops letting sandboxes run free.
 */
export class ServerTrustState {
  private lostBecause?: string;
  private readonly listeners: ((reason: string) => void)[] = [];

  constructor(readonly configured: ServerTrust) {}

  /** The profile's trust, unless the server broke a hint in this session: then untrusted. */
  get current(): ServerTrust {
    return this.lostBecause === undefined ? this.configured : 'untrusted';
  }

  /** Why the server lost trust in this session (undefined while it has not). */
  get reason(): string | undefined {
    return this.lostBecause;
  }

  /** The server broke a hint: untrusted from now on. True the first time (listeners were told). */
  lose(reason: string): boolean {
    if (this.lostBecause !== undefined) return false;
    this.lostBecause = reason;
    // Each listener is told, whatever another one does, and the caller (a call's answer being
    // read) goes on: a throw must spare the server none of the rest. Listeners log their failures.
    for (const listener of this.listeners) {
      try {
        listener(reason);
      } catch {
        // the listener's to report
      }
    }
    return true;
  }

  /** Called once, when the server loses trust. */
  onLost(listener: (reason: string) => void): void {
    this.listeners.push(listener);
  }
}
