import { rm } from 'node:fs/promises';
import net from 'node:net';
import { listenFor, makeSocketFolder, type SocketAccess } from '../util/unix-socket.js';
import {
  BackendMessageScanner,
  INSUFFICIENT_PRIVILEGE,
  READ_ONLY_SQL_TRANSACTION,
  encodeCancelRequest,
  encodeErrorResponse,
  parseCommandTag,
  parseErrorFields,
  readStartupPacket,
} from './pg-wire.js';
import type { SessionBounds } from './role-grants.js';
import { SessionActivity, boundsCheckInterval } from './session-activity.js';
import {
  PG_SOCKET_FILE,
  type RefusedConnection,
  type RelaySession,
  type SocketRelay,
  type SocketRelayOptions,
} from './socket-relay.js';
import { monotonicMs } from '../util/clock.js';

/**
 * The relay itself (see socket-relay.ts for what it promises): it reads each connection's
 * startup packet, refuses what the sandbox may not do before Postgres sees it, then pipes
 * both ways while watching the server's answers for privilege errors and session state.
 *
 * Postgres forks a backend for a startup packet before it authenticates the role, and a
 * role's CONNECTION LIMIT is checked only after: a sandbox that sends startups and never
 * answers the password request would fill max_connections for every client of the server,
 * the superuser included. So the relay holds each sandbox to its role's limit itself, counts a
 * session until Postgres's side of it is closed, and cuts a startup that is not done in time.
 */

interface RelayConnection {
  id: number;
  client: net.Socket;
  upstream?: net.Socket;
  /** From BackendKeyData: what a CancelRequest for this session needs. */
  keyData?: Buffer;
  user: string;
  database: string;
  /** Until the server's first ReadyForQuery (or the relay refuses): cuts a slow startup. */
  startupTimer?: NodeJS.Timeout;
  /** Statement running, idle or idle in a transaction, and since when: for the bounds. */
  activity: SessionActivity;
}

/** Connections accepted that have not been relayed yet, beyond the sessions: bounded too. */
const UNIDENTIFIED_HEADROOM = 4;
const DEFAULT_MAX_CONNECTIONS = 10;

