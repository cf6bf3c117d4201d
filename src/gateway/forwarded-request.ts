import { ErrorCode, type JSONRPCMessage, type RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { AuditOutcomeReport } from '../audit/audit-record.js';
import {
  answerOf,
  cancelNotification,
  errorAnswer,
  isObject,
  notificationOf,
  type JsonRpcObject,
} from '../mcp/json-rpc.js';
import type { Logger } from '../util/logger.js';
import type { ClientConnection } from './client-connection.js';
import type { PendingRequests } from './pending-requests.js';
import { type ForwardedRequest } from './pending-requests.js';
import type { SandboxActivity } from './sandbox-activity.js';
import type { SandboxPool, Upstream } from './sandbox-pool.js';

export type { ForwardedRequest } from './pending-requests.js';

/**
 * The life of one request of the client that hintbox forwards to a sandbox — a tool call
 * (`call-relay.ts`) or a read, prompt or completion (`request-relay.ts`) — as the SDK's one
 * `Protocol` serves both its `Server` and its `Client`:
 *
 * 1. admission (`admit`): until it is pending upstream, a cancellation from the client is
 *    remembered, and the request is then never forwarded;
 * 2. forwarding (`forward`): counted in its sandbox (a held one is thawed for it), sent under an
 *    id of hintbox's own, its progress token replaced by one of hintbox's (clients that share a
 *    sandbox never share a token), its hard ceiling armed (progress never extends it);
 * 3. while pending: its progress passed back with the client's token; a cancellation from the
 *    client passed on upstream; the ceiling (`expired`: answered with a timeout, or retried);
 * 4. the answer passed back, its result or error only (`answerOf`), from the sandbox it was sent
 *    to only (ids are guessable, sandboxes are not trusted); or the sandbox's death;
 * 5. settlement, exactly once whatever comes first (`settle`): the sandbox left, the timer
 *    cleared, and the subclass's `settled` (the audit, the end of the server's requests bound to it).
 *
 * A subclass says what differs: how a failure is answered (a call: a result with `isError`;
 * a read: an error), what its death says, what its ceiling does, what settling records.
 */

export interface RequestLifecycleOptions {
  pool: SandboxPool;
  /** The client whose requests these are: answers go to it as part of their request. */
  client: ClientConnection;
  log: Logger;
  /** Per-request ceiling in ms (each attempt), from the moment it is forwarded. */
  ceilingMs: number;
  /** The start of every id sent upstream: the gateway's own (see `shared-sandboxes.ts`). */
  idPrefix: string;
}

/** What a request is before it is forwarded. */
export interface RequestSpec {
  clientId: RequestId;
  sandbox: string;
  /** The tool of a call, the method of a read. */
  what: string;
  method: string;
  params: Record<string, unknown>;
}

export abstract class RequestLifecycle<R extends ForwardedRequest> {
  /** Requests waiting for their admission (a person may be asked, a sandbox start), by the client's id. */
  private readonly admitting = new Set<RequestId>();
  private readonly cancelledWhileAdmitting = new Set<RequestId>();
  private nextId = 1;

  constructor(
    protected readonly lifecycle: RequestLifecycleOptions,
    /** Forwarded requests not yet answered. */
    protected readonly pending: PendingRequests<R>,
  ) {}

  /** How a failure of hintbox's (or of the sandbox) answers the request: a call's result, a read's error. */
  protected abstract failure(clientId: RequestId, text: string): JSONRPCMessage;
  /** What the client is told when the sandbox died under the request. */
  protected abstract diedText(request: R, detail?: string): string;
  /** Its ceiling passed: answered (`timeOut`), or sent again. */
  protected abstract expired(request: R, seconds: number): void;
  /** It settled (once): what is recorded. */
  protected abstract settled(request: R, report: AuditOutcomeReport): void;
  /** Its sandbox answered it, just before it settles. */
  protected answered(_request: R, _message: JsonRpcObject): void {}

  /** The pending request sent upstream under `upstreamId`. */
  get(upstreamId: string): R | undefined {
    return this.pending.get(upstreamId);
  }

  /** Whether one of its requests is in flight in an upstream. */
  busyIn(upstream: Upstream): boolean {
    return this.pending.list(upstream).length > 0;
  }

  /** Its upstream's answer (the dispatcher found the request by its id): passed back once. */
  answer(request: R, from: Upstream, message: JsonRpcObject): void {
    // Only the sandbox a request was sent to may answer it: ids are guessable, sandboxes are not trusted.
    if (request.upstream !== from || !this.pending.has(request)) return;
    this.answered(request, message);
    if (!this.settle(request, outcomeOf(message))) return;
    // An answer that cannot be passed on (nested too deep to write again) still answers the request.
    this.lifecycle.client.send(answerOf(message, request.clientId), request.clientId).catch((error: Error) => {
      const what = `the answer of ${request.what} from sandbox ${request.sandbox}`;
      this.lifecycle.log.warn(`${what} could not be passed on: ${error.message}`);
      this.reply(this.failure(request.clientId, `hintbox: ${what} could not be passed on (${error.message})`));
    });
  }

  /** An upstream's progress notification: passed back with the client's own token. False when not one of its requests'. */
  progress(from: Upstream, message: JsonRpcObject): boolean {
    const token = message.params?.progressToken;
    const request = this.pending.list(from).find((r) => r.progressKey !== undefined && r.progressKey === token);
    if (request?.progressToken === undefined) return false;
    const notification = notificationOf(message);
    // One with an id (a request in disguise): dropped. Else passed on, and nothing more:
    // progress never extends the request's ceiling (timeouts.call).
    if (notification) this.reply(progressFor(notification, request.progressToken), request.clientId);
    return true;
  }

  /** An upstream's connection ended: its requests are answered with the sandbox's last words. */
  upstreamClosed(upstream: Upstream): void {
    for (const request of this.pending.list(upstream)) {
      if (this.settle(request, { outcome: 'sandbox-died', detail: upstream.diagnostics() })) {
        this.reply(this.failure(request.clientId, this.diedText(request)));
      }
    }
  }

  /** Settles every request in flight (the client left, or hintbox stops); cancelled upstream too when asked. */
  cancelAll(detail: string, upstreamToo: boolean): void {
    for (const request of this.pending.list()) {
      if (this.settle(request, { outcome: 'cancelled', detail }) && upstreamToo) cancelUpstream(request, detail);
    }
    // Those still being admitted (a person asked, a sandbox starting) are never forwarded.
    for (const id of this.admitting) this.cancelledWhileAdmitting.add(id);
  }

  /** The client's `notifications/cancelled`: true when it was of one of its requests. */
  cancelFromClient(notification: JsonRpcObject): boolean {
    const requestId = notification.params?.requestId as RequestId | undefined;
    if (requestId === undefined) return false;
    if (this.admitting.has(requestId)) {
      this.cancelledWhileAdmitting.add(requestId);
      return true;
    }
    const request = this.pending.ofClient(requestId);
    const reason = notification.params?.reason;
    const detail = typeof reason === 'string' ? `cancelled by the client: ${reason}` : 'cancelled by the client';
    if (!request || !this.settle(request, { outcome: 'cancelled', detail })) return false;
    // A cancelled request gets no answer (MCP): pass the cancellation on, drop the late answer.
    cancelUpstream(request, typeof reason === 'string' ? reason : undefined);
    return true;
  }

  /**
   * Runs a request's admission (`work`): until it is pending upstream, a cancellation from the
   * client is remembered, and `cancelled()` says so (the request is then never forwarded).
   */
  protected async admit(clientId: RequestId, work: (cancelled: () => boolean) => Promise<void>): Promise<void> {
    this.admitting.add(clientId);
    try {
      await work(() => this.cancelledWhileAdmitting.has(clientId));
    } finally {
      this.admitting.delete(clientId);
      this.cancelledWhileAdmitting.delete(clientId);
    }
  }

  /**
   * Forwards an admitted request to its sandbox (started if need be, thawed for it). What stops
   * it before it is pending (no sandbox, a cancellation) goes to `notForwarded`, with the text the
   * client is answered (none for a cancellation). `extra`: what the subclass keeps of it.
   *
   * The hot path (the sandbox runs, is connected and needs no thaw) waits for nothing: no promise
   * is made for it but the send's.
   */
  protected async forward(
    spec: RequestSpec,
    cancelled: () => boolean,
    extra: Omit<R, keyof ForwardedRequest>,
    notForwarded: (report: AuditOutcomeReport, text?: string) => void,
  ): Promise<void> {
    const { pool } = this.lifecycle;
    const { sandbox, what } = spec;
    let upstream = pool.runningUpstream(sandbox);
    if (!upstream) {
      try {
        upstream = await pool.upstreamFor(sandbox);
      } catch (error) {
        const text = `hintbox could not start sandbox ${sandbox} for ${what}: ${(error as Error).message}`;
        return notForwarded({ outcome: 'sandbox-died', detail: text }, text);
      }
    }
    // Counted in its sandbox from here, whatever happens next: a held sandbox whose server this
    // request released (started) is frozen again when it leaves, a cancelled one too.
    const activity = pool.activityOf(upstream, sandbox);
    const thawed = activity.enterNow();
    if (cancelled()) {
      return this.notSent(activity, thawed, notForwarded, {
        outcome: 'cancelled',
        detail: 'cancelled by the client before it was forwarded',
      });
    }
    if (!upstream.forwarded.connected) {
      const text = `sandbox ${sandbox} for ${what} is not connected`;
      return this.notSent(activity, thawed, notForwarded, { outcome: 'sandbox-died', detail: text }, text);
    }
    const token = isObject(spec.params._meta) ? spec.params._meta.progressToken : undefined;
    const upstreamId = this.nextUpstreamId();
    const carriesToken = typeof token === 'string' || typeof token === 'number';
    const request = Object.assign(
      {
        clientId: spec.clientId,
        upstreamId,
        upstream,
        activity,
        sandbox,
        what,
        method: spec.method,
        params: carriesToken ? withProgressKey(spec.params, upstreamId) : spec.params,
        seq: nextSequence(),
        startedAt: Date.now(),
        progressToken: carriesToken ? token : undefined,
        progressKey: carriesToken ? upstreamId : undefined,
      } satisfies ForwardedRequest,
      extra,
    ) as R;
    this.pending.add(request);
    this.admitting.delete(spec.clientId);
    this.arm(request);
    if (thawed) {
      try {
        await thawed; // a held sandbox is thawed for the request
      } catch (error) {
        const text = `hintbox could not thaw sandbox ${sandbox} for ${what}: ${(error as Error).message}`;
        if (this.settle(request, { outcome: 'sandbox-died', detail: text }))
          this.reply(this.failure(spec.clientId, text));
        return;
      }
      // Cancelled or timed out while the sandbox thawed: nothing is sent.
      if (!this.pending.has(request)) return;
    }
    this.send(request);
  }

  /** A request that entered its sandbox but is not sent: it leaves again, and `notForwarded` says why. */
  private notSent(
    activity: SandboxActivity,
    thawed: Promise<void> | undefined,
    notForwarded: (report: AuditOutcomeReport, text?: string) => void,
    report: AuditOutcomeReport,
    text?: string,
  ): void {
    thawed?.catch(() => undefined);
    activity.leave();
    notForwarded(report, text);
  }

  /** Sends (or sends again) a pending request upstream under its current id; a failure settles it. */
  protected send(request: R): void {
    const { upstream } = request;
    upstream.forwarded
      .send({ jsonrpc: '2.0', id: request.upstreamId, method: request.method, params: request.params })
      .catch((error: Error) => this.sendFailed(request, upstream, error.message));
  }

  private sendFailed(request: R, upstream: Upstream, message: string): void {
    // Still connected: the request itself could not be written (e.g. arguments nested too
    // deep); the sandbox is fine and is not said to have died.
    if (upstream.forwarded.connected) {
      if (this.settle(request, { outcome: 'error', detail: `the call could not be sent: ${message}` })) {
        const text = `hintbox could not send ${request.what} to its sandbox: ${message}`;
        this.reply(this.failure(request.clientId, text));
      }
    } else if (this.settle(request, { outcome: 'sandbox-died', detail: message })) {
      this.reply(this.failure(request.clientId, this.diedText(request, `sending the call failed: ${message}`)));
    }
  }

  /** Arms the request's ceiling (again, for a retry): progress never extends it. */
  protected arm(request: R): void {
    if (request.timer) clearTimeout(request.timer);
    request.timer = setTimeout(
      () => this.expired(request, Math.round(this.lifecycle.ceilingMs / 1000)),
      this.lifecycle.ceilingMs,
    );
    request.timer.unref();
  }

  /** The request's ceiling passed: settled, cancelled upstream, answered with a timeout. False when it already was settled. */
  protected timeOut(request: R, detail: string, message: string): boolean {
    if (!this.settle(request, { outcome: 'error', detail })) return false;
    const seconds = Math.round(this.lifecycle.ceilingMs / 1000);
    cancelUpstream(request, `hintbox: no answer within ${seconds} s`);
    this.reply(errorAnswer(request.clientId, ErrorCode.RequestTimeout, message));
    return true;
  }

  /** Gives a pending request a new upstream id (a retry): the old id's late answer is dropped. */
  protected rekey(request: R): void {
    this.pending.rekey(request, this.nextUpstreamId());
  }

  /** Marks a request answered: it leaves its sandbox, and `settled` records it. False when it already was: each is answered once. */
  protected settle(request: R, report: AuditOutcomeReport): boolean {
    if (!this.pending.delete(request)) return false;
    if (request.timer) clearTimeout(request.timer);
    request.activity.leave();
    this.settled(request, report);
    return true;
  }

  /** Sends to the client (as part of request `relatedRequestId`); a failure is logged. */
  protected reply(message: JSONRPCMessage, relatedRequestId?: RequestId): void {
    const related = relatedRequestId ?? ('id' in message ? message.id : undefined);
    this.lifecycle.client.tell(message, related);
  }

  private nextUpstreamId(): string {
    return `${this.lifecycle.idPrefix}${this.nextId++}`;
  }
}

/** Tells the sandbox a forwarded request is cancelled (its late answer is dropped). */
export function cancelUpstream(request: Pick<ForwardedRequest, 'upstream' | 'upstreamId'>, reason?: string): void {
  void request.upstream.forwarded.send(cancelNotification(request.upstreamId, reason)).catch(() => undefined);
}

/** The audit outcome of an upstream's answer (as {@link answerOf} passes it on). */
export function outcomeOf(message: JsonRpcObject): AuditOutcomeReport {
  // As answerOf reads it (without building the answer): an error object, else a result object, else an error.
  const { error, result } = message;
  if (isObject(error)) return { outcome: 'error', detail: typeof error.message === 'string' ? error.message : 'error' };
  if (!isObject(result)) return { outcome: 'error', detail: 'the server answered with neither a result nor an error' };
  return { outcome: result.isError === true ? 'tool-error' : 'ok' };
}

let lastSequence = 0;
/** The next number of the process's order of requests (which of several in flight is the oldest). */
function nextSequence(): number {
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
function progressFor(notification: JSONRPCMessage, token: string | number): JSONRPCMessage {
  const n = notification as { params?: Record<string, unknown> };
  return { ...notification, params: { ...n.params, progressToken: token } };
}
