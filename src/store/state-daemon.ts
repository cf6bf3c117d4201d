import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Logger } from '../util/logger.js';
import { isProcessAlive } from '../util/process-alive.js';
import type { SqlAdapter, SqlExecutor, SqlParam, SqlRow } from './state-store.js';

/**
 * The embedded store, shared. PGlite (Postgres in WebAssembly) takes ~250 MB and half a second
 * to open, and only one process may open its folder. So one small process per state folder
 * holds it — the state daemon — and every hintbox process on the machine talks SQL to it over
 * a Unix socket in that folder (owner-only). The first hintbox that needs it starts it; it
 * exits when no client has been connected for a while.
 *
 * The wire: newline-delimited JSON. Requests `{id, op, sql?, params?}` with op `query`,
 * `begin`, `commit`, `rollback`, or `{id, op: 'copy', table, columns, data}` (COPY's text
 * format; outside transactions); answers `{id, rows}` or `{id, error}`. A connection has at
 * most one transaction; a connection that closes inside one rolls it back. (Whoever can reach
 * the socket can run any SQL: it is owner-only.)
 */

export const STATE_SOCKET = 'state.sock';
/** The embedded store's lock in the state folder: the pid of the process that holds it, the daemon. */
export const STATE_LOCK_FILE = 'hintbox.lock';

/** The pid of the live process holding the state folder's lock (its daemon), if any. */
export function stateDaemonPid(dir: string): number | undefined {
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(path.join(dir, STATE_LOCK_FILE), 'utf8'), 10);
  } catch {
    return undefined;
  }
  return isProcessAlive(pid) ? pid : undefined;
}
/** How long a client waits for one answer of the daemon. */
const REQUEST_TIMEOUT_MS = 30_000;

interface Request {
  id: number;
  op: 'query' | 'begin' | 'commit' | 'rollback' | 'copy';
  sql?: string;
  params?: SqlParam[];
  /** For `copy`: where, and the rows in COPY's text format. */
  table?: string;
  columns?: string[];
  data?: string;
}

interface Answer {
  id: number;
  rows?: SqlRow[];
  error?: string;
  /** What the daemon speaks (absent: 1, before `copy`). */
  protocol?: number;
}

/**
 * The wire's version: 2 added `copy`. A client may meet a daemon of an older hintbox (one
 * still running, idle, after an upgrade), which answers nothing to an op it does not know: so
 * every answer says what the daemon speaks, and a client uses `copy` only once a daemon said 2.
 */
const PROTOCOL = 2;

export interface StateDaemonOptions {
  /** The state folder: PGlite's data under `pgdata/`, the socket, the lock. */
  dir: string;
  /** Exit after this long without clients. Default 5 minutes. */
  idleMs?: number;
  log: Logger;
  /** Opens the database the daemon serves (PGlite in production, injectable for tests). */
  openDatabase: (dir: string) => Promise<SqlAdapter>;
}

export interface RunningStateDaemon {
  socketPath: string;
  /** Resolves when the daemon has stopped (idle, or `stop()`). */
  stopped: Promise<void>;
  stop(): Promise<void>;
}

/** Serves the state folder's database on its socket until idle. */
export async function serveStateDaemon(options: StateDaemonOptions): Promise<RunningStateDaemon> {
  const { dir, log } = options;
  const idleMs = options.idleMs ?? 5 * 60_000;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // Opening takes the folder's lock: a second daemon fails here, before touching the socket.
  const db = await options.openDatabase(dir);
  const socketPath = path.join(dir, STATE_SOCKET);
  rmSync(socketPath, { force: true });

  const clients = new Set<net.Socket>();
  let idleTimer: NodeJS.Timeout | undefined;
  let stopping: Promise<void> | undefined;
  let resolveStopped!: () => void;
  const stopped = new Promise<void>((resolve) => (resolveStopped = resolve));

  const server = net.createServer((socket) => {
    clients.add(socket);
    if (idleTimer) clearTimeout(idleTimer);
    serveConnection(socket, db, log);
    socket.on('close', () => {
      clients.delete(socket);
      armIdle();
    });
  });
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      if (idleTimer) clearTimeout(idleTimer);
      // Clients first: server.close() waits for every connection to end.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of clients) socket.destroy();
      await closed;
      await db.close().catch((error: Error) => log.warn(`closing the state database: ${error.message}`));
      rmSync(socketPath, { force: true });
      resolveStopped();
    })());
  const armIdle = (): void => {
    if (clients.size > 0 || stopping) return;
    if (idleTimer) clearTimeout(idleTimer);
    idleTimer = setTimeout(() => {
      log.info(`no client for ${Math.round(idleMs / 1000)} s: stopping`);
      void stop();
    }, idleMs);
  };

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  chmodSync(socketPath, 0o600);
  armIdle();
  log.info(`serving ${dir} on ${socketPath}`);
  return { socketPath, stopped, stop };
}

