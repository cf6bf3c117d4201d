import {
  ErrorCode,
  type CallToolResult,
  type JSONRPCMessage,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import type { AuditOutcomeReport } from '../audit/audit-record.js';
import type { Logger } from '../util/logger.js';
import type { CallGuard } from './call-guard.js';
import {
  answerOf,
  cancelUpstream,
  diedResult,
  errorResult,
  FORWARDED_ID_PREFIX,
  isObject,
  isRequestId,
  nextSequence,
  notificationOf,
  outcomeOf,
  progressFor,
  traceIdOf,
  type JsonRpcObject,
  PendingCalls,
  type PendingCall,
  withProgressKey,
} from './forwarded-call.js';
import type { SandboxPool, Upstream } from './sandbox-pool.js';
import { sendToClient, VerificationGate, type RelayClient, type Route } from './relay-client.js';

export type { RelayClient, Route } from './relay-client.js';
export { traceIdOf } from './forwarded-call.js';

/**
 * The call relay: each `tools/call` of a client is admitted (the gatekeeper: approval and the
 * audit intent), then forwarded as JSON-RPC to its sandbox under an id of hintbox's own, with
 * its params untouched but for its progress token (one of hintbox's upstream, so that clients
 * sharing a sandbox never share a token), and its result passed back (its result or error only) — without the SDK's validation of every message and result, several times per call.
 * Progress and cancellation pass through; a call's deadline is a hard ceiling (progress does not extend it); a sandbox
 * that dies answers its pending calls with an error result and is started again on the next
 * call. What goes to the client carries the request it belongs to (`relatedRequestId`).
 */

export interface CallRelayOptions {
  serverName: string;
  pool: SandboxPool;
  client: RelayClient;
  log: Logger;
  /**
   * Per-call ceiling in ms (each attempt), from the moment the call is forwarded. Progress does
   * not extend it: a server that reports progress forever would keep its sandbox thawed forever.
   */
  callTimeoutMs: number;
  /** The route of a tool now (routes change when the server's tools do). */
  routeOf(tool: string): Route | undefined;
  /** Approval and audit per call; without one every routed call is forwarded (tests of routing). */
  gatekeeper?: CallGuard;
  /** The deadline of the sandbox's only call in flight passed (before a retry too): e.g. cut its database sessions. */
  onDeadline?: (sandbox: string, tool: string) => void;
  /** The start of every id it sends upstream (default `hintbox:`): a gateway's own (see `shared-sandboxes.ts`). */
  idPrefix?: string;
  /** Calls wait for it before anything else (a cold start: the server is being verified). */
  verified?: Promise<void>;
  /** A forwarded call was answered, failed or cancelled (its server's requests of the client end with it). */
  onCallSettled?: (clientId: RequestId) => void;
}

/** Timed-out calls of tools whose decision allows retries are sent again this many times. */
export const MAX_RETRIES = 2;

export class CallRelay {
  /** Forwarded calls not yet answered. */
  private readonly pending = new PendingCalls();
  /** Calls waiting for their admission (a person may be asked), by the client's id. */
  private readonly admitting = new Set<RequestId>();
  private readonly cancelledWhileAdmitting = new Set<RequestId>();
  /** Until the server is verified (a cold start): calls wait for it. */
  private readonly verification?: VerificationGate;
  private nextId = 1;
  private readonly idPrefix: string;

  constructor(private readonly options: CallRelayOptions) {
    if (options.verified) this.verification = new VerificationGate(options.verified);
    this.idPrefix = options.idPrefix ?? FORWARDED_ID_PREFIX;
  }

  /** Whether an id (or progress token) is one this relay sent upstream. */ owns(key: unknown): key is string {
    return typeof key === 'string' && key.startsWith(this.idPrefix);
  }

  /** A message from the client: true when the relay took it (a call, or the cancellation of one). */
  fromClient(message: JSONRPCMessage): boolean {
    const m = message as JsonRpcObject;
    if (m.method === 'tools/call' && isRequestId(m.id)) {
      void this.forwardCall(m).catch((error: Error) =>
        this.options.log.error(`tools/call ${String(m.id)} failed in hintbox: ${error.message}`),
      );
      return true;
    }
    // A "cancellation" with an id is a request (the SDK answers it: no such method), and cancels nothing.
    return m.method === 'notifications/cancelled' && m.id === undefined && this.cancelFromClient(m);
  }

  /** An upstream's connection ended: its calls are answered with the server's last words. */
  upstreamClosed(upstream: Upstream): void {
    for (const call of this.pending.list(upstream)) {
      if (this.settle(call, { outcome: 'sandbox-died', detail: upstream.diagnostics() })) {
        this.replyResult(call.clientId, diedResult(call, this.options.serverName));
      }
    }
  }

  /** Whether a call is in flight in an upstream. */
  hasCallsIn(upstream: Upstream): boolean {
    return this.pending.list(upstream).length > 0;
  }

  /** Settles every call in flight (the client left, or hintbox stops): cancelled upstream too when asked. */
  cancelAll(detail: string, upstreamToo: boolean): void {
    for (const call of this.pending.list()) {
      if (this.settle(call, { outcome: 'cancelled', detail }) && upstreamToo) cancelUpstream(call, detail);
    }
    // Those still being admitted (a person asked, a sandbox starting) are never forwarded.
    for (const id of this.admitting) this.cancelledWhileAdmitting.add(id);
  }

  /** The tools of the calls in a sandbox that ran at some time in `[from, to]`: see `PendingCalls.toolsDuring`. */
  toolsDuring(sandbox: string, from: number, to: number): string[] {
    return this.pending.toolsDuring(sandbox, from, to);
  }

  /** The calls in flight in an upstream, oldest first: what its server's requests bind to. */
  callsIn(upstream: Upstream): { clientId: RequestId; what: string }[] {
    return this.pending.list(upstream).map((call) => ({ clientId: call.clientId, what: call.tool }));
  }

  /**
   * A sandbox was seen breaking a hint (e.g. Postgres refused its role a write): marks every call
   * in flight in that sandbox, so their audit outcomes record `violation`, and returns those
   * calls' tool names (empty when none was running).
   */
  noteHintViolation(sandbox: string, violation: string): string[] {
    return this.pending.markViolation(sandbox, violation);
  }

  /** A message of an upstream: true when it is this relay's (an answer or progress of its calls). */
  fromUpstream(upstream: Upstream, m: JsonRpcObject): boolean {
    if (this.owns(m.id) && m.method === undefined) {
      // Only the sandbox a call was sent to may answer it: ids are guessable, sandboxes are not trusted.
      const sent = this.pending.get(m.id);
      const call = sent?.upstream === upstream ? sent : undefined;
      if (call) {
        const violation = this.options.gatekeeper?.violationIn?.(call.tool, m.result ?? m.error);
        if (violation) call.hintViolation = call.hintViolation ? `${call.hintViolation}; ${violation}` : violation;
      }
      if (call && this.settle(call, outcomeOf(m))) {
        // An answer that cannot be passed on (nested too deep to write again) still answers the call.
        this.options.client.send(answerOf(m, call.clientId), call.clientId).catch((error: Error) => {
          this.options.log.warn(
            `the answer of ${call.tool} from sandbox ${call.sandbox} could not be passed on: ${error.message}`,
          );
          this.replyResult(
            call.clientId,
            errorResult(
              `hintbox: the answer of ${call.tool} from sandbox ${call.sandbox} could not be passed on (${error.message})`,
            ),
          );
        });
      }
      return true; // an answer to a call that was cancelled or timed out: dropped
    }
    if (m.method === 'notifications/progress') return this.forwardProgress(m, upstream);
    return false;
  }

  private async forwardCall(request: JsonRpcObject): Promise<void> {
    const clientId = request.id as RequestId;
    const params = request.params;
    const name = params?.name;
    if (!params || typeof name !== 'string' || (params.arguments !== undefined && !isObject(params.arguments))) {
      return this.replyError(
        clientId,
        ErrorCode.InvalidParams,
        'Invalid tools/call request: expected params.name (string) and params.arguments (object)',
      );
    }
    // Until the call is pending upstream (the server is verified, a person is asked, a sandbox
    // starts), a cancellation from the client is remembered here; then the call is never forwarded.
    this.admitting.add(clientId);
    let auditId: string | undefined;
    const finish = (report: AuditOutcomeReport): void => {
      if (auditId) this.options.gatekeeper?.finish(auditId, report);
    };
    try {
      const unverified = await this.verification?.wait(this.options.serverName, this.options.log);
      if (this.cancelledWhileAdmitting.has(clientId)) return;
      if (unverified) return this.replyResult(clientId, unverified);
      // Looked up once the server is verified: its routes may differ from the lock file's.
      const routed = this.options.routeOf(name);
      if (!routed) return this.replyError(clientId, ErrorCode.InvalidParams, `Unknown tool: ${name}`);
      let retriesLeft = 0;
      if (this.options.gatekeeper) {
        const traceId = traceIdOf(params._meta);
        const channel = this.options.client.channelFor(clientId);
        const admission = await this.options.gatekeeper.admit(name, params.arguments, channel, traceId);
        if (!admission.allowed) {
          return this.cancelledWhileAdmitting.has(clientId) ? undefined : this.replyResult(clientId, admission.result);
        }
        auditId = admission.auditId;
        if (admission.decision.retryOnTimeout) retriesLeft = MAX_RETRIES;
      }
      if (this.cancelledWhileAdmitting.has(clientId)) {
        return finish({ outcome: 'cancelled', detail: 'cancelled by the client before it was forwarded' });
      }

      let upstream: Upstream;
      try {
        upstream = await this.options.pool.upstreamFor(routed.sandbox);
      } catch (error) {
        const text = `hintbox could not start sandbox ${routed.sandbox} for ${name}: ${(error as Error).message}`;
        finish({ outcome: 'sandbox-died', detail: text });
        return this.replyResult(clientId, errorResult(text));
      }
      // Counted in its sandbox from here, whatever happens next: a held sandbox whose server this
      // call released (started) is frozen again when the call leaves it, a cancelled call too.
      const activity = this.options.pool.activityOf(upstream, routed.sandbox);
      const thawed = activity.enter();
      /** Until a pending call takes the count over (`settle` leaves it then). */
      let countedHere = true;
      try {
        if (this.cancelledWhileAdmitting.has(clientId)) {
          return finish({ outcome: 'cancelled', detail: 'cancelled by the client before it was forwarded' });
        }
        if (!upstream.forwarded.connected) {
          const text = `sandbox ${routed.sandbox} for ${name} is not connected`;
          finish({ outcome: 'sandbox-died', detail: text });
          return this.replyResult(clientId, errorResult(text));
        }
        const meta = isObject(params._meta) ? params._meta : undefined;
        const token = meta?.progressToken;
        const upstreamId = `${this.idPrefix}${this.nextId++}`;
        const call: PendingCall = {
          clientId,
          upstreamId,
          seq: nextSequence(),
          startedAt: Date.now(),
          upstream,
          activity,
          sandbox: routed.sandbox,
          tool: name,
          ...(typeof token === 'string' || typeof token === 'number'
            ? { progressToken: token, progressKey: upstreamId }
            : {}),
          ...(auditId ? { auditId } : {}),
          params: withProgressKey(
            params,
            typeof token === 'string' || typeof token === 'number' ? upstreamId : undefined,
          ),
          attempts: 1,
          retriesLeft,
        };
        this.pending.add(call);
        this.admitting.delete(clientId);
        this.armTimer(call);
        countedHere = false;
        try {
          await thawed; // a held sandbox is thawed for the call
        } catch (error) {
          const text = `hintbox could not thaw sandbox ${routed.sandbox} for ${name}: ${(error as Error).message}`;
          if (this.settle(call, { outcome: 'sandbox-died', detail: text }))
            this.replyResult(clientId, errorResult(text));
          return;
        }
        // Cancelled or timed out while the sandbox thawed: nothing is sent.
        if (this.pending.has(call)) await this.send(call);
      } finally {
        if (countedHere) {
          thawed.catch(() => undefined);
          activity.leave();
        }
      }
    } catch (error) {
      // A failure of hintbox itself: the client still gets an answer, the audit an outcome.
      finish({ outcome: 'error', detail: `hintbox: ${(error as Error).message}` });
      this.replyError(
        clientId,
        ErrorCode.InternalError,
        `hintbox failed to forward ${name}: ${(error as Error).message}`,
      );
    } finally {
      this.admitting.delete(clientId);
      this.cancelledWhileAdmitting.delete(clientId);
    }
  }

  private async send(call: PendingCall): Promise<void> {
    try {
      await call.upstream.forwarded.send({
        jsonrpc: '2.0',
        id: call.upstreamId,
        method: 'tools/call',
        params: call.params,
      });
    } catch (error) {
      const message = (error as Error).message;
      // Still connected: the call itself could not be written (e.g. arguments nested too deep),
      // the sandbox is fine and is not said to have died.
      if (call.upstream.forwarded.connected) {
        if (this.settle(call, { outcome: 'error', detail: `the call could not be sent: ${message}` })) {
          this.replyResult(
            call.clientId,
            errorResult(`hintbox could not send ${call.tool} to its sandbox: ${message}`),
          );
        }
        return;
      }
      if (this.settle(call, { outcome: 'sandbox-died', detail: message })) {
        this.replyResult(
          call.clientId,
          diedResult(call, this.options.serverName, `sending the call failed: ${message}`),
        );
      }
    }
  }

  private forwardProgress(message: JsonRpcObject, from: Upstream): boolean {
    const notification = notificationOf(message);
    if (!notification) return true; // one with an id (a request in disguise): dropped
    const token = message.params?.progressToken;
    for (const call of this.pending.list(from)) {
      if (call.progressToken !== undefined && call.progressKey === token) {
        // Passed on, and nothing more: progress never extends the call's ceiling (timeouts.call).
        void this.options.client
          .send(progressFor(notification, call.progressToken), call.clientId)
          .catch((error: Error) =>
            this.options.log.warn(`a progress notification of ${call.tool} could not be passed on: ${error.message}`),
          );
        return true;
      }
    }
    return false; // not a call's: perhaps a read's (the request relay's)
  }

  private cancelFromClient(notification: JsonRpcObject): boolean {
    const requestId = notification.params?.requestId as RequestId | undefined;
    if (requestId !== undefined && this.admitting.has(requestId)) {
      this.cancelledWhileAdmitting.add(requestId);
      return true;
    }
    const call = requestId === undefined ? undefined : this.pending.ofClient(requestId);
    const reason = notification.params?.reason;
    const detail = typeof reason === 'string' ? `cancelled by the client: ${reason}` : 'cancelled by the client';
    if (!call || !this.settle(call, { outcome: 'cancelled', detail })) return false;
    // A cancelled request gets no answer (MCP): pass the cancellation on, drop the late result.
    cancelUpstream(call, typeof reason === 'string' ? reason : undefined);
    return true;
  }

  private armTimer(call: PendingCall): void {
    if (call.timer) clearTimeout(call.timer);
    call.timer = setTimeout(() => {
      const seconds = Math.round(this.options.callTimeoutMs / 1000);
      // Not under the calls of others (clients sharing it): its sessions end when the last call leaves.
      const alone = this.pending.has(call) && call.activity.calls <= 1;
      if (alone) this.options.onDeadline?.(call.sandbox, call.tool);
      if (call.retriesLeft > 0 && this.pending.has(call)) return this.retry(call, seconds);
      // A server that stopped reading or answering would hold every later call too: it is
      // replaced, unless other calls (of other clients) are still running in it.
      const replaced = alone ? '; the sandbox is stopped, the next call starts a fresh one' : '';
      const detail = `timeout: no answer within ${seconds} s (timeouts.call)${replaced}`;
      if (!this.settle(call, { outcome: 'error', detail })) return;
      cancelUpstream(call, `hintbox: no answer within ${seconds} s`);
      this.replyError(
        call.clientId,
        ErrorCode.RequestTimeout,
        `${call.tool} gave no answer within ${seconds} s (timeouts.call, which progress does not extend; sandbox ${call.sandbox})${replaced}`,
      );
      if (alone)
        this.options.pool.recycle(call.sandbox, call.upstream, `gave no answer to ${call.tool} in ${seconds} s`);
    }, this.options.callTimeoutMs);
    call.timer.unref();
  }

  /**
   * An idempotent tool of a trusted server timed out: cancel the attempt and send the call again
   * under a new id after a backoff (1 s, 2 s). Logged; the audit record counts the attempts.
   */
  private retry(call: PendingCall, seconds: number): void {
    cancelUpstream(call, `hintbox: no answer within ${seconds} s; retrying`);
    call.retriesLeft--;
    call.attempts++;
    this.pending.rekey(call, `${this.idPrefix}${this.nextId++}`);
    const backoffMs = 1000 * 2 ** (call.attempts - 2);
    this.options.log.warn(
      `${call.tool} gave no answer within ${seconds} s; idempotent tool of a trusted server: attempt ${call.attempts} in ${backoffMs} ms`,
    );
    call.timer = setTimeout(() => {
      if (!this.pending.has(call)) return;
      this.armTimer(call);
      void this.send(call);
    }, backoffMs);
    call.timer.unref();
  }

  /** Marks a call answered and records its outcome. False when it already was: each call is answered once. */
  private settle(call: PendingCall, report: AuditOutcomeReport): boolean {
    if (!this.pending.delete(call)) return false;
    this.options.onCallSettled?.(call.clientId);
    if (call.timer) clearTimeout(call.timer);
    call.activity.leave();
    if (call.auditId) {
      this.options.gatekeeper?.finish(call.auditId, {
        ...report,
        attempts: call.attempts,
        ...(call.hintViolation ? { hintViolation: call.hintViolation } : {}),
      });
    }
    return true;
  }

  private replyResult(id: RequestId, result: CallToolResult): void {
    sendToClient(this.options.client, this.options.log, { jsonrpc: '2.0', id, result }, id);
  }

  private replyError(id: RequestId, code: number, message: string): void {
    sendToClient(this.options.client, this.options.log, { jsonrpc: '2.0', id, error: { code, message } }, id);
  }
}
