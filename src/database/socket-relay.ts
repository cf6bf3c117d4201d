import type { SocketAccess } from '../util/unix-socket.js';
import type { SandboxValueName } from '../profile/sandbox-values.js';
import type { SessionBounds } from './role-grants.js';

/**
 * A sandbox's way to its database: a Unix socket in a directory of its own, bound into the
 * container, relaying each connection to the real Postgres. A sandbox without a network still
 * reaches the database this way, and only as the role it was given. The relay watches the
 * server's answers for privilege errors (a tool did what its hints said it would not) and can
 * cut every session at once (shutdown, a call's end or deadline).
 *
 * This file is the relay as its users see it (options, events, the environment a sandbox
 * gets); pg-socket-relay.ts is how it relays, and starts one (startSocketRelay).
 */

/** Where the socket directory is bound inside the container. */
export const SANDBOX_PG_SOCKET_DIR = '/run/hintbox/pg';
/** libpq looks for `<PGHOST>/.s.PGSQL.<PGPORT>`. */
export const PG_SOCKET_PORT = 5432;
export const PG_SOCKET_FILE = `.s.PGSQL.${PG_SOCKET_PORT}`;

/** The real Postgres: TCP, or the path of its Unix socket file. */
export type RelayUpstream = { host: string; port: number } | { path: string };

/** Postgres refused something a sandbox's session tried: its hints were not true. */
export interface PrivilegeViolation {
  /** 42501 insufficient_privilege or 25006 read_only_sql_transaction. */
  sqlstate: string;
  message: string;
  severity: string;
  /** The relay's id for the connection (1, 2, …). */
  connectionId: number;
  /** As the client gave them in its startup packet. */
  user: string;
  database: string;
  at: Date;
}

/** The relay refused a connection itself (before Postgres saw it), or cut a session past a bound. */
export interface RefusedConnection {
  connectionId: number;
  reason: string;
}

export interface SocketRelayOptions {
  upstream: RelayUpstream;
  /** Parent of the fresh socket directory. Default: the OS temp dir. */
  baseDir?: string;
  /**
   * The uid:gid the sandbox runs as. When it is not hintbox's own uid, the directory and socket
   * are given to it (hintbox runs as root) or, failing that, opened to all local users (the
   * directory's name is random, and the role's password is still needed).
   */
  sandboxUser?: { uid: number; gid: number };
  /** When set, only startups with exactly this user and database are relayed. */
  allow?: { user: string; database: string };
  onViolation?: (violation: PrivilegeViolation) => void;
  onRefused?: (refused: RefusedConnection) => void;
  /**
   * Sessions (startups relayed to Postgres) at once; a startup beyond it is refused (53300)
   * before Postgres sees it. A session counts until Postgres's side of it is closed. Set it to
   * the role's CONNECTION LIMIT. Default 10.
   */
  maxConnections?: number;
  /**
   * A connection must be through its startup (startup packet sent, authenticated, Postgres
   * ready for queries) within this, or it is cut. Default 10 s.
   */
  startupTimeoutMs?: number;
  /**
   * Held by the relay whatever the session SETs: a statement that runs longer, a transaction
   * idle longer, or a session idle longer is cut (its query cancelled, both sockets closed, so
   * Postgres ends the backend and its locks). Default: none.
   */
  bounds?: SessionBounds;
  /** How long cutAll() waits for its cancel requests. Default 2 s. */
  cancelTimeoutMs?: number;
  now?: () => Date;
}

/** A session the relay carries, as a call's end judges it (see SessionDatabase.endCallSessions). */
export interface RelaySession {
  connectionId: number;
  /** Its backend's process id, from the server's BackendKeyData; unset before it came. */
  pid?: number;
  /** Why it must end when the call ends, from what the relay saw; unset for a clean idle session. */
  holds?: string;
  /** A statement of it is running (the client sent something since the last ReadyForQuery). */
  running?: boolean;
}

/** A running relay. Disposing it closes it. */
export interface SocketRelay extends AsyncDisposable {
  /**
   * The host directory to bind into the container at SANDBOX_PG_SOCKET_DIR. Bind it read-only:
   * connecting to a socket needs no write access to the mount, and the sandbox cannot plant files.
   */
  readonly dir: string;
  readonly socketPath: string;
  /** How the sandbox user gets access: it is hintbox's uid, or chown'ed to it, or world-accessible. */
  readonly access: SocketAccess;
  /** Connections open now (sessions, and connections that have not sent a startup packet yet). */
  readonly connectionCount: number;
  /**
   * Ends every open session now: both sockets destroyed, and for each session whose server key
   * is known a CancelRequest to Postgres, so a running query stops instead of running on.
   * Returns how many connections were cut. New connections are still accepted.
   */
  cutAll(): Promise<number>;
  /** Ends these sessions (by `connectionId`) as cutAll does; returns how many were still open. */
  cutSessions(ids: readonly number[]): Promise<number>;
  /** The sessions open now, each with why it must end at a call's end, if it must. */
  openSessions(): RelaySession[];
  /** Resolves once no session runs a statement or has a transaction open, or after `timeoutMs`: a call's last statement (a pool's ROLLBACK sent as it answered) may still be on its way. */
  settled(timeoutMs: number): Promise<void>;
  /** Stops accepting, cuts every session, removes the socket and its directory. */
  close(): Promise<void>;
}

/**
 * The environment a sandbox needs to reach its database through the relay, as libpq and most
 * drivers read it. DATABASE_URL names the socket folder as the URL's host, percent-encoded
 * (`postgresql://u:pw@%2Frun%2Fhintbox%2Fpg:5432/db`): libpq, node-postgres and asyncpg decode
 * it to the folder, and Node's `URL` (WHATWG) accepts it, where it refuses the empty host of
 * `postgresql://u:pw@/db?host=…`. Not `localhost` with `?host=`: asyncpg reads `host` from the
 * query only when the URL has no host, and would try TCP instead.
 */
export function sandboxDatabaseEnv(
  role: { user: string; password: string; database: string },
  socketDir: string = SANDBOX_PG_SOCKET_DIR,
): Record<SandboxValueName, string> {
  const enc = encodeURIComponent;
  return {
    PGHOST: socketDir,
    PGPORT: String(PG_SOCKET_PORT),
    PGUSER: role.user,
    PGPASSWORD: role.password,
    PGDATABASE: role.database,
    DATABASE_URL: `postgresql://${enc(role.user)}:${enc(role.password)}@${enc(socketDir)}:${PG_SOCKET_PORT}/${enc(role.database)}`,
  };
}
