import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, JSONRPCRequest, MessageExtraInfo, RequestId } from '@modelcontextprotocol/sdk/types.js';
import { NOTIFICATION } from '../mcp/methods.js';
import { writeAnswer, type HeldResponse } from './json-answer-transport.js';

/**
 * The transport of a gateway that answers 2026 clients (MCP 2026-07-28) without a session: each
 * request is a POST of its own whose response is held until its answer (plain JSON, or a stream
 * when something comes first, as `writeAnswer` decides), and nothing else reaches the client
 * (a 2026 client has no stream for messages that belong to no request).
 *
 * One gateway serves every request of one caller on one server, from any number of connections
 * and clients, so their JSON-RPC ids may collide (two clients of the same principal both send
 * id 1): each request gets an id of this transport's own on the way in and its own id back on
 * its answer. A response closed before its answer (the client went away) cancels its request.
 */
export class StatelessTransport implements Transport {
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  /** Requests in flight, by this transport's id: their response and the client's own id. */
  private readonly held = new Map<string, HeldResponse & { clientId: RequestId }>();
  private next = 0;
  private closed = false;

  /** Requests in flight. */
  get size(): number {
    return this.held.size;
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  /** Ends every response still held (their requests are cancelled by their closing), then tells the gateway. */
  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    for (const { res } of this.held.values()) res.end();
    this.held.clear();
    this.onclose?.();
    return Promise.resolve();
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const final = 'result' in message || 'error' in message;
    const id = final ? message.id : options?.relatedRequestId;
    const open = id === undefined ? undefined : this.held.get(String(id));
    // Nothing of a request that is no longer (or never was) held has anywhere to go.
    if (!open || id === undefined) return Promise.resolve();
    if (final) this.held.delete(String(id));
    writeAnswer(open, final ? { ...message, id: open.clientId } : message, undefined);
    return Promise.resolve();
  }

  /** Hands a client's request to the gateway; its answer goes to `res`. */
  answer(req: IncomingMessage, res: ServerResponse, request: JSONRPCRequest): void {
    const id = `stateless-${++this.next}`;
    this.held.set(id, { res, streaming: false, clientId: request.id });
    res.once('close', () => {
      if (!this.held.delete(id) || !this.onmessage) return;
      this.onmessage({
        jsonrpc: '2.0',
        method: NOTIFICATION.cancelled,
        params: { requestId: id, reason: 'the client went away' },
      });
    });
    this.onmessage?.({ ...request, id }, { requestInfo: { headers: req.headers } });
  }
}
