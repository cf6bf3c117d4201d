import {
  ErrorCode,
  LoggingLevelSchema,
  type JSONRPCMessage,
  type LoggingLevel,
  type RequestId,
  type Root,
} from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../util/logger.js';
import {
  answerOf,
  cancelUpstream,
  isObject,
  isRequestId,
  notificationOf,
  progressFor,
  withProgressKey,
  type JsonRpcObject,
} from './forwarded-call.js';
import { readRefusal, READS, subjectOf, type ShownOffers } from './read-requests.js';
import { sendToClient, type RelayClient } from './relay-client.js';
import type { SandboxPool, Upstream } from './sandbox-pool.js';
import { ServerRequestDesk } from './server-request-desk.js';
import {
  isServerRequest,
  type ClientPeer,
  type InFlight,
  type RequestAuditEvent,
  type ServerRequestPolicy,
} from './server-requests.js';

/**
 * Everything of MCP besides tools, both ways:
 * - the client's reads — `resources/read`, `resources/subscribe`/`unsubscribe`, `prompts/get`,
 *   `completion/complete` (`read-requests.ts`) — forwarded as JSON-RPC to the strictest sandbox
 *   (read-only mounts, no network) whatever the server claims, since reading changes nothing by
 *   definition; their cancellation and progress pass through, and each is audited once answered;
 * - `logging/setLevel`: the sandboxes are told the most verbose level of their clients (and
 *   those started later are too); each client is passed the messages of its own level and above;
 * - from the sandboxes: log messages and resource updates (to the client, rebuilt from their
 *   method and params: an id a server put on a notification would make the client answer it,
 *   and its answer would meet hintbox's own request of that id), changes of prompts and
 *   resources (the session lists them again), and requests of the client — sampling,
 *   elicitation, roots — answered by the desk (`server-request-desk.ts`).
 * The lists themselves (`prompts/list`, `resources/list`, …) are the gateway's: served from the
 * session's approved listing, like `tools/list`.
 */

export type { ClientPeer, InFlight, RequestAuditEvent } from './server-requests.js';

export interface RequestRelayOptions {
  serverName: string;
  pool: SandboxPool;
  client: RelayClient;
  peer: ClientPeer;
  log: Logger;
  /** Per-request ceiling in ms, from the moment it is forwarded; progress does not extend it. */
  timeoutMs: number;
  /** The strictest sandbox: where reads run. */
  readSandbox: string;
  /** What the client may see now. */
  shown: ShownOffers;
  /** The tool calls in flight in an upstream, oldest first: what a server's request is bound to. */
  callsIn(upstream: Upstream): InFlight[];
  /** What the server may ask of the client now. */
  policy(): ServerRequestPolicy;
  /** The roots a server is told: its sandboxes' mount targets. */
  roots(): Root[];
  /** The gateway's tag: the ids and progress tokens it sends upstream are its own (see `shared-sandboxes.ts`). */
  tag?: string;
  /** Whether the client is subscribed to a URI now (as the sandbox answered it), for the clients sharing it. */
  subscriptions?: (uri: string, subscribed: boolean) => void;
  /** Whether another client sharing the sandbox is subscribed to a URI: an unsubscribe is not sent on then. */
  othersSubscribed?: (uri: string) => boolean;
  /** The client's `logging/setLevel`: the sandboxes are told (the most verbose level of their clients). */
  setLevel?: (level: LoggingLevel) => void;
  record?: (event: RequestAuditEvent) => void;
  /** Reads wait for it (a cold start: the server is being verified against its lock file). */
  verified?: Promise<void>;
}

/** The id space of forwarded reads (the call relay's is `hintbox:`; the SDK's are numbers). */
const READ_ID_PREFIX = 'hintbox-read:';

interface PendingRead {
  clientId: RequestId;
  upstreamId: string;
  upstream: Upstream;
  sandbox: string;
  method: string;
  subject: string | null;
  progressToken?: string | number;
  timer?: NodeJS.Timeout;
  leave: () => void;
}

