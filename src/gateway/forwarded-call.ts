import {
  ErrorCode,
  type CallToolResult,
  type JSONRPCMessage,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import type { AuditOutcomeReport } from '../audit/audit-record.js';
import type { SandboxActivity } from './sandbox-activity.js';
import type { Upstream } from './sandbox-pool.js';

/** The pieces of a forwarded call: its state while pending, and how its messages are read. */

/** A `tools/call` forwarded to an upstream and not yet answered. */
export interface PendingCall {
  clientId: RequestId;
  upstreamId: string;
  upstream: Upstream;
  /** The sandbox's count of calls in flight; the call leaves it when it is settled. */
  activity: SandboxActivity;
  sandbox: string;
  tool: string;
  /** The client's progress token; upstream the call carries its first upstream id instead (`progressKey`). */
  progressToken?: string | number;
  progressKey?: string;
  /** When it was admitted, in the process's order (the oldest call binds its server's requests). */
  seq: number;
  /** When it was forwarded (ms since the epoch): what the sandbox did from then on may be its doing. */
  startedAt: number;
  timer?: NodeJS.Timeout;
  /** The call's audit record, when a gatekeeper admitted it. */
  auditId?: string;
  params: Record<string, unknown>;
  attempts: number;
  retriesLeft: number;
  /** A hint the call was seen to break while it ran (recorded with its outcome). */
  hintViolation?: string;
}

export type JsonRpcObject = Record<string, unknown> & {
  id?: RequestId;
  method?: string;
  params?: Record<string, unknown>;
};

/** The id space of forwarded calls; the upstream SDK client's own ids are numbers. */
export const FORWARDED_ID_PREFIX = 'hintbox:';

let lastSequence = 0;
/** The next number of the process's order of requests (which of several in flight is the oldest). */
export function nextSequence(): number {
  return ++lastSequence;
}

/**
 * A request's params as sent upstream: the client's progress token replaced by one of hintbox's
 * (`key`), so that the tokens of the clients that share a sandbox never meet there.
 */
export function withProgressKey(params: Record<string, unknown>, key: string | undefined): Record<string, unknown> {
  if (key === undefined || !isObject(params._meta)) return params;
  return { ...params, _meta: { ...params._meta, progressToken: key } };
}

/** A progress notification as the client gets it: with its own token again. */
export function progressFor(notification: JSONRPCMessage, token: string | number): JSONRPCMessage {
  const n = notification as { params?: Record<string, unknown> };
  return { ...notification, params: { ...n.params, progressToken: token } };
}

/** The trace id of a W3C `traceparent` in a request's `_meta` (`00-<trace id>-<span id>-<flags>`), if any. */
export function traceIdOf(meta: unknown): string | undefined {
  const parent = isObject(meta) ? meta.traceparent : undefined;
  if (typeof parent !== 'string') return undefined;
  const match = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(parent);
  return match && !/^0+$/.test(match[1]!) ? match[1] : undefined;
}

/** The audit outcome of an upstream's answer (as {@link answerOf} passes it on). */
export function outcomeOf(message: JsonRpcObject): AuditOutcomeReport {
  const answer = answerOf(message, 0) as { result?: Record<string, unknown>; error?: { message: string } };
  if (answer.error) return { outcome: 'error', detail: answer.error.message };
  return { outcome: answer.result?.isError === true ? 'tool-error' : 'ok' };
}

/**
 * A server's answer as the client gets it, under the client's id: its `result` (an object), or
 * its `error` (code, message, data); nothing else of what the server wrote — another member
 * could make the client read the message as something else. An answer with neither is an error.
 */
export function answerOf(message: JsonRpcObject, id: RequestId): JSONRPCMessage {
  const error = message.error;
  if (isObject(error)) {
    return {
      jsonrpc: '2.0',
      id,
      error: {
        // An integer, as JSON-RPC says, and a safe one (a client's schema refuses another, and its request hangs).
        code: Number.isSafeInteger(error.code) ? (error.code as number) : ErrorCode.InternalError,
        message: typeof error.message === 'string' ? error.message : 'error',
        ...(error.data !== undefined ? { data: error.data } : {}),
      },
    };
  }
  if (isObject(message.result)) return { jsonrpc: '2.0', id, result: message.result };
  const text = 'the server answered with neither a result nor an error';
  return { jsonrpc: '2.0', id, error: { code: ErrorCode.InternalError, message: text } };
}

/**
 * A server's notification as the client gets it: its method and params, nothing else. A
 * "notification" that carries an id is a request (the client would answer it, and its answer
 * would meet hintbox's own request of that id: a confirmation): undefined, as is one whose
 * params are not an object. Dropped then.
 */
export function notificationOf(message: JsonRpcObject): JSONRPCMessage | undefined {
  if (message.id !== undefined || typeof message.method !== 'string') return undefined;
  if (message.params !== undefined && !isObject(message.params)) return undefined;
  return { jsonrpc: '2.0', method: message.method, ...(message.params ? { params: message.params } : {}) };
}

/**
 * Whether a value is an id MCP allows for a request: a string or a (safe) integer (JSON-RPC's `null`,
 * a fraction, an object are not). A "request" under another id is no request: not forwarded
 * (its answer could not be told from another's), left to the SDK, which drops it.
 */
export function isRequestId(value: unknown): value is RequestId {
  return typeof value === 'string' || Number.isSafeInteger(value);
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function errorResult(text: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text }] };
}

