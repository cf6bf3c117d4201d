import type { SessionBounds } from './role-grants.js';

/**
 * Where one relayed session is, read from the messages that cross the relay: running a
 * statement, idle, or idle in a transaction, and since when. The relay holds each session to
 * its role's bounds with this, whatever the session SETs. Pure: the caller passes the time.
 */
export class SessionActivity {
  /** The transaction status of the last ReadyForQuery ('I', 'T', 'E'); unset before the first. */
  txStatus?: string;
  /** When the last ReadyForQuery came: the session has been idle since, unless busySince is set. */
  idleSince: number;
  /** When the client sent something after the last ReadyForQuery: a statement is running. */
  busySince?: number;
  /**
   * Why the session may hold something past its statements (a LISTEN, a cursor, a statement the
   * relay does not know to leave nothing behind): set by the first such sign, never cleared.
   */
  leftSomething?: string;

  constructor(now: number) {
    this.idleSince = now;
  }

  /** The session is through its startup (the server has been ready for queries once). */
  get started(): boolean {
    return this.txStatus !== undefined;
  }

  /** A statement is running: the client sent something since the last ReadyForQuery. */
  get busy(): boolean {
    return this.busySince !== undefined;
  }

  /**
   * Work is under way that the client may be about to finish: a statement running, or a
   * transaction open (a pool's ROLLBACK, sent as its call answered, can reach hintbox after the
   * answer does).
   */
  get unsettled(): boolean {
    return this.busy || this.txStatus === 'T' || this.txStatus === 'E';
  }

  /** Bytes from the client. Before the startup is done they are authentication, not a statement. */
  clientSent(chunk: Buffer, now: number): void {
    // A Terminate ('X', length 4) is the end of an idle session, not a statement.
    const terminate = chunk.length === 5 && chunk[0] === 0x58 && chunk.readInt32BE(1) === 4;
    if (this.started && !terminate) this.busySince ??= now;
  }

  /** A ReadyForQuery from the server, with its transaction status byte. */
  readyForQuery(txStatus: string, now: number): void {
    this.txStatus = txStatus;
    this.idleSince = now;
    this.busySince = undefined;
  }

  /**
   * A CommandComplete's tag: a statement that is not known to leave nothing in the session (a
   * LISTEN, a DO block that may have run one, a cursor WITH HOLD, …) marks it (see {@link leftBehindBy}).
   */
  commandComplete(tag: string): void {
    this.leftSomething ??= leftBehindBy(tag);
  }

  /** A sign from the stream itself: a notification came (it listens), or the relay lost track of the messages. */
  mark(reason: string): void {
    this.leftSomething ??= reason;
  }

  /**
   * Why the session must end when the sandbox's call ends, from what the relay saw, or undefined
   * when it is a clean idle connection (a pool's) that may stay: not through its startup, a
   * statement running, a transaction open (or failed), or something left behind.
   */
  holdsSomething(): string | undefined {
    if (!this.started) return 'it is not through its startup';
    if (this.busy) return 'a statement is running';
    if (this.txStatus === 'T') return 'it is idle in a transaction';
    if (this.txStatus !== 'I') return 'it is in a failed transaction';
    return this.leftSomething;
  }

  /** Why the session must be cut now (a statement or an idle time past its bound), or undefined. */
  crossedBound(bounds: SessionBounds, now: number): string | undefined {
    if (!this.started) return undefined;
    if (this.busySince !== undefined) {
      return now - this.busySince > bounds.statementTimeoutMs
        ? `a statement ran longer than ${bounds.statementTimeoutMs} ms`
        : undefined;
    }
    if (this.txStatus === 'I') {
      return now - this.idleSince > bounds.idleSessionTimeoutMs
        ? `the session was idle longer than ${bounds.idleSessionTimeoutMs} ms`
        : undefined;
    }
    return now - this.idleSince > bounds.idleInTransactionTimeoutMs
      ? `a transaction was idle longer than ${bounds.idleInTransactionTimeoutMs} ms`
      : undefined;
  }
}

/**
 * Statements that leave nothing in a session once their transaction is over (a read, a write,
 * a transaction's control, a setting, a prepared statement of the protocol's): a CommandComplete
 * tag's words before its counts. Everything else — LISTEN, DO and CALL (which may run one),
 * DECLARE (a cursor WITH HOLD), CREATE TEMP …, a tag of a later Postgres — counts as leaving
 * something: fail closed.
 */
const LEAVES_NOTHING = new Set([
  'SELECT',
  'INSERT',
  'UPDATE',
  'DELETE',
  'MERGE',
  'COPY',
  'FETCH',
  'MOVE',
  'BEGIN',
  'START TRANSACTION',
  'COMMIT',
  'ROLLBACK',
  'SAVEPOINT',
  'RELEASE',
  'SHOW',
  'SET',
  'RESET',
  'DISCARD ALL',
  'CLOSE CURSOR',
  'CLOSE CURSOR ALL',
  'DEALLOCATE',
  'DEALLOCATE ALL',
  'PREPARE',
]);

/** Why a statement with this CommandComplete tag may leave something in its session, or undefined. Pure. */
export function leftBehindBy(tag: string): string | undefined {
  const words = tag.replace(/( \d+)+$/, '');
  return LEAVES_NOTHING.has(words)
    ? undefined
    : `it ran ${words || 'an empty statement'}, which may leave something in the session`;
}

/**
 * How often to look for sessions past a bound: a few times per shortest bound, so a session is
 * cut at most a quarter late, and between every 0.1 s and every 1 s.
 */
export function boundsCheckInterval(bounds: SessionBounds): number {
  const shortest = Math.min(bounds.statementTimeoutMs, bounds.idleInTransactionTimeoutMs, bounds.idleSessionTimeoutMs);
  return Math.min(Math.max(shortest / 4, 100), 1_000);
}
