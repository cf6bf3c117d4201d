/**
 * hintbox's two kinds of time, kept apart:
 * - **wall time**, a `Date` from a {@link Clock}: what is recorded (audit records, a role's
 *   expiry) or compared with times from elsewhere (the file system's mtimes). Injected where a
 *   test needs it fixed or stepping; `systemClock` otherwise.
 * - **monotonic milliseconds**, {@link monotonicMs}: durations, timeouts and deadlines, which a
 *   wall clock set back or forward (NTP, a suspended laptop) must neither stretch nor cut.
 */

/** A source of wall time; tests pass a fixed or stepping clock. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** Milliseconds on a clock that only moves forward (`performance.now()`): for durations, never for records. */
export function monotonicMs(): number {
  return performance.now();
}