/** Starts a relay in a fresh directory under `baseDir`. */
export async function startSocketRelay(options: SocketRelayOptions): Promise<SocketRelay> {
  const { dir, socketPath } = await makeSocketFolder('hintbox-pg-', PG_SOCKET_FILE, options.baseDir);
  try {
    const relay = new PgSocketRelay(options, dir, socketPath);
    await relay.listen();
    return relay;
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

/** The SocketRelay over a Unix socket; startSocketRelay makes its directory and calls listen(). */
export class PgSocketRelay implements SocketRelay {
  access: SocketAccess = 'owner';
  private readonly server: net.Server;
  private readonly connections = new Map<number, RelayConnection>();
  /** Connections whose startup went to Postgres, until Postgres's side of them is closed. */
  private readonly sessions = new Set<RelayConnection>();
  private readonly maxConnections: number;
  private boundsTimer?: NodeJS.Timeout;
  private nextId = 0;
  private closed = false;

  constructor(
    private readonly options: SocketRelayOptions,
    readonly dir: string,
    readonly socketPath: string,
  ) {
    this.maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
    if (!Number.isInteger(this.maxConnections) || this.maxConnections < 1) {
      throw new Error('maxConnections must be a positive integer');
    }
    this.server = net.createServer((socket) => this.accept(socket));
    // A backstop, a little after Postgres's own bounds: Postgres ends what the role's settings
    // bound with its precise errors (57014, …), and the relay ends what a role switched off (SET).
    // At the same instant the two raced, and the client saw either.
    const bounds = options.bounds && backstopBounds(options.bounds);
    if (bounds) {
      this.boundsTimer = setInterval(() => this.holdToBounds(bounds), boundsCheckInterval(bounds));
      this.boundsTimer.unref();
    }
  }

  get connectionCount(): number {
    return this.connections.size;
  }

  async listen(): Promise<void> {
    // In the 'world' case the role's password is still required.
    this.access = await listenFor(
      this.server,
      this.dir,
      this.socketPath,
      this.options.sandboxUser,
      'choose a shorter baseDir',
    );
  }

  openSessions(): RelaySession[] {
    return [...this.connections.values()].map(({ id, keyData, activity }) => ({
      connectionId: id,
      ...(keyData ? { pid: keyData.readInt32BE(0) } : {}),
      ...(activity.holdsSomething() ? { holds: activity.holdsSomething() } : {}),
      ...(activity.busy ? { running: true } : {}),
    }));
  }

  async settled(timeoutMs: number): Promise<void> {
    const deadline = monotonicMs() + timeoutMs;
    while ([...this.connections.values()].some((c) => c.activity.unsettled) && monotonicMs() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  cutAll(): Promise<number> {
    return this.cutSessions([...this.connections.keys()]);
  }

  async cutSessions(ids: readonly number[]): Promise<number> {
    const cut = ids.flatMap((id) => this.connections.get(id) ?? []);
    for (const conn of cut) this.connections.delete(conn.id);
    for (const conn of cut) {
      clearTimeout(conn.startupTimer);
      conn.client.destroy();
      conn.upstream?.destroy();
    }
    await Promise.all(cut.flatMap((conn) => (conn.keyData ? [this.cancel(conn.keyData)] : [])));
    return cut.length;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.boundsTimer);
    const stopped = new Promise<void>((resolve) => this.server.close(() => resolve()));
    await this.cutAll();
    await stopped;
    await rm(this.dir, { recursive: true, force: true });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private accept(client: net.Socket): void {
    const conn: RelayConnection = {
      id: ++this.nextId,
      client,
      user: '',
      database: '',
      activity: new SessionActivity(monotonicMs()),
    };
    this.connections.set(conn.id, conn);
    const startupMs = this.options.startupTimeoutMs ?? 10_000;
    conn.startupTimer = setTimeout(
      () => this.refuse(conn, '08P01', `startup not done within ${startupMs} ms`),
      startupMs,
    );
    client.on('error', () => this.drop(conn));
    client.on('close', () => {
      clearTimeout(conn.startupTimer);
      this.connections.delete(conn.id);
      // Let the server read the end of the stream (the pipe ends it), and make sure it goes.
      if (conn.upstream && !conn.upstream.destroyed) {
        conn.upstream.end();
        setTimeout(() => conn.upstream?.destroy(), 5_000).unref();
        // Postgres does not notice a client gone while a query runs (client_connection_check_interval
        // is the session's to SET): the query would run on, holding its locks. Cancel it.
        if (conn.activity.busy && conn.keyData) void this.cancel(conn.keyData);
      }
    });

    if (this.connections.size > this.maxConnections + UNIDENTIFIED_HEADROOM) {
      this.refuse(conn, '53300', this.tooMany());
      return;
    }

    let pending = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const read = readStartupPacket(pending);
        if (!read) return;
        const raw = pending.subarray(0, read.bytes);
        pending = pending.subarray(read.bytes);
        const { packet } = read;
        if (packet.kind === 'ssl-request' || packet.kind === 'gssenc-request') {
          // Refuse encryption on the local socket: the relay must be able to read the answers,
          // and the hop to Postgres is the relay's own.
          client.write('N');
          continue;
        }
        client.pause();
        client.off('data', onData);
        if (packet.kind === 'invalid') {
          this.refuse(conn, '08P01', `invalid startup packet: ${packet.reason}`);
        } else if (packet.kind === 'cancel-request') {
          this.cancelOwn(conn, packet.keyData);
        } else {
          conn.user = packet.parameters.user ?? '';
          conn.database = packet.parameters.database ?? conn.user;
          const allow = this.options.allow;
          if (allow && (conn.user !== allow.user || conn.database !== allow.database)) {
            this.refuse(
              conn,
              '28000',
              `this sandbox may connect only as user "${allow.user}" to database "${allow.database}"`,
            );
          } else if (this.sessions.size >= this.maxConnections) {
            this.refuse(conn, '53300', this.tooMany());
          } else {
            this.relay(conn, Buffer.concat([raw, pending]));
          }
        }
        return;
      }
    };
    client.on('data', onData);
  }

  /** Connects to Postgres, sends what the client sent so far, and relays both ways. */
  private relay(conn: RelayConnection, first: Buffer): void {
    const { client } = conn;
    const target = this.options.upstream;
    const upstream = 'path' in target ? net.connect(target.path) : net.connect(target.port, target.host);
    conn.upstream = upstream;
    this.sessions.add(conn);
    let answered = false;
    upstream.on('error', (error) => {
      if (!answered && !client.destroyed) {
        client.end(
          encodeErrorResponse({
            severity: 'FATAL',
            sqlstate: '08006',
            message: `hintbox relay: cannot reach the database (${(error as NodeJS.ErrnoException).code ?? error.message})`,
          }),
        );
      } else {
        client.destroy();
      }
    });
    // The server ended the session (Terminate, pg_terminate_backend): pass the end on after its last bytes.
    upstream.on('close', () => {
      this.sessions.delete(conn);
      if (!client.destroyed) client.end();
    });

    const scanner = new BackendMessageScanner({ capture: ['E', 'K', 'Z', 'C'] });
    client.on('data', (chunk: Buffer) => conn.activity.clientSent(chunk, monotonicMs()));
    upstream.on('data', (chunk: Buffer) => {
      answered = true;
      this.watch(conn, scanner, chunk);
      if (!client.write(chunk)) {
        upstream.pause();
        client.once('drain', () => upstream.resume());
      }
    });
    upstream.write(first);
    client.pipe(upstream);
  }

  private watch(conn: RelayConnection, scanner: BackendMessageScanner, chunk: Buffer): void {
    const messages = scanner.push(chunk);
    // Past this point the relay cannot tell what the session holds: it ends at the call's end.
    if (scanner.stoppedBecause) conn.activity.mark(`the relay stopped following it (${scanner.stoppedBecause})`);
    for (const message of messages) {
      if (message.type === 'K' && message.body) conn.keyData = message.body;
      if (message.type === 'C' && message.body) conn.activity.commandComplete(parseCommandTag(message.body));
      if (message.type === 'A') conn.activity.mark('it listens (a notification came)');
      if (message.type === 'V') conn.activity.mark('it called a function by the fast path (any function)');
      if (message.type === 'Z') {
        clearTimeout(conn.startupTimer);
        conn.activity.readyForQuery(message.body?.toString('latin1', 0, 1) ?? 'I', monotonicMs());
      }
      if (message.type !== 'E' || !message.body) continue;
      const error = parseErrorFields(message.body);
      if (error.sqlstate !== INSUFFICIENT_PRIVILEGE && error.sqlstate !== READ_ONLY_SQL_TRANSACTION) continue;
      try {
        this.options.onViolation?.({
          sqlstate: error.sqlstate,
          message: error.message,
          severity: error.severity,
          connectionId: conn.id,
          user: conn.user,
          database: conn.database,
          at: this.options.now?.() ?? new Date(),
        });
      } catch {
        // A listener's failure must not break the sandbox's session.
      }
    }
  }

  /** Cuts the sessions past a bound (see SocketRelayOptions.bounds). */
  private holdToBounds(bounds: SessionBounds): void {
    const now = monotonicMs();
    for (const conn of this.connections.values()) {
      const reason = conn.activity.crossedBound(bounds, now);
      if (reason) this.cut(conn, reason);
    }
  }

  /** Ends one session now: both sockets closed, and its running query (if any) cancelled. */
  private cut(conn: RelayConnection, reason: string): void {
    this.connections.delete(conn.id);
    conn.client.destroy();
    conn.upstream?.destroy();
    if (conn.keyData) void this.cancel(conn.keyData);
    this.report({ connectionId: conn.id, reason });
  }

  private tooMany(): string {
    return `too many connections: this sandbox's role has a connection limit (${this.maxConnections}), and all are in use`;
  }

  /**
   * A CancelRequest goes to Postgres only for a session of this relay: a sandbox cannot cancel
   * the queries of other clients of the server (their keys are 32 random bits, but guessable
   * by trying). Postgres answers a CancelRequest with nothing; so does the relay.
   */
  private cancelOwn(conn: RelayConnection, keyData: Buffer): void {
    clearTimeout(conn.startupTimer);
    this.connections.delete(conn.id);
    conn.client.destroy();
    const own = [...this.connections.values()].some((c) => c.keyData?.equals(keyData));
    if (own) void this.cancel(keyData);
    else this.report({ connectionId: conn.id, reason: 'a CancelRequest for a session not of this sandbox' });
  }

  /** Answers a connection with a FATAL error of the relay's own and closes it (with Postgres's side, if any). */
  private refuse(conn: RelayConnection, sqlstate: string, reason: string): void {
    clearTimeout(conn.startupTimer);
    conn.upstream?.destroy();
    if (!conn.client.destroyed) {
      conn.client.end(encodeErrorResponse({ severity: 'FATAL', sqlstate, message: `hintbox relay: ${reason}` }));
      setTimeout(() => conn.client.destroy(), 1_000).unref();
    }
    this.connections.delete(conn.id);
    this.report({ connectionId: conn.id, reason });
  }

  private report(refused: RefusedConnection): void {
    try {
      this.options.onRefused?.(refused);
    } catch {
      // As for violations: the listener's problem, not the relay's.
    }
  }

  private drop(conn: RelayConnection): void {
    conn.client.destroy();
    conn.upstream?.destroy();
    this.connections.delete(conn.id);
  }

  /** A CancelRequest on a connection of its own, as libpq's PQcancel does. Best effort. */
  private cancel(keyData: Buffer): Promise<void> {
    const target = this.options.upstream;
    return new Promise<void>((resolve) => {
      const socket = 'path' in target ? net.connect(target.path) : net.connect(target.port, target.host);
      const timer = setTimeout(() => socket.destroy(), this.options.cancelTimeoutMs ?? 2_000);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        clearTimeout(timer);
        resolve();
      });
      socket.end(encodeCancelRequest(keyData));
    });
  }
}

/** How much later than Postgres's own bounds the relay ends a session. */
export const RELAY_BOUNDS_GRACE_MS = 500;

/** The relay's bounds: Postgres's, each {@link RELAY_BOUNDS_GRACE_MS} later. */
export function backstopBounds(bounds: SessionBounds): SessionBounds {
  return {
    statementTimeoutMs: bounds.statementTimeoutMs + RELAY_BOUNDS_GRACE_MS,
    idleInTransactionTimeoutMs: bounds.idleInTransactionTimeoutMs + RELAY_BOUNDS_GRACE_MS,
    idleSessionTimeoutMs: bounds.idleSessionTimeoutMs + RELAY_BOUNDS_GRACE_MS,
  };
}
