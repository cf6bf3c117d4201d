/**
 * Minimal MCP clients for measuring what hintbox adds, not what a client stack costs: each does
 * the least its transport needs, so that serve and run are called by clients of the same weight.
 * - {@link RawHttpClient}: HTTP/1.1 over one kept-alive socket, a request written as one string,
 *   an answer read by its `Content-Length` (serve answers a call with one JSON body).
 * - {@link RawStdioClient}: newline-delimited JSON over a child's stdin and stdout.
 * Both send one request at a time and check the answer's id. Not general clients: the bench's.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import net from 'node:net';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

interface Reply {
  id?: unknown;
  result?: unknown;
  error?: { code: number; message: string };
}

function resultOf(reply: Reply, id: number): unknown {
  if (reply.id !== id) throw new Error(`an answer to ${String(reply.id)} where ${id} was awaited`);
  if (reply.error) throw new Error(`${reply.error.message} (${reply.error.code})`);
  return reply.result;
}

/** One request at a time over HTTP/1.1 keep-alive, on a session a client opened (`sessionId`). */
export class RawHttpClient {
  private buffered = '';
  private waiting: ((text: string) => void) | undefined;
  private failed: ((error: Error) => void) | undefined;
  private readonly head: string;
  private nextId = 1_000_000;
  /** Whether the connection is gone (serve closes a kept-alive one idle for 5 s): no more calls on it. */
  closed = false;

  private constructor(
    private readonly socket: net.Socket,
    url: URL,
    headers: Record<string, string>,
  ) {
    const lines = Object.entries({ Host: url.host, Accept: 'application/json, text/event-stream', ...headers });
    this.head = `POST ${url.pathname} HTTP/1.1\r\n${lines.map(([k, v]) => `${k}: ${v}\r\n`).join('')}`;
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => this.read(chunk));
    socket.on('error', (error) => this.failed?.(error));
    socket.on('close', () => {
      this.closed = true;
      this.failed?.(new Error('the connection closed'));
    });
  }

  /** Connects to `url` for the session `sessionId` (opened by another client: initialize is not this one's). */
  static async connect(
    url: string,
    session: { sessionId: string; protocolVersion: string; token?: string },
  ): Promise<RawHttpClient> {
    const target = new URL(url);
    const socket = net.connect(Number(target.port), target.hostname);
    socket.setNoDelay(true);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    return new RawHttpClient(socket, target, {
      'Content-Type': 'application/json',
      'Mcp-Session-Id': session.sessionId,
      'MCP-Protocol-Version': session.protocolVersion,
      ...(session.token ? { Authorization: `Bearer ${session.token}` } : {}),
    });
  }

  callTool(name: string, args: Record<string, unknown>): Promise<unknown> {
    const id = ++this.nextId;
    const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
    if (this.closed) return Promise.reject(new Error('the connection closed'));
    return new Promise((resolve, reject) => {
      this.failed = reject;
      this.waiting = (text) => {
        try {
          resolve(resultOf(JSON.parse(text) as Reply, id));
        } catch (error) {
          reject(error instanceof Error ? error : new Error(String(error)));
        }
      };
      this.socket.write(`${this.head}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, 'utf8');
    });
  }

  close(): void {
    this.failed = undefined;
    this.socket.destroy();
  }

  /** Takes one whole answer off the buffer (latin1: lengths are bytes) and hands its body on. */
  private read(chunk: string): void {
    this.buffered += chunk;
    const end = this.buffered.indexOf('\r\n\r\n');
    if (end < 0) return;
    const head = this.buffered.slice(0, end);
    const status = head.slice(9, 12);
    const length = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
    if (length === undefined) return this.failed?.(new Error(`an answer without Content-Length: ${head}`));
    const total = end + 4 + Number(length);
    if (this.buffered.length < total) return;
    const body = Buffer.from(this.buffered.slice(end + 4, total), 'latin1').toString('utf8');
    this.buffered = this.buffered.slice(total);
    const waiting = this.waiting;
    this.waiting = undefined;
    if (status !== '200') return this.failed?.(new Error(`HTTP ${status}: ${body.slice(0, 200)}`));
    waiting?.(body);
  }
}

/** One request at a time over a child's stdio (newline-delimited JSON), after the MCP handshake. */
export class RawStdioClient {
  private buffered = '';
  private waiting: ((reply: Reply) => void) | undefined;
  private failed: ((error: Error) => void) | undefined;
  /** Why no call can be answered any more (the process ended, its stdin broke). */
  private gone: Error | undefined;
  private nextId = 0;

  private constructor(readonly child: ChildProcessWithoutNullStreams) {
    const end = (error: Error): void => {
      this.gone ??= error;
      const failed = this.failed;
      this.waiting = this.failed = undefined;
      failed?.(error);
    };
    child.once('exit', (code, signal) => end(new Error(`the process ended (${signal ?? `exit ${code}`})`)));
    child.once('error', end);
    child.stdin.on('error', end);
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      this.buffered += chunk;
      for (let end = this.buffered.indexOf('\n'); end >= 0; end = this.buffered.indexOf('\n')) {
        const line = this.buffered.slice(0, end);
        this.buffered = this.buffered.slice(end + 1);
        const message = JSON.parse(line) as Reply & { method?: unknown };
        // hintbox's own messages (a notification such as tools/list_changed, a request) are not
        // the answer awaited: an answer has an id and no method.
        if (message.method !== undefined || message.id === undefined) continue;
        const waiting = this.waiting;
        this.waiting = undefined;
        waiting?.(message);
      }
    });
  }

  /** Starts `command args` with `env` and does the handshake (initialize, then initialized). */
  static async start(command: string, args: string[], env: Record<string, string>): Promise<RawStdioClient> {
    const child = spawn(command, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    child.stderr.resume();
    const client = new RawStdioClient(child);
    await client.request('initialize', {
      protocolVersion: LATEST_PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: 'hintbox-bench-raw', version: '1.0.0' },
    });
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
    return client;
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  callTool(name: string, args: Record<string, unknown>): Promise<unknown> {
    return this.request('tools/call', { name, arguments: args });
  }

  /** Ends its stdin (hintbox run stops when its client goes) and waits for the exit. */
  async close(): Promise<void> {
    const exited = new Promise((resolve) =>
      this.child.exitCode === null && this.child.signalCode === null ? this.child.once('exit', resolve) : resolve(0),
    );
    this.child.stdin.end();
    await exited;
  }

  private request(method: string, params: unknown): Promise<unknown> {
    const id = ++this.nextId;
    if (this.gone) return Promise.reject(this.gone);
    return new Promise((resolve, reject) => {
      this.failed = reject;
      this.waiting = (reply) => {
        this.failed = undefined;
        try {
          resolve(resultOf(reply, id));
        } catch (error) {
          reject(error instanceof Error ? error : new Error(String(error)));
        }
      };
      this.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    });
  }
}
