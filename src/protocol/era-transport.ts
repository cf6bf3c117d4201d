import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import { isObject, isRequestId } from '../mcp/json-rpc.js';
import { NOTIFICATION } from '../mcp/methods.js';
import { DISCOVER_METHOD, discoverResult, isModernRequest, stampResult, type DiscoverAnswer } from './protocol-era.js';

/**
 * The client's transport as both eras need it, composed over the real one (stdio, HTTP): a
 * 2026 client's `server/discover` is answered here, and every answer to one of its requests
 * gets the `resultType` (and, for lists, the cache fields) its era requires. Everything else passes unchanged, so a 2025 client
 * sees the very bytes it saw before this layer existed. What a 2026 request means beyond that
 * (approvals as `input_required`) is decided by the call relay, which reads the era from the
 * request's own envelope.
 */
export class EraTransport implements Transport {
  onmessage?: Transport['onmessage'];
  onclose?: Transport['onclose'];
  onerror?: Transport['onerror'];

  /** The 2026 requests not answered (nor cancelled) yet, by id, with their method: their answers are stamped. */
  private readonly modern = new Map<RequestId, string>();

  constructor(
    private readonly base: Transport,
    private readonly discover: () => DiscoverAnswer,
  ) {
    base.onmessage = (message, extra) => {
      if (this.answeredHere(message)) return;
      this.onmessage?.(message, extra);
    };
    base.onclose = () => this.onclose?.();
    base.onerror = (error) => this.onerror?.(error);
  }

  get sessionId(): string | undefined {
    return this.base.sessionId;
  }

  start(): Promise<void> {
    return this.base.start();
  }

  close(): Promise<void> {
    return this.base.close();
  }

  setProtocolVersion(version: string): void {
    this.base.setProtocolVersion?.(version);
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const m = message as Record<string, unknown>;
    const method = m.method === undefined && isRequestId(m.id) ? this.modern.get(m.id) : undefined;
    if (method === undefined) return this.base.send(message, options);
    this.modern.delete(m.id as RequestId);
    if (!isObject(m.result)) return this.base.send(message, options);
    return this.base.send({ ...message, result: stampResult(method, m.result) } as JSONRPCMessage, options);
  }

  /** `server/discover` is hintbox's to answer; a 2026 request is remembered so its answer is stamped. */
  private answeredHere(message: JSONRPCMessage): boolean {
    const m = message as Record<string, unknown>;
    // A cancelled request is never answered: forget it, or the map would only grow.
    if (m.method === NOTIFICATION.cancelled && isObject(m.params) && isRequestId(m.params.requestId)) {
      this.modern.delete(m.params.requestId);
    }
    if (typeof m.method !== 'string' || !isRequestId(m.id)) return false;
    if (m.method === DISCOVER_METHOD) {
      const answer = { jsonrpc: '2.0' as const, id: m.id, result: discoverResult(this.discover()) };
      this.base.send(answer as JSONRPCMessage).catch((error: Error) => this.onerror?.(error));
      return true;
    }
    if (isModernRequest(m.params)) this.modern.set(m.id, m.method);
    return false;
  }
}
