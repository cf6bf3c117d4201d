import {
  ErrorCode,
  type ClientCapabilities,
  type JSONRPCMessage,
  type RequestId,
  type Root,
} from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../util/logger.js';
import type { JsonRpcObject } from '../mcp/json-rpc.js';
import type { Upstream } from './sandbox-pool.js';
import {
  markedElicitation,
  refusalOf,
  sampledParams,
  type ClientPeer,
  type InFlight,
  type RequestAuditEvent,
  type ServerRequestMethod,
  type ServerRequestPolicy,
} from './server-requests.js';
import { METHOD } from '../mcp/methods.js';

/** What answering the servers' requests needs. */
export interface ServerRequestContext {
  serverName: string;
  /** What the server may ask now (it narrows when the server loses trust). */
  policy(): ServerRequestPolicy;
  peer: ClientPeer;
  roots(): Root[];
  timeoutMs: number;
  log: Logger;
  record(event: RequestAuditEvent): void;
}

/**
 * A tool call may have its server ask the client this many times (one after another; 4 at once at
 * most): more is a flood of questions (or of the audit lines each one makes) and is refused.
 */
export const MAX_REQUESTS_PER_CALL = 16;

/**
 * A sandbox's refused requests are recorded (and logged) at most once per this many ms; the
 * others are counted into the next line, which is written at the end of the interval if no
 * refusal comes to carry it (so no refusal goes unrecorded).
 */
export const REFUSAL_LINE_INTERVAL_MS = 1000;

/** A sandbox's refusal lines: when the last was written, how many were counted since, the pending write of that count. */
interface RefusalLines {
  last: number;
  unrecorded: number;
  flush?: NodeJS.Timeout;
  /** The latest of the counted refusals, named in the line of their own. */
  latest?: { method: ServerRequestMethod; bound: InFlight | undefined; reason: string };
}

/**
 * The requests the servers make of the client, as they are answered: refused (recorded, logged
 * — a flood of them at most once a second per sandbox, counted), answered by hintbox
 * (`roots/list`: the sandbox's folders), or passed to the client as part of the tool call they
 * are bound to — an elicitation marked as the server's, a sampling request without other
 * servers' context — and the client's answer passed back. A request passed on is recorded
 * before, and again once answered; it is withdrawn from the client when its call ends or the
 * server cancels it.
 */
export class ServerRequestBroker {
  /** Each upstream's requests waiting for the client, by the server's id. */
  private readonly waiting = new WeakMap<Upstream, Map<RequestId, AbortController>>();
  /** The same, by the pending call they are bound to (its number: a 2026 retry continues it under another id). */
  private readonly byCall = new Map<number, Set<AbortController>>();
  /** Every request waiting for the client, and what it asks (to withdraw what a narrower policy refuses). */
  private readonly asked = new Map<AbortController, { method: ServerRequestMethod; url: boolean }>();
  /**
   * Requests passed to the client per pending call (its number), while it runs: a call may ask
   * only so many, across all the `input_required` rounds of a 2026 client (each a new request).
   */
  private readonly passedPerCall = new Map<number, number>();
  private readonly refusals = new WeakMap<Upstream, RefusalLines>();
  private readonly rootsAnswered = new WeakSet<Upstream>();
  private nextRef = 1;

  constructor(private readonly context: ServerRequestContext) {}

  /** A request of a sandbox's server; `bound`: the tool call in flight there it belongs to (the oldest). */
  take(
    sandbox: string,
    upstream: Upstream,
    method: ServerRequestMethod,
    request: JsonRpcObject,
    bound?: InFlight,
  ): void {
    void this.answer(sandbox, upstream, method, request, bound).catch((error: Error) =>
      this.context.log.error(`${method} of sandbox ${sandbox} failed in hintbox: ${error.message}`),
    );
  }

  /** The server cancelled a request of its own: withdrawn from the client. False when it is not one waiting. */
  cancelledByServer(upstream: Upstream, requestId: unknown): boolean {
    const controller = this.waiting.get(upstream)?.get(requestId as RequestId);
    controller?.abort(new Error('the server cancelled its request'));
    return controller !== undefined;
  }

  /** A tool call ended (its number): its server's requests still waiting for the client are withdrawn. */
  callEnded(call: number): void {
    this.passedPerCall.delete(call);
    for (const controller of this.byCall.get(call) ?? []) controller.abort(new Error('its tool call ended'));
  }

  /** How many calls' requests are counted now (each call's count is forgotten when it ends). */
  get countedCalls(): number {
    return this.passedPerCall.size;
  }

  /** The policy narrowed (the server lost trust): what it no longer allows is withdrawn from the client. */
  withdrawRefused(): void {
    const policy = this.context.policy();
    for (const [controller, { method, url }] of this.asked) {
      const allowed =
        method === METHOD.createMessage ? policy.sampling : policy.elicitation && (!url || policy.urlElicitation);
      if (!allowed) controller.abort(new Error('the server lost trust'));
    }
  }