/** Tells the sandbox a forwarded call (or read) is cancelled (its late answer is dropped). */
export function cancelUpstream(call: Pick<PendingCall, 'upstream' | 'upstreamId'>, reason?: string): void {
  void call.upstream.forwarded
    .send({
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId: call.upstreamId, ...(reason ? { reason } : {}) },
    })
    .catch(() => undefined);
}

/** The answer to a call whose sandbox died under it, quoting the server's last words. */
export function diedResult(call: PendingCall, serverName: string, detail?: string): CallToolResult {
  const why = call.upstream.diagnostics();
  return errorResult(
    `sandbox ${call.sandbox} of ${serverName} died during the call to ${call.tool}` +
      `${detail ? ` (${detail})` : ''}${why ? `; its last words:\n${why}` : ''}\nIt will be started again on the next call.`,
  );
}

/** A call that was settled lately: what a sandbox did in its time may still be reported after it. */
interface EndedCall {
  sandbox: string;
  tool: string;
  startedAt: number;
  endedAt: number;
}

/** How long, and how many, settled calls are kept for `toolsDuring`. */
const ENDED_KEPT_MS = 60_000;
const ENDED_KEPT = 256;

/** The forwarded calls not yet answered, by hintbox's upstream id and by the client's id. */
export class PendingCalls {
  private readonly byUpstreamId = new Map<string, PendingCall>();
  private readonly byClientId = new Map<RequestId, PendingCall>();
  /** Settled calls of the last minute (at most `ENDED_KEPT`), oldest first. */
  private readonly ended: EndedCall[] = [];

  constructor(private readonly now: () => number = Date.now) {}

  add(call: PendingCall): void {
    this.byUpstreamId.set(call.upstreamId, call);
    this.byClientId.set(call.clientId, call);
  }

  /** Sent again under a new id (a retry): the old id's late answer is dropped. */
  rekey(call: PendingCall, upstreamId: string): void {
    this.byUpstreamId.delete(call.upstreamId);
    call.upstreamId = upstreamId;
    this.byUpstreamId.set(upstreamId, call);
  }

  /** False when it was not pending (answered once already). */
  delete(call: PendingCall): boolean {
    if (!this.byUpstreamId.delete(call.upstreamId)) return false;
    // A client that reused the id of a call in flight: the newer call keeps it.
    if (this.byClientId.get(call.clientId) === call) this.byClientId.delete(call.clientId);
    const endedAt = this.now();
    this.ended.push({ sandbox: call.sandbox, tool: call.tool, startedAt: call.startedAt, endedAt });
    while (this.ended.length > ENDED_KEPT || (this.ended[0] && this.ended[0].endedAt < endedAt - ENDED_KEPT_MS)) {
      this.ended.shift();
    }
    return true;
  }

  /**
   * The tools of the calls in a sandbox whose time overlaps `[from, to]` (ms since the epoch),
   * oldest first, each tool once: those still in flight that started by `to`, and those settled
   * in the last minute that ended at `from` or later. What a sandbox reports late (a proxy's log
   * line written after the call was answered) still finds the call that was running.
   */
  toolsDuring(sandbox: string, from: number, to: number): string[] {
    const running = this.list()
      .filter((call) => call.sandbox === sandbox && call.startedAt <= to)
      .map((call) => ({ tool: call.tool, startedAt: call.startedAt }));
    const ended = this.ended.filter((c) => c.sandbox === sandbox && c.startedAt <= to && c.endedAt >= from);
    return [...new Set([...ended, ...running].sort((a, b) => a.startedAt - b.startedAt).map((c) => c.tool))];
  }

  has(call: PendingCall): boolean {
    return this.byUpstreamId.get(call.upstreamId) === call;
  }

  get(upstreamId: string): PendingCall | undefined {
    return this.byUpstreamId.get(upstreamId);
  }

  ofClient(clientId: RequestId): PendingCall | undefined {
    return this.byClientId.get(clientId);
  }

  /** Marks every call in flight in a sandbox as having seen a hint violation; returns their tools. */
  markViolation(sandbox: string, violation: string): string[] {
    const calls = this.list().filter((call) => call.sandbox === sandbox);
    for (const call of calls)
      call.hintViolation = call.hintViolation ? `${call.hintViolation}; ${violation}` : violation;
    return calls.map((call) => call.tool);
  }

  /** Every call, or those in one upstream, oldest first. */
  list(upstream?: Upstream): PendingCall[] {
    const calls = [...this.byUpstreamId.values()];
    return (upstream ? calls.filter((call) => call.upstream === upstream) : calls).sort((a, b) => a.seq - b.seq);
  }
}