/**
 * A `data` handler that calls `onLine` with each complete line (without its `\n`) until it
 * returns false. Each chunk is looked at once: searching the whole buffered text for a line end
 * at every chunk made a line of n bytes cost O(n²) (a 40 MB audit record kept the daemon busy
 * past the client's answer time, and the trail stopped).
 */
export function lineSplitter(onLine: (line: string) => boolean): (chunk: string) => void {
  let parts: string[] = [];
  let stopped = false;
  return (chunk) => {
    let start = 0;
    let nl: number;
    while (!stopped && (nl = chunk.indexOf('\n', start)) !== -1) {
      parts.push(chunk.slice(start, nl));
      const line = parts.length === 1 ? parts[0]! : parts.join('');
      parts = [];
      start = nl + 1;
      if (!onLine(line)) stopped = true;
    }
    if (!stopped && start < chunk.length) parts.push(chunk.slice(start));
  };
}

function serveConnection(socket: net.Socket, db: SqlAdapter, log: Logger): void {
  // The open transaction of this connection: its executor and how to end it.
  let tx: { executor: SqlExecutor; finish: (commit: boolean) => Promise<void> } | undefined;
  // Requests of one connection run in order.
  let queue = Promise.resolve();
  const answer = (a: Answer): void => {
    if (!socket.destroyed) socket.write(JSON.stringify({ ...a, protocol: PROTOCOL }) + '\n');
  };

  const handle = async (request: Request): Promise<void> => {
    try {
      switch (request.op) {
        case 'query': {
          const rows = await (tx?.executor ?? db).query(request.sql ?? '', request.params ?? []);
          return answer({ id: request.id, rows });
        }
        case 'copy': {
          if (tx) throw new Error('copy: not inside a transaction');
          if (!db.copyRows) throw new Error('copy: this database cannot');
          await db.copyRows(request.table ?? '', request.columns ?? [], request.data ?? '');
          return answer({ id: request.id, rows: [] });
        }
        case 'begin': {
          if (tx) throw new Error('a transaction is already open on this connection');
          tx = await beginTransaction(db);
          return answer({ id: request.id, rows: [] });
        }
        case 'commit':
        case 'rollback': {
          if (!tx) throw new Error('no transaction is open on this connection');
          const current = tx;
          tx = undefined;
          await current.finish(request.op === 'commit');
          return answer({ id: request.id, rows: [] });
        }
        default:
          throw new Error(`unknown op ${JSON.stringify((request as { op?: unknown }).op)}`);
      }
    } catch (error) {
      answer({ id: request.id, error: (error as Error).message });
    }
  };

  socket.setEncoding('utf8');
  socket.on(
    'data',
    lineSplitter((line) => {
      let request: Request;
      try {
        request = JSON.parse(line) as Request;
      } catch {
        log.warn('a client sent a line that is not JSON; closing its connection');
        socket.destroy();
        return false;
      }
      queue = queue.then(() => handle(request));
      return true;
    }),
  );
  socket.on('close', () => {
    // A client gone inside a transaction: roll it back so the database is not held.
    queue = queue.then(async () => {
      const current = tx;
      tx = undefined;
      await current?.finish(false).catch(() => undefined);
    });
  });
  socket.on('error', () => undefined);
}

/** Opens a transaction that stays open until `finish` is called. */
async function beginTransaction(
  db: SqlAdapter,
): Promise<{ executor: SqlExecutor; finish: (commit: boolean) => Promise<void> }> {
  let release!: (commit: boolean) => void;
  const decided = new Promise<boolean>((resolve) => (release = resolve));
  let ready!: (executor: SqlExecutor) => void;
  const started = new Promise<SqlExecutor>((resolve) => (ready = resolve));
  const done = db
    .transaction(async (executor) => {
      ready(executor);
      if (!(await decided)) throw new RollbackSignal();
    })
    .catch((error: unknown) => {
      if (!(error instanceof RollbackSignal)) throw error;
    });
  const executor = await Promise.race([
    started,
    done.then(() => Promise.reject(new Error('the transaction ended before it began'))),
  ]);
  return {
    executor,
    finish: async (commit) => {
      release(commit);
      await done;
    },
  };
}

class RollbackSignal extends Error {}

// ---------------------------------------------------------------------------------------------
// The client

export interface StateClientOptions {
  dir: string;
  /** Starts a daemon for `dir` when none answers (detached). */
  startDaemon: (dir: string) => void;
  /** How long to wait for a daemon to answer. Default 30 s (a first start runs initdb). */
  connectTimeoutMs?: number;
}

/** A SqlAdapter that talks to the state daemon of `dir`, starting it when needed. */
export async function connectStateDaemon(options: StateClientOptions): Promise<SqlAdapter> {
  const socketPath = path.join(options.dir, STATE_SOCKET);
  const socket = await connectOrStart(socketPath, options);
  return new RemoteSqlAdapter(socket);
}

