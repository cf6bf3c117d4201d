/**
 * What `/readyz` says of each server of `hintbox serve`, and whether serve is ready (pure).
 *
 * - `starting`: not serving yet: a server without a lock file is discovered and its sandboxes
 *   started first; a separate one without a lock file has its image built first.
 * - `serving-from-lock`: approved tools in its lock file: sessions are taken and lists answered
 *   from the lock while its sandboxes start and the server is verified in the background (a
 *   separate one by a session of its own); calls wait for the verification.
 * - `ready`: verified (or discovered, without a lock file; a separate one: its image built).
 * - `differs-from-lock`: verified, but the server lists other definitions than its lock file
 *   approved (a tool changed, one not in the lock, an approved one not listed): changed ones
 *   are hidden and refused (the others served) until approved again.
 * - `failed`: its start or verification failed (logged); a new client tries again.
 *
 * `/readyz?verified` counts only `ready`: for a probe that must not send traffic to a server
 * before it is verified (a Kubernetes rollout keeps the old Pods until the new ones are).
 */
export const SERVER_STATES = ['starting', 'serving-from-lock', 'ready', 'differs-from-lock', 'failed'] as const;

export type ServerState = (typeof SERVER_STATES)[number];

/** The states in which a server counts as ready: it takes sessions and serves what is approved as approved. */
const SERVING: ReadonlySet<ServerState> = new Set(['serving-from-lock', 'ready']);
/** With `verified` (`/readyz?verified`): only a verified server counts (a rollout that waits for it). */
const VERIFIED: ReadonlySet<ServerState> = new Set(['ready']);

/** Ready when every server is (none at all counts as ready); the states named, nothing else. */
export function readinessOf(
  states: ReadonlyMap<string, ServerState>,
  options: { verified?: boolean } = {},
): { ready: boolean; servers: Record<string, ServerState> } {
  const counted = options.verified ? VERIFIED : SERVING;
  return { ready: [...states.values()].every((s) => counted.has(s)), servers: Object.fromEntries(states) };
}

/**
 * `/readyz`'s `verified` parameter: left out, plain readiness (false); `?verified`, `=1` or
 * `=true` (each time it is given), verified (true); any other value is not understood
 * (undefined: answered 400), so that `?verified=false` is not read as its opposite.
 */
export function verifiedParameter(query: URLSearchParams): boolean | undefined {
  const values = query.getAll('verified');
  if (values.length === 0) return false;
  return values.every((value) => ['', '1', 'true'].includes(value)) ? true : undefined;
}