export class RequestRelay {
  private readonly pending = new Map<string, PendingRead>();
  private readonly pendingByClientId = new Map<RequestId, PendingRead>();
  /** Reads not forwarded yet (waiting for verification or a sandbox), by the client's id. */
  private readonly admitting = new Set<RequestId>();
  private readonly cancelledWhileAdmitting = new Set<RequestId>();
  /** URIs the client subscribed to: only their updates reach it. */
  private readonly subscribed = new Set<string>();
  /** The client's `logging/setLevel`: log messages less severe are not passed to it. */
  private level?: LoggingLevel;
  private readonly desk: ServerRequestDesk;
  private nextId = 1;
  private readonly readPrefix: string;

  constructor(private readonly options: RequestRelayOptions) {
    const { serverName, peer, timeoutMs, log } = options;
    const tag = options.tag === undefined ? '' : `${options.tag}:`;
    this.readPrefix = `${READ_ID_PREFIX}${tag}`;
    this.desk = new ServerRequestDesk({
      serverName,
      peer,
      timeoutMs,
      log,
      policy: () => options.policy(),
      roots: () => options.roots(),
      record: (event) => this.record(event),
    });
  }

  /** A message from the client: true when the relay took it. */
  fromClient(message: JSONRPCMessage): boolean {
    const m = message as JsonRpcObject;
    if (isRequestId(m.id) && typeof m.method === 'string' && READS.has(m.method)) {
      void this.forwardRead(m).catch((error: Error) => {
        this.options.log.error(`${m.method} failed in hintbox: ${error.message}`);
        this.replyError(m.id!, ErrorCode.InternalError, `hintbox failed to forward ${m.method}: ${error.message}`);
      });
      return true;
    }
    if (isRequestId(m.id) && m.method === 'logging/setLevel') {
      this.setLevel(m);
      return true;
    }
    return m.method === 'notifications/cancelled' && m.id === undefined && this.cancelFromClient(m);
  }

  /** Whether an id (or progress token) is one this relay sent upstream. */
  owns(key: unknown): boolean {
    return typeof key === 'string' && key.startsWith(this.readPrefix);
  }

  /** An upstream's connection ended: its reads are answered. */
  upstreamClosed(upstream: Upstream): void {
    for (const read of [...this.pending.values()]) {
      if (read.upstream !== upstream || !this.settle(read, 'sandbox-died', upstream.diagnostics() || null)) continue;
      this.replyError(read.clientId, ErrorCode.InternalError, `the sandbox serving ${read.method} died`);
    }
  }

  /** Whether a read is in flight in an upstream. */
  hasReadsIn(upstream: Upstream): boolean {
    return [...this.pending.values()].some((read) => read.upstream === upstream);
  }

  /** See `ServerRequestDesk.withdrawRefused`. */
  withdrawRefused(): void {
    this.desk.withdrawRefused();
  }

  /** A tool call ended: its server's requests still waiting for the client are withdrawn. */
  callEnded(clientId: RequestId): void {
    this.desk.callEnded(clientId);
  }

  /** A message of an upstream the call relay did not take. */
  fromUpstream(sandboxId: string, upstream: Upstream, m: JsonRpcObject): boolean {
    if (typeof m.id === 'string' && m.method === undefined) {
      if (!m.id.startsWith(this.readPrefix)) return false;
      const read = this.pending.get(m.id);
      // Only the sandbox a read was sent to may answer it; a late answer is dropped.
      if (read?.upstream !== upstream) return true;
      const answer = answerOf(m, read.clientId) as { error?: { message: string } };
      if (!this.settle(read, answer.error ? 'error' : 'ok', answer.error?.message ?? null)) return true;
      if (!answer.error && read.subject !== null) {
        if (read.method === 'resources/subscribe') this.subscribed.add(read.subject);
        if (read.method === 'resources/unsubscribe') this.subscribed.delete(read.subject);
        this.options.subscriptions?.(read.subject, this.subscribed.has(read.subject));
      }
      // An answer that cannot be passed on (nested too deep to write again) still answers the read.
      this.options.client.send(answer as JSONRPCMessage, read.clientId).catch((error: Error) => {
        this.options.log.warn(
          `the answer of ${read.method} from sandbox ${read.sandbox} could not be passed on: ${error.message}`,
        );
        const text = `hintbox: the answer of ${read.method} from sandbox ${read.sandbox} could not be passed on (${error.message})`;
        this.replyError(read.clientId, ErrorCode.InternalError, text);
      });
      return true;
    }
    if (m.id !== undefined && isServerRequest(m.method)) {
      this.desk.take(sandboxId, upstream, m.method, m, this.options.callsIn(upstream)[0]);
      return true;
    }
    if (m.method === 'notifications/cancelled') return this.desk.cancelledByServer(upstream, m.params?.requestId);
    if (!['notifications/progress', 'notifications/message', 'notifications/resources/updated'].includes(m.method!)) {
      return false;
    }
    const notification = notificationOf(m);
    if (!notification) return true; // a request in disguise (it has an id): dropped
    if (m.method === 'notifications/progress') {
      const token = m.params?.progressToken;
      const read = [...this.pending.values()].find(
        (r) => r.upstream === upstream && r.progressToken !== undefined && r.upstreamId === token,
      );
      if (read?.progressToken !== undefined) {
        // Passed on, and nothing more: progress never extends the request's ceiling (timeouts.call).
        this.send(progressFor(notification, read.progressToken), read.clientId);
      }
    } else if (m.method === 'notifications/message') {
      // The sandbox logs at the most verbose level of its clients: this one's is applied here.
      if (this.level && !atLeast(m.params?.level, this.level)) return true;
      this.send(notification, this.inFlight(upstream)[0]?.clientId);
    } else {
      const uri = m.params?.uri;
      if (typeof uri === 'string' && this.subscribed.has(uri)) this.send(notification);
    }
    return true;
  }