  private async answer(
    sandbox: string,
    upstream: Upstream,
    method: ServerRequestMethod,
    request: JsonRpcObject,
    bound: InFlight | undefined,
  ): Promise<void> {
    const { context } = this;
    const id = request.id!;
    const reply = (message: Record<string, unknown>): Promise<void> =>
      upstream.forwarded.send({ jsonrpc: '2.0', id, ...message } as JSONRPCMessage).catch(() => undefined);
    const waiting = this.waitingOf(upstream);
    const passed = bound ? (this.passedPerCall.get(bound.call) ?? 0) : 0;
    const refused = waiting.has(id)
      ? 'its id is one of its requests still waiting'
      : passed >= MAX_REQUESTS_PER_CALL && method !== METHOD.listRoots
        ? `a tool call may ask the client ${MAX_REQUESTS_PER_CALL} times at most`
        : (refusalOf(
            method,
            request.params,
            context.policy(),
            capabilitiesOf(bound, context.peer),
            !!bound,
            waiting.size,
          ) ?? (method === METHOD.listRoots ? undefined : bound?.modern?.refusal()));
    if (refused) {
      this.refuse(sandbox, upstream, method, bound, refused);
      return reply({ error: { code: ErrorCode.InvalidRequest, message: `hintbox refused ${method}: ${refused}` } });
    }
    // The sandbox's folders, never the client's host paths; nothing of the client's: recorded
    // once per sandbox start (a server may ask as often as it likes).
    if (method === METHOD.listRoots) {
      if (!this.rootsAnswered.has(upstream)) {
        this.rootsAnswered.add(upstream);
        const ref = `${sandbox}#${this.nextRef++}`;
        const boundTo = bound?.what ?? null;
        context.record({
          type: 'server.request',
          ref,
          sandbox,
          method,
          boundTo,
          decision: 'answered-by-hintbox',
          reason: null,
        });
      }
      return reply({ result: { roots: context.roots() } });
    }
    // Refused above (sampling and elicitation are bound to a call); answered all the same.
    if (!bound) return reply({ error: { code: ErrorCode.InvalidRequest, message: `hintbox refused ${method}` } });
    const params = request.params as Record<string, unknown>;
    this.passedPerCall.set(bound.call, passed + 1);
    const ref = `${sandbox}#${this.nextRef++}`;
    context.record({
      type: 'server.request',
      ref,
      sandbox,
      method,
      boundTo: bound.what,
      decision: 'passed',
      reason: null,
    });
    const controller = new AbortController();
    waiting.set(id, controller);
    this.asked.set(controller, { method, url: params.mode === 'url' });
    const ofCall = this.byCall.get(bound.call) ?? new Set<AbortController>();
    this.byCall.set(bound.call, ofCall.add(controller));
    const answered = (outcome: 'ok' | 'error', detail: string | null): void =>
      context.record({ type: 'server.request.answered', ref, sandbox, method, outcome, detail });
    try {
      const sent = method === METHOD.elicit ? markedElicitation(context.serverName, params) : sampledParams(params);
      const options = { timeoutMs: context.timeoutMs, signal: controller.signal };
      const result = bound.modern
        ? await bound.modern.ask(method, sent, options)
        : await context.peer.request(method, sent, { ...options, relatedRequestId: bound.clientId });
      // An elicitation's answer says what the person did (accept, decline, cancel); never its content.
      answered('ok', typeof result.action === 'string' ? result.action : null);
      await reply({ result });
    } catch (error) {
      const why = controller.signal.aborted ? (controller.signal.reason as Error) : (error as Error);
      answered('error', why.message);
      // A request the server cancelled gets no answer (MCP).
      if (why.message === 'the server cancelled its request') return;
      const code = (error as { code?: unknown }).code;
      await reply({ error: { code: typeof code === 'number' ? code : ErrorCode.InternalError, message: why.message } });
    } finally {
      this.asked.delete(controller);
      waiting.delete(id);
      ofCall.delete(controller);
      if (ofCall.size === 0) this.byCall.delete(bound.call);
    }
  }

  /** Records and logs a refusal; a sandbox's flood of them, at most once per interval, counted. */
  private refuse(
    sandbox: string,
    upstream: Upstream,
    method: ServerRequestMethod,
    bound: InFlight | undefined,
    reason: string,
  ): void {
    const state = this.refusals.get(upstream) ?? { last: -Infinity, unrecorded: 0 };
    this.refusals.set(upstream, state);
    const now = Date.now();
    if (now - state.last < REFUSAL_LINE_INTERVAL_MS) {
      state.unrecorded++;
      state.latest = { method, bound, reason };
      // The count is written with the next refusal, or at the end of the interval without one.
      state.flush ??= setTimeout(
        () => {
          state.flush = undefined;
          const latest = state.latest;
          if (state.unrecorded === 0 || !latest) return;
          const count = state.unrecorded;
          state.unrecorded = 0;
          state.last = Date.now();
          const why = `${count} more refused since the last line (the last: ${latest.reason})`;
          this.line(sandbox, latest.method, latest.bound, why);
        },
        state.last + REFUSAL_LINE_INTERVAL_MS - now,
      ).unref();
      return;
    }
    const more = state.unrecorded ? ` (and ${state.unrecorded} more refused since the last line)` : '';
    state.last = now;
    state.unrecorded = 0;
    if (state.flush) clearTimeout(state.flush);
    state.flush = undefined;
    this.line(sandbox, method, bound, reason + more);
  }

  /** One refusal line: an audit record and a warning. */
  private line(sandbox: string, method: ServerRequestMethod, bound: InFlight | undefined, reason: string): void {
    const ref = `${sandbox}#${this.nextRef++}`;
    const boundTo = bound?.what ?? null;
    this.context.record({ type: 'server.request', ref, sandbox, method, boundTo, decision: 'refused', reason });
    this.context.log.warn(`${this.context.serverName} (sandbox ${sandbox}) asked for ${method}: refused, ${reason}`);
  }

  private waitingOf(upstream: Upstream): Map<RequestId, AbortController> {
    let waiting = this.waiting.get(upstream);
    if (!waiting) this.waiting.set(upstream, (waiting = new Map<RequestId, AbortController>()));
    return waiting;
  }
}

/** What the client of `bound` declared: a 2026 call's envelope, else the connection's `initialize`. */
function capabilitiesOf(bound: InFlight | undefined, peer: ClientPeer): ClientCapabilities | undefined {
  return bound?.modern ? bound.modern.capabilities : peer.capabilities();
}
