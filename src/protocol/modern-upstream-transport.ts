import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, type JSONRPCMessage, type RequestId } from '@modelcontextprotocol/sdk/types.js';
import { isObject, isRequestId, type JsonRpcObject } from '../mcp/json-rpc.js';
import { METHOD, NOTIFICATION } from '../mcp/methods.js';
import {
  PROBE_ID,
  discoverRequest,
  discoveredServer,
  envelopeOf,
  initializeAnswer,
  inputRequiredOf,
  legacyResult,
  retryParams,
  withEnvelope,
  type DiscoveredServer,
  type InputRequired,
  type UpstreamEra,
  type UpstreamIdentity,
} from './upstream-era.js';

/**
 * How long a server may take to answer `server/discover` before it is taken for a 2025 server
 * and sent `initialize`: at most this, and at most half of the start's bound (`timeouts.start`),
 * so that `initialize` keeps the other half. A 2025 server answers at once (method not found);
 * one that answers nothing cannot hold the start longer than `timeouts.start` in all.
 */
export const PROBE_TIMEOUT_MS = 5_000;

/** The rounds of `input_required` one request may take (a server that never stops asking is refused). */
export const MAX_INPUT_ROUNDS = 16;

/** The ids of the questions hintbox passes on for a 2026 server (strings the server's own requests cannot take while one is open). */
const QUESTION_ID = 'hintbox-input-';

/** A request of hintbox's to a 2026 server not answered yet: kept to be retried after `input_required`. */
interface Pending {
  method: string;
  params: Record<string, unknown>;
  rounds: number;
  /** The round in progress: what the server asked, the answers so far, the questions still open. */
  round?: { asked: InputRequired; responses: Record<string, unknown>; open: Set<string> };
}

/**
 * hintbox's side of a sandboxed server's stdio, in the server's era (composed under the
 * `SplitTransport` the SDK client and the relays share, so both speak 2025 above it).
 *
 * `open` probes the server with `server/discover`. A 2025 server (an error, or no answer within
 * `PROBE_TIMEOUT_MS`) gets every message unchanged. For a 2026 server this layer:
 * - answers the SDK client's `initialize` from the discover answer (a 2026 server has none),
 *   `ping` and `logging/setLevel` (the level then rides in the envelope), and drops
 *   `notifications/initialized`;
 * - gives every request hintbox's envelope (version, hintbox's info and capabilities);
 * - takes `resultType`, the cache fields and the server's info off every result;
 * - turns an `input_required` into the server's requests of a 2025 server (`elicitation/create`,
 *   `sampling/createMessage`, `roots/list`), which go through the same policy, audit and client
 *   as a 2025 server's; once every one is answered, the request is sent again under its id with
 *   the answers and the server's `requestState` untouched. An answer that is an error (the
 *   client cannot be asked, the policy refuses) fails the request with an error saying so.
 */
export class ModernUpstreamTransport implements Transport {
  onmessage?: Transport['onmessage'];
  onclose?: Transport['onclose'];
  onerror?: Transport['onerror'];

  private started?: Promise<void>;
  private server?: DiscoveredServer;
  private logLevel?: string;
  private questionCount = 0;
  private readonly pending = new Map<RequestId, Pending>();
  /** Open questions, by the id hintbox gave them: the request they belong to and their key. */
  private readonly questions = new Map<string, { request: RequestId; key: string }>();
  private probe?: (message: JsonRpcObject | undefined) => void;

  private constructor(
    private readonly base: Transport,
    private readonly identity: UpstreamIdentity,
  ) {
    base.onmessage = (message, extra) => {
      const raw = message as JsonRpcObject;
      if (raw.id === PROBE_ID && !('method' in raw)) {
        this.probe?.(raw);
        return;
      }
      const up = this.server ? this.fromModern(raw) : message;
      if (up) this.onmessage?.(up, extra);
    };
    base.onclose = () => {
      // A server gone during the probe is no 2026 server; `initialize` then says it is gone.
      this.probe?.(undefined);
      this.pending.clear();
      this.questions.clear();
      this.onclose?.();
    };
    base.onerror = (error) => this.onerror?.(error);
  }

