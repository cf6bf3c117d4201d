import type { Readable, Writable } from 'node:stream';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** Lines longer than this are dropped (and reported): a server cannot make hintbox buffer without end. */
export const MAX_LINE_BYTES = 64 * 1024 * 1024;
/** Bytes sent but not yet taken by the other side, at most (see NdjsonTransport). */
export const MAX_UNREAD_BYTES = 64 * 1024 * 1024;

/**
 * Splits a byte stream into newline-delimited JSON-RPC messages. Pure framing, tested with
 * plain Buffers. Unlike the SDK's ReadBuffer it does not validate each message against the
 * protocol schema: the SDK validates what it handles, and forwarded calls are passed on as
 * received, so validating every message here would only cost time on the hot path.
 */
export class LineReader {
  private chunks: Buffer[] = [];
  private size = 0;

  /** Feeds bytes; returns the complete messages, and errors for lines that are not JSON-RPC. */
  push(chunk: Buffer): { messages: JSONRPCMessage[]; errors: Error[] } {
    const messages: JSONRPCMessage[] = [];
    const errors: Error[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      // A whole line in this chunk (most): decoded in place, without a view of it.
      const text = this.chunks.length
        ? Buffer.concat([...this.chunks, chunk.subarray(start, nl)]).toString('utf8')
        : chunk.toString('utf8', start, nl);
      this.chunks = [];
      this.size = 0;
      start = nl + 1;
      const parsed = parseLine(text);
      if (parsed instanceof Error) errors.push(parsed);
      else if (parsed) messages.push(parsed);
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.size += rest.length;
      if (this.size > MAX_LINE_BYTES) {
        this.chunks = [];
        this.size = 0;
        errors.push(new Error(`a line longer than ${MAX_LINE_BYTES} bytes was dropped`));
      } else {
        this.chunks.push(rest);
      }
    }
    return { messages, errors };
  }
}

function parseLine(line: string): JSONRPCMessage | Error | undefined {
  const text = line.endsWith('\r') ? line.slice(0, -1) : line;
  if (text.trim() === '') return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (value !== null && typeof value === 'object' && (value as { jsonrpc?: unknown }).jsonrpc === '2.0') {
      return value as JSONRPCMessage;
    }
    return new Error(`not a JSON-RPC 2.0 message: ${text.slice(0, 200)}`);
  } catch {
    return new Error(`not JSON: ${text.slice(0, 200)}`);
  }
}

/**
 * MCP over a pair of byte streams with newline-delimited JSON: a container's stdio attached
 * through the Docker API (demultiplexed outside, so stderr never reaches it), or hintbox's own
 * stdin/stdout facing the client.
 */
export class NdjsonTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private readonly reader = new LineReader();
  private closed = false;
  /** Messages sent in this turn of the event loop, written together. */
  private queued: string[] = [];
  private queuedBytes = 0;
  private senders: { resolve: () => void; reject: (error: Error) => void }[] = [];

  constructor(
    private readonly input: Readable,
    private readonly output: Writable,
    /** End `output` on close (not for process.stdout). */
    private readonly endOutputOnClose = true,
    /**
     * Bytes that may wait for the other side to read them. Beyond, `send` fails at once: a
     * server that never reads its input cannot make hintbox buffer without end.
     */
    private readonly maxUnreadBytes = MAX_UNREAD_BYTES,
  ) {}

  start(): Promise<void> {
    this.input.on('data', (chunk: Buffer) => {
      const { messages, errors } = this.reader.push(chunk);
      for (const error of errors) this.onerror?.(error);
      for (const message of messages) this.onmessage?.(message);
    });
    this.input.on('end', () => this.finish());
    this.input.on('close', () => this.finish());
    this.input.on('error', (error) => this.onerror?.(error));
    this.output.on('error', (error) => this.onerror?.(error));
    return Promise.resolve();
  }

  /**
   * Queues the message; everything queued in one turn of the event loop goes out in one write
   * (one system call instead of one per message when many calls are in flight). Resolves once
   * written (or, when the stream is full, once it drains).
   */
  send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the connection is closed'));
    let line: string;
    try {
      line = JSON.stringify(message) + '\n';
    } catch (error) {
      // A message a peer sent that cannot be written again (nested too deep for the stack): it
      // fails this send, never the process.
      return Promise.reject(new Error(`the message cannot be written as JSON: ${(error as Error).message}`));
    }
    const unread = this.output.writableLength + this.queuedBytes;
    if (unread > 0 && unread + line.length > this.maxUnreadBytes) {
      return Promise.reject(
        new Error(`the other side is not reading: ${unread} bytes are still waiting to be written to it`),
      );
    }
    return new Promise<void>((resolve, reject) => {
      this.queued.push(line);
      this.queuedBytes += line.length;
      this.senders.push({ resolve, reject });
      if (this.queued.length === 1) setImmediate(() => this.writeQueued());
    });
  }

  close(): Promise<void> {
    if (!this.closed) {
      // What was sent before the close goes out (e.g. the answers to calls a failure ended).
      this.writeQueued();
      if (this.endOutputOnClose) this.output.end();
    }
    this.finish();
    return Promise.resolve();
  }

  private writeQueued(): void {
    if (this.queued.length === 0) return;
    const text = this.queued.length === 1 ? (this.queued[0] as string) : this.queued.join('');
    const senders = this.senders;
    this.queued = [];
    this.queuedBytes = 0;
    this.senders = [];
    if (this.closed) {
      for (const s of senders) s.reject(new Error('the connection is closed'));
      return;
    }
    const ok = this.output.write(text, (error) => {
      if (error) for (const s of senders) s.reject(error);
    });
    if (ok) for (const s of senders) s.resolve();
    else this.output.once('drain', () => senders.forEach((s) => s.resolve()));
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.();
  }
}
