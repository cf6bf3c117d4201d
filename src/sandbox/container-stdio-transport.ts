import type { Readable, Writable } from 'node:stream';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/**
 * MCP over a container's stdio, as attached through the Docker API. The attach stream is
 * demultiplexed outside; this transport only frames: newline-delimited JSON-RPC on stdout in,
 * serialized messages to stdin out. stderr never reaches it.
 */
export class ContainerStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private readonly buffer = new ReadBuffer();
  private closed = false;

  constructor(
    private readonly stdin: Writable,
    private readonly stdout: Readable,
  ) {}

  start(): Promise<void> {
    this.stdout.on('data', (chunk: Buffer) => {
      try {
        this.buffer.append(chunk);
      } catch (error) {
        this.onerror?.(error as Error);
        return;
      }
      this.drain();
    });
    this.stdout.on('end', () => this.finish());
    this.stdout.on('close', () => this.finish());
    this.stdout.on('error', (error) => this.onerror?.(error));
    this.stdin.on('error', (error) => this.onerror?.(error));
    return Promise.resolve();
  }

  private drain(): void {
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.buffer.readMessage();
      } catch (error) {
        // A line that is not JSON-RPC: report it and go on with the next line.
        this.onerror?.(error as Error);
        continue;
      }
      if (message === null) return;
      this.onmessage?.(message);
    }
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) throw new Error('sandbox stdio is closed');
    const data = serializeMessage(message);
    await new Promise<void>((resolve, reject) => {
      const ok = this.stdin.write(data, (error) => (error ? reject(error) : undefined));
      if (ok) resolve();
      else this.stdin.once('drain', resolve);
    });
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.stdin.end();
      this.finish();
    }
    return Promise.resolve();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.buffer.clear();
    this.onclose?.();
  }
}