  /**
   * Starts `base`, probes the server and returns the transport in its era. Never longer than
   * `min(PROBE_TIMEOUT_MS, startTimeoutMs / 2)`; a closed connection or a send that fails ends the probe
   * as a 2025 server (`initialize` then says what is wrong).
   */
  static async open(
    base: Transport,
    identity: UpstreamIdentity,
    startTimeoutMs: number,
  ): Promise<{ transport: ModernUpstreamTransport; era: UpstreamEra }> {
    const transport = new ModernUpstreamTransport(base, identity);
    await transport.start();
    let timer: NodeJS.Timeout | undefined;
    const answer = await new Promise<JsonRpcObject | undefined>((resolve) => {
      transport.probe = resolve;
      timer = setTimeout(() => resolve(undefined), Math.min(PROBE_TIMEOUT_MS, startTimeoutMs / 2));
      base.send(discoverRequest(identity) as JSONRPCMessage).catch(() => resolve(undefined));
    });
    clearTimeout(timer);
    // A late answer to the probe is dropped (by its id) from here on.
    transport.probe = undefined;
    transport.server = discoveredServer(answer);
    return { transport, era: transport.server ? '2026' : '2025' };
  }

  start(): Promise<void> {
    // Started once by `open`; the SDK client starts it again when it connects.
    this.started ??= this.base.start();
    return this.started;
  }

  close(): Promise<void> {
    return this.base.close();
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    if (!this.server) return this.base.send(message, options);
    const raw = message as JsonRpcObject;
    if (typeof raw.method === 'string') return this.sendModern(raw, options);
    // An answer of hintbox's: to one of the questions this layer passed on, or to a request of
    // the server's own (a 2026 server makes none; what it gets back is its business).
    if (typeof raw.id === 'string' && this.questions.has(raw.id)) {
      this.answered(raw.id, raw);
      return Promise.resolve();
    }
    return this.base.send(message, options);
  }

  private sendModern(raw: JsonRpcObject, options?: TransportSendOptions): Promise<void> {
    const { id, method } = raw;
    if (id === undefined) {
      if (method === 'notifications/initialized') return Promise.resolve();
      if (method === NOTIFICATION.cancelled && isObject(raw.params) && isRequestId(raw.params.requestId)) {
        // The request is over for hintbox: its open questions are dropped (the relay withdraws them from the client).
        this.forget(raw.params.requestId);
      }
      return this.base.send(raw as JSONRPCMessage, options);
    }
    if (method === 'initialize') {
      const params = isObject(raw.params) ? raw.params : {};
      return this.answerHere(id, initializeAnswer(params.protocolVersion, this.server as DiscoveredServer));
    }
    if (method === 'ping') return this.answerHere(id, {});
    if (method === METHOD.setLevel) {
      const level = isObject(raw.params) ? raw.params.level : undefined;
      if (typeof level === 'string') this.logLevel = level;
      return this.answerHere(id, {});
    }
    const params = withEnvelope(raw.params, envelopeOf(this.identity, this.logLevel));
    this.pending.set(id, { method: method as string, params, rounds: 0 });
    return this.base.send({ jsonrpc: '2.0', id, method: method as string, params }, options);
  }

  /** What of a 2026 server's message goes up, in 2025 terms; undefined when it stays here. */
  private fromModern(raw: JsonRpcObject): JSONRPCMessage | undefined {
    if (typeof raw.method === 'string') {
      // A request of the server's own under the id of an open question would take its answer.
      if (typeof raw.id === 'string' && raw.id.startsWith(QUESTION_ID)) return undefined;
      return raw as JSONRPCMessage;
    }
    if (!isRequestId(raw.id)) return raw as JSONRPCMessage;
    const pending = this.pending.get(raw.id);
    if (!pending) return raw as JSONRPCMessage;
    const asked = isObject(raw.result) ? inputRequiredOf(raw.result) : undefined;
    if (asked) {
      this.ask(raw.id, pending, asked);
      return undefined;
    }
    this.pending.delete(raw.id);
    if (!isObject(raw.result)) return raw as JSONRPCMessage;
    return { jsonrpc: '2.0', id: raw.id, result: legacyResult(raw.result) };
  }

