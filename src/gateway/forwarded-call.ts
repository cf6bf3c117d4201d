import type { CallToolResult, ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';
import { errorResult, isObject } from '../mcp/json-rpc.js';
import { PendingRequests, type ForwardedRequest } from './pending-requests.js';

/** What a forwarded tool call keeps beyond any forwarded request, and the calls of a gateway. */

/** A `tools/call` forwarded to an upstream and not yet answered (`what`: its tool). */
export interface PendingCall extends ForwardedRequest {
  /** The call's audit record, when a guard admitted it. */
  auditId?: string;
  attempts: number;
  retriesLeft: number;
  /** A hint the call was seen to break while it ran (recorded with its outcome). */
  hintViolation?: string;
  /** Its answer read as a network failure its sandbox caused (recorded as a tool-error with this detail). */
  networkRefusal?: string;
  /** A 2026 client's call: what its envelope declares (its server's requests are asked as `input_required`). */
  capabilities?: ClientCapabilities;
  /** Its client's request was answered `input_required` with its server's question; the retry continues it. */
  parked?: boolean;
}

/** The trace id of a W3C `traceparent` in a request's `_meta` (`00-<trace id>-<span id>-<flags>`), if any. */
export function traceIdOf(meta: unknown): string | undefined {
  return traceOf(meta).traceId;
}

/** The trace id and the whole, valid `traceparent` of a request's `_meta`; empty without one. */
export function traceOf(meta: unknown): Readonly<{ traceId?: string; traceparent?: string }> {
  const parent = isObject(meta) ? meta.traceparent : undefined;
  if (typeof parent !== 'string') return NO_TRACE;
  const match = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(parent);
  return match && !/^0+$/.test(match[1]!) ? { traceId: match[1]!, traceparent: parent } : NO_TRACE;
}

/** A call without a trace (most): one object for all. */
const NO_TRACE: Readonly<{ traceId?: string; traceparent?: string }> = Object.freeze({});

/** The answer to a call whose sandbox died under it, quoting the server's last words. */
export function diedResult(call: PendingCall, serverName: string, detail?: string): CallToolResult {
  return errorResult(diedText(call, serverName, detail));
}

/** What a call whose sandbox died under it is told. */
export function diedText(call: PendingCall, serverName: string, detail?: string): string {
  const why = call.upstream.diagnostics();
  return (
    `sandbox ${call.sandbox} of ${serverName} died during the call to ${call.what}` +
    `${detail ? ` (${detail})` : ''}${why ? `; its last words:\n${why}` : ''}\nIt will be started again on the next call.`
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

/** The forwarded calls not yet answered, and those settled in the last minute. */
export class PendingCalls extends PendingRequests<PendingCall> {
  /** Settled calls of the last minute (at most `ENDED_KEPT`), oldest first. */
  private readonly ended: EndedCall[] = [];

  constructor(private readonly now: () => number = Date.now) {
    super();
  }

  override delete(call: PendingCall): boolean {
    if (!super.delete(call)) return false;
    const endedAt = this.now();
    this.ended.push({ sandbox: call.sandbox, tool: call.what, startedAt: call.startedAt, endedAt });
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
      .map((call) => ({ tool: call.what, startedAt: call.startedAt }));
    const ended = this.ended.filter((c) => c.sandbox === sandbox && c.startedAt <= to && c.endedAt >= from);
    return [...new Set([...ended, ...running].sort((a, b) => a.startedAt - b.startedAt).map((c) => c.tool))];
  }

  /** Marks every call in flight in a sandbox as having seen a hint violation; returns their tools. */
  markViolation(sandbox: string, violation: string): string[] {
    const calls = this.list().filter((call) => call.sandbox === sandbox);
    for (const call of calls) call.hintViolation = addViolation(call.hintViolation, violation);
    return calls.map((call) => call.what);
  }
}

/** A call's hint violations so far, with one more. */
export function addViolation(before: string | undefined, violation: string): string {
  return before ? `${before}; ${violation}` : violation;
}