  /** Settles every read in flight (the client left, or hintbox stops). */
  cancelAll(detail: string): void {
    for (const read of [...this.pending.values()]) {
      if (this.settle(read, 'cancelled', detail)) cancelUpstream(read, detail);
    }
    for (const id of this.admitting) this.cancelledWhileAdmitting.add(id);
  }

  private async forwardRead(request: JsonRpcObject): Promise<void> {
    const clientId = request.id!;
    const method = request.method!;
    const params = isObject(request.params) ? request.params : {};
    const subject = subjectOf(method, params);
    const refuse = (outcome: 'refused' | 'cancelled' | 'sandbox-died', text: string, code: number): void => {
      this.record({ type: 'request', sandbox: null, method, subject, outcome, detail: text });
      if (outcome !== 'cancelled') this.replyError(clientId, code, text);
    };
    // Until it is pending upstream, a cancellation from the client is remembered here.
    this.admitting.add(clientId);
    try {
      try {
        // What is shown (which prompts) is the verified server's, not the lock's.
        await this.options.verified;
      } catch {
        const text = `hintbox could not verify ${this.options.serverName} against its lock file`;
        if (this.cancelledWhileAdmitting.has(clientId)) return refuse('cancelled', text, 0);
        return refuse('refused', text, ErrorCode.InternalError);
      }
      // A cancelled request gets no answer (MCP), and starts no sandbox.
      if (this.cancelledWhileAdmitting.has(clientId)) return refuse('cancelled', 'cancelled before it was sent', 0);
      const refused = readRefusal(method, params, this.options.shown);
      if (refused) return refuse('refused', refused, ErrorCode.InvalidParams);
      // Another client of the sandbox still wants its updates: the subscription stays upstream.
      if (method === 'resources/unsubscribe' && subject !== null && this.options.othersSubscribed?.(subject)) {
        this.subscribed.delete(subject);
        this.options.subscriptions?.(subject, false);
        this.record({
          type: 'request',
          sandbox: null,
          method,
          subject,
          outcome: 'ok',
          detail: 'other clients stay subscribed',
        });
        return this.send({ jsonrpc: '2.0', id: clientId, result: {} }, clientId);
      }
      const sandbox = this.options.readSandbox;
      let upstream: Upstream;
      try {
        upstream = await this.options.pool.upstreamFor(sandbox);
      } catch (error) {
        const text = `hintbox could not start sandbox ${sandbox} for ${method}: ${(error as Error).message}`;
        return refuse('sandbox-died', text, ErrorCode.InternalError);
      }
      if (this.cancelledWhileAdmitting.has(clientId)) return refuse('cancelled', 'cancelled before it was sent', 0);
      const activity = this.options.pool.activityOf(upstream, sandbox);
      const thawed = activity.enter();
      const token = isObject(params._meta) ? params._meta.progressToken : undefined;
      const read: PendingRead = {
        clientId,
        upstreamId: `${this.readPrefix}${this.nextId++}`,
        upstream,
        sandbox,
        method,
        subject,
        ...(typeof token === 'string' || typeof token === 'number' ? { progressToken: token } : {}),
        leave: () => activity.leave(),
      };
      this.pending.set(read.upstreamId, read);
      this.pendingByClientId.set(clientId, read);
      this.admitting.delete(clientId);
      this.armTimer(read);
      try {
        await thawed;
        if (!this.pending.has(read.upstreamId)) return;
        const sent = withProgressKey(params, read.progressToken === undefined ? undefined : read.upstreamId);
        await upstream.forwarded.send({ jsonrpc: '2.0', id: read.upstreamId, method, params: sent });
      } catch (error) {
        if (this.settle(read, 'sandbox-died', (error as Error).message)) {
          this.replyError(clientId, ErrorCode.InternalError, `sandbox ${sandbox} could not take ${method}`);
        }
      }
    } finally {
      this.admitting.delete(clientId);
      this.cancelledWhileAdmitting.delete(clientId);
    }
  }