  /** Passes a round's questions up as the server's requests; a round without any is retried at once. */
  private ask(request: RequestId, pending: Pending, asked: InputRequired): void {
    // The questions go up as the server's own requests, which the gateway binds to the call in
    // flight in this sandbox: they can be bound to the request that was asked only when that
    // request is a tool call and the only one at the server. Otherwise (a read's, a listing's, one
    // of several calls, possibly other clients') the request fails: asked elsewhere, another
    // caller would answer it.
    if (pending.method !== METHOD.toolsCall) {
      this.fail(
        request,
        `the server asked for input (input_required) in answer to ${pending.method}: only a tool call's questions are passed on`,
      );
      return;
    }
    if ([...this.pending].some(([id, other]) => id !== request && other.method === METHOD.toolsCall)) {
      this.fail(
        request,
        'the server asked for input (input_required) while other tool calls run in its sandbox: the question could not be bound to its call',
      );
      return;
    }
    if (++pending.rounds > MAX_INPUT_ROUNDS) {
      this.fail(
        request,
        `the server asked for input (input_required) more than ${MAX_INPUT_ROUNDS} times in one request`,
      );
      return;
    }
    const round = { asked, responses: {}, open: new Set<string>() };
    pending.round = round;
    const messages: JSONRPCMessage[] = [];
    for (const question of asked.requests) {
      const id = `${QUESTION_ID}${++this.questionCount}`;
      this.questions.set(id, { request, key: question.key });
      round.open.add(id);
      messages.push({ jsonrpc: '2.0', id, method: question.method, params: question.params });
    }
    if (messages.length === 0) {
      this.retry(request, pending);
      return;
    }
    for (const message of messages) this.onmessage?.(message);
  }

  /** hintbox's answer to one question: kept, or (an error) the end of the request. */
  private answered(id: string, answer: JsonRpcObject): void {
    const question = this.questions.get(id);
    this.questions.delete(id);
    const pending = question ? this.pending.get(question.request) : undefined;
    if (!question || !pending?.round?.open.has(id)) return;
    if (!isObject(answer.result)) {
      const why =
        isObject(answer.error) && typeof answer.error.message === 'string' ? answer.error.message : 'no answer';
      this.fail(question.request, `the server asked for input (input_required) that could not be given: ${why}`);
      return;
    }
    pending.round.responses[question.key] = answer.result;
    pending.round.open.delete(id);
    if (pending.round.open.size === 0) this.retry(question.request, pending);
  }

  /** Sends the request again under its id, with the round's answers and the server's state. */
  private retry(request: RequestId, pending: Pending): void {
    const round = pending.round;
    if (!round) return;
    pending.round = undefined;
    const params = retryParams(pending.params, round.asked, round.responses);
    this.base.send({ jsonrpc: '2.0', id: request, method: pending.method, params }).catch((error: Error) => {
      this.forget(request);
      this.onmessage?.({
        jsonrpc: '2.0',
        id: request,
        error: { code: ErrorCode.ConnectionClosed, message: error.message },
      });
    });
  }

  /** Ends a request with an error of hintbox's (the server is not told: a 2026 server keeps nothing between rounds). */
  private fail(request: RequestId, message: string): void {
    this.forget(request);
    this.onmessage?.({ jsonrpc: '2.0', id: request, error: { code: ErrorCode.InvalidRequest, message } });
  }

  private forget(request: RequestId): void {
    const pending = this.pending.get(request);
    this.pending.delete(request);
    for (const id of pending?.round?.open ?? []) this.questions.delete(id);
  }

  private answerHere(id: RequestId, result: Record<string, unknown>): Promise<void> {
    // Answered on a later turn, as a server's answer would be.
    queueMicrotask(() => this.onmessage?.({ jsonrpc: '2.0', id, result }));
    return Promise.resolve();
  }
}