async function connectOrStart(socketPath: string, options: StateClientOptions): Promise<net.Socket> {
  const deadline = Date.now() + (options.connectTimeoutMs ?? 30_000);
  let lastStart = 0;
  let lastError: Error | undefined;
  while (Date.now() < deadline) {
    try {
      return await connectSocket(socketPath);
    } catch (error) {
      lastError = error as Error;
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ECONNREFUSED') throw error;
      // Start a daemon, and again every 2 s while none answers: one that was stopping when we
      // came (idle) still held the folder's lock, so our first start may have been refused.
      if (Date.now() - lastStart > 2000) {
        mkdirSync(options.dir, { recursive: true, mode: 0o700 });
        options.startDaemon(options.dir);
        lastStart = Date.now();
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(
    `the state daemon for ${options.dir} did not answer within ${Math.round((options.connectTimeoutMs ?? 30_000) / 1000)} s` +
      ` (${lastError?.message ?? 'no answer'}); see ${path.join(options.dir, 'state-daemon.log')}`,
  );
}

function connectSocket(socketPath: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath);
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

class RemoteSqlAdapter implements SqlAdapter {
  private nextId = 1;
  /** What the daemon speaks, from its answers; 1 until one says more (see PROTOCOL). */
  private daemonProtocol = 1;
  private readonly waiting = new Map<number, { resolve: (rows: SqlRow[]) => void; reject: (e: Error) => void }>();
  private closedError?: Error;
  /** One transaction at a time on this connection; other work waits for it. */
  private txLock: Promise<void> = Promise.resolve();

  constructor(private readonly socket: net.Socket) {
    socket.setEncoding('utf8');
    socket.on(
      'data',
      lineSplitter((line) => {
        const answer = JSON.parse(line) as Answer;
        this.daemonProtocol = answer.protocol ?? 1;
        const waiter = this.waiting.get(answer.id);
        this.waiting.delete(answer.id);
        if (answer.error !== undefined) waiter?.reject(new Error(answer.error));
        else waiter?.resolve(answer.rows ?? []);
        return true;
      }),
    );
    const fail = (error: Error): void => {
      this.closedError = error;
      for (const waiter of this.waiting.values()) waiter.reject(error);
      this.waiting.clear();
    };
    socket.on('error', (error) => fail(error));
    socket.on('close', () => fail(this.closedError ?? new Error('the state daemon closed the connection')));
  }

  private send(
    op: Request['op'],
    sql?: string,
    params?: readonly SqlParam[],
    copy?: Pick<Request, 'table' | 'columns' | 'data'>,
  ): Promise<SqlRow[]> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = this.nextId++;
    return new Promise<SqlRow[]>((resolve, reject) => {
      // A stuck daemon must not hang calls: their audit intent fails, so they are refused.
      const timer = setTimeout(() => {
        if (this.waiting.delete(id))
          reject(new Error(`the state daemon gave no answer within ${REQUEST_TIMEOUT_MS / 1000} s`));
      }, REQUEST_TIMEOUT_MS);
      timer.unref();
      this.waiting.set(id, {
        resolve: (rows) => (clearTimeout(timer), resolve(rows)),
        reject: (error) => (clearTimeout(timer), reject(error)),
      });
      this.socket.write(
        JSON.stringify({ id, op, ...(sql !== undefined ? { sql } : {}), ...(params ? { params } : {}), ...copy }) +
          '\n',
      );
    });
  }

  async query(sql: string, params?: readonly SqlParam[]): Promise<SqlRow[]> {
    await this.txLock;
    return this.send('query', sql, params);
  }

  async copyRows(table: string, columns: readonly string[], data: string): Promise<void> {
    await this.txLock;
    if (this.daemonProtocol < 2) throw new Error('copy: the state daemon does not speak it (an older hintbox)');
    await this.send('copy', undefined, undefined, { table, columns: [...columns], data });
  }

  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const previous = this.txLock;
    let unlock!: () => void;
    this.txLock = new Promise<void>((resolve) => (unlock = resolve));
    await previous;
    try {
      await this.send('begin');
      try {
        const result = await work({ query: (sql, params) => this.send('query', sql, params) });
        await this.send('commit');
        return result;
      } catch (error) {
        await this.send('rollback').catch(() => undefined);
        throw error;
      }
    } finally {
      unlock();
    }
  }

  close(): Promise<void> {
    this.socket.end();
    return Promise.resolve();
  }
}

/** Starts `hintbox state-daemon <dir>` detached, its output in `<dir>/state-daemon.log`. */
export function spawnStateDaemon(cli: string, dir: string): void {
  const logFd = openSync(path.join(dir, 'state-daemon.log'), 'a', 0o600);
  const child = spawn(process.execPath, [cli, 'state-daemon', dir], {
    detached: true,
    stdio: ['ignore', logFd, logFd],
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      HINTBOX_LOG_LEVEL: process.env.HINTBOX_LOG_LEVEL ?? 'info',
      ...(process.env.HINTBOX_STATE_DAEMON_IDLE
        ? { HINTBOX_STATE_DAEMON_IDLE: process.env.HINTBOX_STATE_DAEMON_IDLE }
        : {}),
    },
  });
  child.unref();
}