  private setLevel(request: JsonRpcObject): void {
    const level = LoggingLevelSchema.safeParse(request.params?.level);
    if (!level.success) {
      const text = `Invalid logging/setLevel: params.level is none of ${LoggingLevelSchema.options.join(', ')}`;
      return this.replyError(request.id!, ErrorCode.InvalidParams, text);
    }
    this.level = level.data;
    this.options.setLevel?.(level.data);
    this.send({ jsonrpc: '2.0', id: request.id!, result: {} }, request.id);
  }

  /** The client's requests in flight in an upstream, oldest first: tool calls, then reads. */
  private inFlight(upstream: Upstream): InFlight[] {
    const reads = [...this.pending.values()]
      .filter((r) => r.upstream === upstream)
      .map((r) => ({ clientId: r.clientId, what: r.method }));
    return [...this.options.callsIn(upstream), ...reads];
  }

  private cancelFromClient(notification: JsonRpcObject): boolean {
    const requestId = notification.params?.requestId as RequestId | undefined;
    if (requestId !== undefined && this.admitting.has(requestId)) {
      this.cancelledWhileAdmitting.add(requestId);
      return true;
    }
    const read = requestId === undefined ? undefined : this.pendingByClientId.get(requestId);
    const reason = notification.params?.reason;
    if (!read || !this.settle(read, 'cancelled', typeof reason === 'string' ? reason : 'cancelled by the client')) {
      return false;
    }
    cancelUpstream(read, typeof reason === 'string' ? reason : undefined);
    return true;
  }

  private armTimer(read: PendingRead): void {
    if (read.timer) clearTimeout(read.timer);
    read.timer = setTimeout(() => {
      const seconds = Math.round(this.options.timeoutMs / 1000);
      if (!this.settle(read, 'error', `timeout: no answer within ${seconds} s (timeouts.call)`)) return;
      cancelUpstream(read, `hintbox: no answer within ${seconds} s`);
      this.replyError(read.clientId, ErrorCode.RequestTimeout, `${read.method} gave no answer within ${seconds} s`);
    }, this.options.timeoutMs);
    read.timer.unref();
  }

  /** Marks a read answered and records it. False when it already was. */
  private settle(
    read: PendingRead,
    outcome: 'ok' | 'error' | 'cancelled' | 'sandbox-died',
    detail: string | null,
  ): boolean {
    if (!this.pending.delete(read.upstreamId)) return false;
    if (this.pendingByClientId.get(read.clientId) === read) this.pendingByClientId.delete(read.clientId);
    if (read.timer) clearTimeout(read.timer);
    read.leave();
    const { sandbox, method, subject } = read;
    this.record({ type: 'request', sandbox, method, subject, outcome, detail });
    return true;
  }

  private record(event: RequestAuditEvent): void {
    this.options.record?.(event);
  }

  private replyError(id: RequestId, code: number, message: string): void {
    this.send({ jsonrpc: '2.0', id, error: { code, message } }, id);
  }

  private send(message: JSONRPCMessage, relatedRequestId?: RequestId): void {
    sendToClient(this.options.client, this.options.log, message, relatedRequestId);
  }
}

/** Whether a log message's level is at least `floor` (RFC 5424 order; an unknown level passes). */
function atLeast(level: unknown, floor: LoggingLevel): boolean {
  const order = LoggingLevelSchema.options;
  const at = order.indexOf(level as LoggingLevel);
  return at === -1 || at >= order.indexOf(floor);
}
