import type { RelaySession } from './socket-relay.js';

/**
 * Which of a sandbox's database sessions end when its call ends. A session ends when it could
 * still act after the call: a statement running, a transaction open (or idle in one), any lock
 * held (table, row or advisory — an advisory lock taken at session level stays while the
 * session is idle and outside any transaction), or a LISTEN. A clean idle connection — what a
 * pool keeps between calls — stays: ending it would only break the server's pool.
 *
 * Two views are joined, and either one is enough to end a session: Postgres's (pg_stat_activity
 * and pg_locks, which see state and locks but not a LISTEN of another session) and the relay's
 * (which sees the transaction status, the running statement, and every statement's tag, so a
 * LISTEN, or a DO block that may have run one). A session the relay cannot account for — not
 * through its startup, no backend pid, a backend no relay session owns — ends. Pure.
 */

/** One backend of the sandbox's role, as the admin sees it. */
export interface BackendState {
  pid: number;
  /** pg_stat_activity.state: 'idle', 'active', 'idle in transaction', …; null when not known. */
  state: string | null;
  /** A transaction is open (xact_start is set). */
  inTransaction: boolean;
  /** Rows of pg_locks for the backend, granted or waited for. */
  locks: number;
}

/** Why Postgres's view says a backend must end, or undefined for a clean idle one. */
export function backendHolds(backend: BackendState): string | undefined {
  if (backend.locks > 0) return `it holds ${backend.locks} lock(s)`;
  if (backend.inTransaction) return 'a transaction is open';
  if (backend.state !== 'idle') return `it is ${backend.state ?? 'in an unknown state'}`;
  return undefined;
}

/** What to end: relay connections to cut, backends to terminate (and wait for), and why each. */
export interface SessionsToEnd {
  /** Relay connection ids. */
  cut: number[];
  /** Backend pids: those of the cut connections, and any backend of the role no kept session owns. */
  terminate: number[];
  /** One line per ended session, for the log. */
  reasons: string[];
  /** Clean idle sessions that stay. */
  kept: number;
  /**
   * Every session to end is running a statement, and no backend is without a relay session:
   * the call's end may let them finish a moment and judge again (what they hold then still
   * ends them).
   */
  onlyRunning: boolean;
}

/** Joins the relay's sessions and the role's backends and decides (see the file's header). */
export function sessionsToEnd(relay: readonly RelaySession[], backends: readonly BackendState[]): SessionsToEnd {
  const byPid = new Map(backends.map((b) => [b.pid, b]));
  const keptPids = new Set<number>();
  const result: SessionsToEnd = { cut: [], terminate: [], reasons: [], kept: 0, onlyRunning: true };
  for (const session of relay) {
    const backend = session.pid === undefined ? undefined : byPid.get(session.pid);
    const why =
      session.holds ??
      (session.pid === undefined ? 'its backend is not known' : undefined) ??
      (backend ? backendHolds(backend) : 'its backend is not in pg_stat_activity');
    if (why === undefined && session.pid !== undefined) {
      keptPids.add(session.pid);
      result.kept++;
      continue;
    }
    result.cut.push(session.connectionId);
    if (!session.running) result.onlyRunning = false;
    result.reasons.push(
      `session ${session.connectionId}${session.pid === undefined ? '' : ` (pid ${session.pid})`}: ${why}`,
    );
  }
  for (const backend of backends) {
    if (keptPids.has(backend.pid)) continue;
    result.terminate.push(backend.pid);
    if (!relay.some((s) => s.pid === backend.pid)) {
      result.reasons.push(`backend pid ${backend.pid}: no session of the relay owns it`);
      result.onlyRunning = false;
    }
  }
  result.onlyRunning &&= result.cut.length > 0;
  return result;
}
