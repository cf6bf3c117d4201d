import {
  ErrorCode,
  LoggingLevelSchema,
  type JSONRPCMessage,
  type LoggingLevel,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import type { AuditOutcomeReport } from '../audit/audit-record.js';
import { errorAnswer, isObject, isRequestId, notificationOf, type JsonRpcObject } from '../mcp/json-rpc.js';
import { METHOD, NOTIFICATION } from '../mcp/methods.js';
import type { CallRelay } from './call-relay.js';
import { RequestLifecycle, type RequestLifecycleOptions } from './forwarded-request.js';
import { PendingRequests, type ForwardedRequest } from './pending-requests.js';
import { readRefusal, READS, subjectOf, type ShownItems } from './read-requests.js';
import type { Upstream } from './sandbox-pool.js';
import type { ServerRequestBroker } from './server-request-broker.js';
import { isServerRequest, type RequestAuditEvent } from './server-requests.js';
import type { SandboxClient, SharedSandboxes } from './shared-sandboxes.js';

/**
 * Everything of MCP besides tools, both ways:
 * - the client's reads — `resources/read`, `resources/subscribe`/`unsubscribe`, `prompts/get`,
 *   `completion/complete` (`read-requests.ts`) — forwarded to the strictest sandbox (read-only
 *   mounts, no network) whatever the server claims, since reading changes nothing by
 *   definition; their life is every forwarded request's (`forwarded-request.ts`), and each is
 *   audited once answered;
 * - `logging/setLevel`: the sandboxes are told the most verbose level of their clients (and
 *   those started later are too); each client is passed the messages of its own level and above;
 * - from the sandboxes: log messages and resource updates (to the client, rebuilt from their
 *   method and params: an id a server put on a notification would make the client answer it,
 *   and its answer would meet hintbox's own request of that id), and requests of the client —
 *   sampling, elicitation, roots — answered by the broker (`server-request-broker.ts`).
 * It is how the shared sandboxes see its gateway (`SandboxClient`): its calls and reads, and the
 * taker of its server's other messages. The lists themselves (`prompts/list`, …) are the
 * gateway's: served from the session's approved listing, like `tools/list`.
 */

export type { ClientPeer, InFlight, RequestAuditEvent } from './server-requests.js';

export interface RequestRelayOptions extends RequestLifecycleOptions {
  serverName: string;
  /** The sandboxes it shares with other gateways: subscriptions and logging levels are theirs together. */
  shared: SharedSandboxes;
  /** The same client's tool calls: a server's request or log message binds to the oldest. */
  calls: CallRelay;
  /** The server's requests of the client. */
  serverRequests: ServerRequestBroker;
  /** The strictest sandbox: where reads run. */
  readSandbox: string;
  /** What the client may see now. */
  shown: ShownItems;
  record?: (event: RequestAuditEvent) => void;
  /** Reads wait for it (a cold start: the server is being verified against its lock file). */
  verified?: Promise<void>;
}

/** How a read ended before it was forwarded: refused, or as any request may. */
interface ReadReport {
  outcome: AuditOutcomeReport['outcome'] | 'refused';
  detail?: string;
}

/** A read forwarded and not yet answered (`what`: its method). */
interface PendingRead extends ForwardedRequest {
  subject: string | null;
}

export class RequestRelay extends RequestLifecycle<PendingRead> implements SandboxClient {
  /** URIs the client subscribed to: only their updates reach it. */
  private readonly subscribed = new Set<string>();
  /** The client's `logging/setLevel`: log messages less severe are not passed to it. */
  private level?: LoggingLevel;

  constructor(private readonly options: RequestRelayOptions) {
    super(options, new PendingRequests<PendingRead>());
  }

  get calls(): CallRelay {
    return this.options.calls;
  }

  get reads(): this {
    return this;
  }

  /** A message from the client: true when the relay took it. */
  fromClient(m: JsonRpcObject): boolean {
    if (!isRequestId(m.id) || typeof m.method !== 'string') return false;
    const { id: clientId, method } = m;
    if (READS.has(method)) {
      void this.admit(clientId, (cancelled) => this.admitAndForward(clientId, method, m.params, cancelled)).catch(
        (error: Error) => {
          this.options.log.error(`${method} failed in hintbox: ${error.message}`);
          this.reply(
            errorAnswer(clientId, ErrorCode.InternalError, `hintbox failed to forward ${method}: ${error.message}`),
          );
        },
      );
      return true;
    }
    if (method !== METHOD.setLevel) return false;
    const level = LoggingLevelSchema.safeParse(m.params?.level);
    if (!level.success) {
      const text = `Invalid logging/setLevel: params.level is none of ${LoggingLevelSchema.options.join(', ')}`;
      this.reply(errorAnswer(clientId, ErrorCode.InvalidParams, text));
    } else {
      this.level = level.data;
      this.options.shared.setLevel(this, level.data);
      this.reply({ jsonrpc: '2.0', id: clientId, result: {} });
    }
    return true;
  }

  /** A message of an upstream that is none of its requests' answers or progress (see `SharedSandboxes`). */
  fromServer(sandboxId: string, upstream: Upstream, m: JsonRpcObject): boolean {
    const { serverRequests } = this.options;
    if (m.id !== undefined && isServerRequest(m.method)) {
      serverRequests.take(sandboxId, upstream, m.method, m, this.calls.oldestIn(upstream));
      return true;
    }
    if (m.method === NOTIFICATION.cancelled) return serverRequests.cancelledByServer(upstream, m.params?.requestId);
    if (m.method !== NOTIFICATION.message && m.method !== NOTIFICATION.resourceUpdated) return false;
    const notification = notificationOf(m);
    if (!notification) return true; // a request in disguise (it has an id): dropped
    if (m.method === NOTIFICATION.message) {
      // The sandbox logs at the most verbose level of its clients: this one's is applied here.
      if (this.level && !atLeast(m.params?.level, this.level)) return true;
      // Part of the oldest request in flight there: tool calls, then reads.
      const bound = this.calls.oldestIn(upstream)?.clientId ?? this.pending.list(upstream)[0]?.clientId;
      this.reply(notification, bound);
    } else {
      const uri = m.params?.uri;
      if (typeof uri === 'string' && this.subscribed.has(uri)) this.reply(notification);
    }
    return true;
  }

  /** Admission (verified server, what is shown, subscriptions of others), then the lifecycle forwards it. */
  private async admitAndForward(
    clientId: RequestId,
    method: string,
    given: Record<string, unknown> | undefined,
    cancelled: () => boolean,
  ): Promise<void> {
    const params = isObject(given) ? given : {};
    const subject = subjectOf(method, params);
    const notForwarded = (report: ReadReport, text?: string, code: number = ErrorCode.InternalError): void => {
      const outcome = report.outcome === 'tool-error' || report.outcome === 'not-run' ? 'error' : report.outcome;
      this.record({ type: 'request', sandbox: null, method, subject, outcome, detail: report.detail ?? null });
      if (text !== undefined) this.reply(errorAnswer(clientId, code, text));
    };
    try {
      // What is shown (which prompts) is the verified server's, not the lock's.
      await this.options.verified;
    } catch {
      const text = `hintbox could not verify ${this.options.serverName} against its lock file`;
      if (cancelled()) return notForwarded({ outcome: 'cancelled', detail: text });
      return notForwarded({ outcome: 'refused', detail: text }, text);
    }
    // A cancelled request gets no answer (MCP), and starts no sandbox.
    if (cancelled()) return notForwarded({ outcome: 'cancelled', detail: 'cancelled before it was sent' });
    const refused = readRefusal(method, params, this.options.shown);
    if (refused) return notForwarded({ outcome: 'refused', detail: refused }, refused, ErrorCode.InvalidParams);
    // Another client of the sandbox still wants its updates: the subscription stays upstream.
    if (
      method === METHOD.resourcesUnsubscribe &&
      subject !== null &&
      this.options.shared.othersSubscribed(this, subject)
    ) {
      this.subscribed.delete(subject);
      this.options.shared.subscribed(this, subject, false);
      this.record({
        type: 'request',
        sandbox: null,
        method,
        subject,
        outcome: 'ok',
        detail: 'other clients stay subscribed',
      });
      return this.reply({ jsonrpc: '2.0', id: clientId, result: {} });
    }
    const spec = { clientId, sandbox: this.options.readSandbox, what: method, method, params };
    await this.forward(spec, cancelled, { subject }, notForwarded);
  }

  /** A read's failure is an error (there is no tool result to carry it). */
  protected override failure(clientId: RequestId, text: string): JSONRPCMessage {
    return errorAnswer(clientId, ErrorCode.InternalError, text);
  }

  protected override diedText(read: PendingRead): string {
    return `the sandbox serving ${read.what} died`;
  }

  /** A subscription answered: the client gets that resource's updates from now on (or no longer). */
  protected override answered(read: PendingRead, message: JsonRpcObject): void {
    // As `answerOf` reads it: an error object wins, a result must be an object.
    if (isObject(message.error) || !isObject(message.result) || read.subject === null) return;
    if (read.method === METHOD.resourcesSubscribe) this.subscribed.add(read.subject);
    else if (read.method === METHOD.resourcesUnsubscribe) this.subscribed.delete(read.subject);
    else return;
    this.options.shared.subscribed(this, read.subject, this.subscribed.has(read.subject));
  }

  protected override settled(read: PendingRead, report: AuditOutcomeReport): void {
    const outcome = report.outcome === 'tool-error' || report.outcome === 'not-run' ? 'ok' : report.outcome;
    const { sandbox, method, subject } = read;
    this.record({ type: 'request', sandbox, method, subject, outcome, detail: report.detail || null });
  }

  protected override expired(read: PendingRead, seconds: number): void {
    this.timeOut(
      read,
      `timeout: no answer within ${seconds} s (timeouts.call)`,
      `${read.what} gave no answer within ${seconds} s`,
    );
  }

  private record(event: RequestAuditEvent): void {
    this.options.record?.(event);
  }
}

/** Whether a log message's level is at least `floor` (RFC 5424 order; an unknown level passes). */
function atLeast(level: unknown, floor: LoggingLevel): boolean {
  const order = LoggingLevelSchema.options;
  const at = order.indexOf(level as LoggingLevel);
  return at === -1 || at >= order.indexOf(floor);
}
