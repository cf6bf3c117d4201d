import { callerKey, callerText, type Caller } from '../util/caller-identity.js';

/**
 * The cap on the sessions one caller of `hintbox serve` holds at once (`--max-sessions`): each
 * may hold sandboxes (`clients: separate`), so a caller with many would hold many. A session is
 * counted from the moment it is asked for (before it starts anything) until it ends, with its
 * weight: one, or at `/mcp` one per server behind it (each is a session of that server and may
 * start a sandbox before any call). Callers are told apart by {@link callerKey} (subject and
 * client). Pure: no I/O, no clock.
 */
export class SessionCap {
  private readonly held = new Map<string, number>();

  /** `max`: the most sessions one caller may hold. */
  constructor(readonly max: number) {}

  /**
   * Counts `weight` sessions for `caller` (null: unidentified, all such callers as one), or
   * refuses them when they would take it past the cap. `release` gives them back, once however
   * often it is called.
   */
  reserve(caller: Caller | null, weight: number): { release: () => void } | { refused: string } {
    const key = callerKey(caller);
    const held = this.held.get(key) ?? 0;
    if (held + weight > this.max) {
      const who = caller ? callerText(caller) : 'a client';
      return {
        refused: `too many sessions: ${who} holds ${held}, this one would hold ${weight}, at most ${this.max}: end some first`,
      };
    }
    this.held.set(key, held + weight);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        const left = (this.held.get(key) ?? weight) - weight;
        if (left > 0) this.held.set(key, left);
        else this.held.delete(key);
      },
    };
  }

  /** The sessions `caller` holds now. */
  heldBy(caller: Caller | null): number {
    return this.held.get(callerKey(caller)) ?? 0;
  }
}
