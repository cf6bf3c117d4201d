import type { IncomingMessage, ServerResponse } from 'node:http';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import {
  isJSONRPCRequest,
  SUPPORTED_PROTOCOL_VERSIONS,
  type JSONRPCMessage,
  type JSONRPCRequest,
  type MessageExtraInfo,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';

/**
 * A client's MCP session over streamable HTTP that answers a request with plain JSON when
 * nothing came before its result, and with a server-sent-events stream as soon as something
 * does — decided per request, by what happens, not guessed in advance.
 *
 * The SDK's transport answers every request of a session one way: as a stream (what lets a
 * confirmation, a server's request or progress reach the client within the call), or, with
 * `enableJsonResponse`, as JSON — and then drops everything sent before the result (a
 * confirmation asked in that mode never reaches the client). Here a well-formed request of an
 * open session (one message, not `initialize`, the headers the SDK requires) is taken
 * directly: its response is held open, and the first message for it decides. The result first:
 * one JSON body (`application/json`). Anything else first (hintbox's confirmation, a server's
 * elicitation or sampling, progress, a log line): the response becomes `text/event-stream`,
 * that message its first event, the result its last. Every other request — initialize, a batch,
 * a GET stream, a DELETE, anything the SDK would refuse — goes to the SDK's transport, which
 * also carries every message not tied to a request taken here. Both share the session: one
 * `onmessage`, one `onclose`.
 *
 * Composed, not patched: the session is connected to this transport, which owns the SDK's.
 */
export class JsonAnswerTransport implements Transport {
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  /** Requests taken here whose response is still open, by JSON-RPC id. */
  private readonly direct = new Map<RequestId, HeldResponse>();

  constructor(private readonly sdk: StreamableHTTPServerTransport) {
    sdk.onmessage = (message, extra) => this.onmessage?.(message, extra);
    sdk.onclose = () => this.onclose?.();
    sdk.onerror = (error) => this.onerror?.(error);
  }

  get sessionId(): string | undefined {
    return this.sdk.sessionId;
  }

  start(): Promise<void> {
    return this.sdk.start();
  }

  /** Closes the SDK's side and ends every response still open here (their requests are cancelled by their closing). */
  async close(): Promise<void> {
    for (const { res } of this.direct.values()) res.end();
    this.direct.clear();
    await this.sdk.close();
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const id = 'result' in message || 'error' in message ? message.id : options?.relatedRequestId;
    const open = id === undefined ? undefined : this.direct.get(id);
    if (!open || id === undefined) return this.sdk.send(message, options);
    if ('result' in message || 'error' in message) this.direct.delete(id);
    writeAnswer(open, message, this.sdk.sessionId);
    return Promise.resolve();
  }

  /**
   * Answers a request if it is one taken here (see the class); false when the SDK's transport
   * is to handle it (`handleRequest`). `body` is the request's parsed JSON.
   */
  answer(req: IncomingMessage, res: ServerResponse, body: unknown): boolean {
    const request = takenRequest(req, body, this.sdk.sessionId);
    // An id already open here stays with its first request: the second goes the SDK's way.
    if (!request || this.direct.has(request.id) || !this.onmessage) return false;
    this.direct.set(request.id, { res, streaming: false });
    res.once('close', () => {
      if (this.direct.get(request.id)?.res === res) this.direct.delete(request.id);
    });
    this.onmessage(request, { requestInfo: { headers: req.headers } });
    return true;
  }

  /** Hands a request to the SDK's transport. */
  handleRequest(req: IncomingMessage, res: ServerResponse, body?: unknown): Promise<void> {
    return this.sdk.handleRequest(req, res, body);
  }
}

/** A request's response held open until its answer: plain JSON while nothing came before the result. */
export interface HeldResponse {
  res: ServerResponse;
  /** Whether it became an event stream (something came before the result). */
  streaming: boolean;
}

/**
 * Writes one message for a held request onto its response: its result alone as one JSON body;
 * anything before it turns the response into `text/event-stream`, the result its last event.
 * `sessionId`: the MCP session's, sent back in `mcp-session-id` (none for a 2026 request).
 */
export function writeAnswer(open: HeldResponse, message: JSONRPCMessage, sessionId: string | undefined): void {
  const { res } = open;
  const final = 'result' in message || 'error' in message;
  if (res.destroyed || res.writableEnded) return;
  if (final && !open.streaming) {
    // With its length: one write of headers and body (a string body is written with the head
    // as one string), no chunked framing for either side to add or parse. The headers as one
    // flat list: no header object built and copied per answer.
    const body = JSON.stringify(message);
    const head = ['Content-Type', 'application/json', 'Content-Length', String(Buffer.byteLength(body))];
    if (sessionId) head.push('mcp-session-id', sessionId);
    res.writeHead(200, head).end(body);
    return;
  }
  if (!open.streaming) {
    open.streaming = true;
    const head = [
      'Content-Type',
      'text/event-stream',
      'Cache-Control',
      'no-cache, no-transform',
      'X-Accel-Buffering',
      'no',
    ];
    if (sessionId) head.push('mcp-session-id', sessionId);
    res.writeHead(200, head);
    res.flushHeaders();
  }
  res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
  if (final) res.end();
}

/**
 * The request of a POST that can be taken without the SDK's transport: one JSON-RPC request
 * (not `initialize`) of the open session `sessionId`, with the `Accept`, `Content-Type` and
 * `MCP-Protocol-Version` the SDK would accept. Anything else is the SDK's to answer (or refuse).
 */
export function takenRequest(
  req: IncomingMessage,
  body: unknown,
  sessionId: string | undefined,
): JSONRPCRequest | undefined {
  if (req.method !== 'POST' || sessionId === undefined || req.headers['mcp-session-id'] !== sessionId) return undefined;
  const accept = req.headers.accept ?? '';
  if (!accept.includes('application/json') || !accept.includes('text/event-stream')) return undefined;
  if (!isJsonContentType(req.headers['content-type'] ?? null)) return undefined;
  const version = req.headers['mcp-protocol-version'];
  if (version !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(String(version))) return undefined;
  // The SDK's own check of a request (strict: no other keys), so nothing is taken here that it
  // would refuse; a call's plain shape is known valid without it (its zod parse was ~30 µs a call).
  if (!(plainRequest(body) || isJSONRPCRequest(body)) || body.method === 'initialize') return undefined;
  return body;
}

const REQUEST_KEYS = new Set(['jsonrpc', 'id', 'method', 'params']);

/**
 * True only for a request the SDK's `isJSONRPCRequest` accepts: JSON's plain objects, only its
 * four keys, `jsonrpc` 2.0, a string or safe-integer id, a string method, params absent or a
 * plain object without `_meta`. False is "not known here": the SDK's check decides (a `_meta`,
 * whose fields the SDK checks, goes there too). `json-answer-transport.test.ts` holds the two
 * side by side over generated messages.
 */
export function plainRequest(body: unknown): body is JSONRPCRequest {
  if (!plainObject(body) || body.jsonrpc !== '2.0' || typeof body.method !== 'string') return false;
  for (const key of Object.keys(body)) if (!REQUEST_KEYS.has(key)) return false;
  const { id, params } = body;
  if (typeof id !== 'string' && !Number.isSafeInteger(id)) return false;
  return params === undefined ? !('params' in body) : plainObject(params) && !Object.hasOwn(params, '_meta');
}

function plainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype;
}
