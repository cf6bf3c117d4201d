import { ErrorCode, type JSONRPCMessage, type RequestId, type Root } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../util/logger.js';
import { isObject, type JsonRpcObject } from './forwarded-call.js';
import { sendToClient, type RelayClient } from './relay-client.js';
import type { SandboxPool, Upstream } from './sandbox-pool.js';
import {
  answerServerRequest,
  isServerRequest,
  type ClientPeer,
  type InFlight,
  type RequestAuditEvent,
  type ServerRequestPolicy,
} from './server-requests.js';

/**
 * Everything of MCP besides tools, both ways:
 * - the client's reads — `resources/read`, `resources/subscribe`/`unsubscribe`, `prompts/get`,
 *   `completion/complete` — forwarded as JSON-RPC to the strictest sandbox (read-only mounts, no
 *   network) whatever the server claims, since reading changes nothing by definition; their
 *   cancellation and progress pass through, and each is audited once answered;
 * - `logging/setLevel`, sent on to every sandbox (and to those started later);
 * - from the sandboxes: log messages and resource updates (to the client), changes of prompts
 *   and resources (the session lists them again), and requests of the client — sampling,
 *   elicitation, roots — passed on only as the profile and the client allow, bound to the
 *   request of the client in flight in that sandbox, and audited.
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
  /** Per-request timeout in ms, reset by progress. */
  timeoutMs: number;
  /** The strictest sandbox: where reads run. */
  readSandbox: string;
  /** Whether the client may get this prompt (approved and listed). */
  promptShown(name: string): boolean;
  /** Whether the client may complete against this template (or resource): approved and listed. */
  templateShown(uri: string): boolean;
  /** The tool calls in flight in an upstream, oldest first. */
  callsIn(upstream: Upstream): InFlight[];
  policy: ServerRequestPolicy;
  /** The roots a server is told: its sandboxes' mount targets. */
  roots(): Root[];
  /** A server said its prompts or resources changed: the session lists them again. */
  onOffersChanged?: (from: Upstream) => void;
  /** Whether an upstream runs only during calls (a held sandbox). */
  isHeld(upstream: Upstream, sandboxId: string): boolean;
  record?: (event: RequestAuditEvent) => void;
  /** Reads wait for it (a cold start: the server is being verified against its lock file). */
  verified?: Promise<void>;
}

/** The client's reads, forwarded to the strictest sandbox. */
const READS = new Set([
  'resources/read',
  'resources/subscribe',
  'resources/unsubscribe',
  'prompts/get',
  'completion/complete',
]);

/** The id space of forwarded reads (the call relay's is `hintbox:`; the SDK's are numbers). */
const READ_ID_PREFIX = 'hintbox-read:';

interface PendingRead {
  clientId: RequestId;
  upstreamId: string;
  upstream: Upstream;
  method: string;
  subject: string | null;
  progressToken?: string | number;
  timer?: NodeJS.Timeout;
  leave: () => void;
}

export class RequestRelay {
  private readonly pending = new Map<string, PendingRead>();
  private readonly pendingByClientId = new Map<RequestId, PendingRead>();
  /** URIs the client subscribed to: only their updates reach it. */
  private readonly subscribed = new Set<string>();
  /** The client's `logging/setLevel`, sent to every sandbox (also those started later). */
  private level?: string;
  private readonly upstreams = new Set<Upstream>();
  /** Requests of each upstream's server to the client not yet answered. */
  private readonly asking = new WeakMap<Upstream, number>();
  private nextId = 1;

  constructor(private readonly options: RequestRelayOptions) {}

  /** A message from the client: true when the relay took it. */
  fromClient(message: JSONRPCMessage): boolean {
    const m = message as JsonRpcObject;
    if (m.id !== undefined && typeof m.method === 'string' && READS.has(m.method)) {
      void this.forwardRead(m).catch((error: Error) => {
        this.options.log.error(`${m.method} failed in hintbox: ${error.message}`);
        this.replyError(m.id!, ErrorCode.InternalError, `hintbox failed to forward ${m.method}: ${error.message}`);
      });
      return true;
    }
    if (m.id !== undefined && m.method === 'logging/setLevel') {
      this.setLevel(m);
      return true;
    }
    return m.method === 'notifications/cancelled' && this.cancelFromClient(m);
  }

  /** Listens to an upstream too (after the call relay); sends it the client's logging level. */
  attach(_sandboxId: string, upstream: Upstream): void {
    this.upstreams.add(upstream);
    void upstream.closed.then(() => {
      this.upstreams.delete(upstream);
      for (const read of [...this.pending.values()]) {
        if (read.upstream !== upstream || !this.settle(read, 'sandbox-died', upstream.diagnostics() || null)) continue;
        this.replyError(read.clientId, ErrorCode.InternalError, `the sandbox serving ${read.method} died`);
      }
    });
    if (this.level !== undefined) this.sendLevel(upstream, this.level);
  }

  /** A message of an upstream the call relay did not take. */
  fromUpstream(sandboxId: string, upstream: Upstream, m: JsonRpcObject): boolean {
    if (typeof m.id === 'string' && m.id.startsWith(READ_ID_PREFIX) && m.method === undefined) {
      const read = this.pending.get(m.id);
      if (read?.upstream === upstream) {
        const error = isObject(m.error) ? (typeof m.error.message === 'string' ? m.error.message : 'error') : null;
        if (this.settle(read, error === null ? 'ok' : 'error', error)) {
          if (error === null && read.method === 'resources/subscribe' && read.subject)
            this.subscribed.add(read.subject);
          if (error === null && read.method === 'resources/unsubscribe' && read.subject)
            this.subscribed.delete(read.subject);
          this.send({ ...m, id: read.clientId } as JSONRPCMessage, read.clientId);
        }
      }
      return true; // late, or not this sandbox's to answer: dropped
    }
    if (m.id !== undefined && isServerRequest(m.method)) {
      const { serverName, policy, peer, timeoutMs, log } = this.options;
      const asking = (this.asking.get(upstream) ?? 0) + 1;
      this.asking.set(upstream, asking);
      void answerServerRequest({
        context: {
          serverName,
          policy,
          peer,
          roots: () => this.options.roots(),
          timeoutMs,
          log,
          record: (event) => this.record(event),
        },
        ref: `${sandboxId}#${this.nextId++}`,
        sandbox: sandboxId,
        upstream,
        method: m.method,
        request: m,
        bound: this.inFlight(upstream)[0],
        pending: asking - 1,
      }).finally(() => this.asking.set(upstream, (this.asking.get(upstream) ?? 1) - 1));
      return true;
    }
    switch (m.method) {
      case 'notifications/progress': {
        const read = [...this.pending.values()].find(
          (r) =>
            r.upstream === upstream && r.progressToken !== undefined && r.progressToken === m.params?.progressToken,
        );
        if (read) {
          this.armTimer(read);
          this.send(m as JSONRPCMessage, read.clientId);
        }
        return true;
      }
      case 'notifications/message': {
        const bound = this.inFlight(upstream)[0];
        this.send(m as JSONRPCMessage, bound?.clientId);
        return true;
      }
      case 'notifications/resources/updated': {
        const uri = m.params?.uri;
        if (typeof uri === 'string' && this.subscribed.has(uri)) this.send(m as JSONRPCMessage);
        return true;
      }
      case 'notifications/resources/list_changed':
      case 'notifications/prompts/list_changed':
        // As for tools: a held sandbox's announcement outside a call is dropped.
        if (this.options.isHeld(upstream, sandboxId) && this.inFlight(upstream).length === 0) return true;
        this.options.onOffersChanged?.(upstream);
        return true;
      default:
        return false;
    }
  }

  /** Settles every read in flight (the client left, or hintbox stops). */
  cancelAll(detail: string): void {
    for (const read of [...this.pending.values()]) {
      if (this.settle(read, 'cancelled', detail)) this.cancelUpstream(read, detail);
    }
  }

  private async forwardRead(request: JsonRpcObject): Promise<void> {
    const clientId = request.id!;
    const method = request.method!;
    const params = request.params ?? {};
    const subject = subjectOf(method, params);
    try {
      // What is shown (which prompts) is the verified server's, not the lock's.
      await this.options.verified;
    } catch {
      return this.replyError(
        clientId,
        ErrorCode.InternalError,
        `hintbox could not verify ${this.options.serverName} against its lock file`,
      );
    }
    const refused = this.refusal(method, params);
    if (refused) {
      this.record({ type: 'request', sandbox: null, method, subject, outcome: 'refused', detail: refused });
      return this.replyError(clientId, ErrorCode.InvalidParams, refused);
    }
    const sandbox = this.options.readSandbox;
    let upstream: Upstream;
    try {
      upstream = await this.options.pool.upstreamFor(sandbox);
    } catch (error) {
      const text = `hintbox could not start sandbox ${sandbox} for ${method}: ${(error as Error).message}`;
      this.record({ type: 'request', sandbox, method, subject, outcome: 'sandbox-died', detail: text });
      return this.replyError(clientId, ErrorCode.InternalError, text);
    }
    const activity = this.options.pool.activityOf(upstream, sandbox);
    const thawed = activity.enter();
    const token = isObject(params._meta) ? params._meta.progressToken : undefined;
    const read: PendingRead = {
      clientId,
      upstreamId: `${READ_ID_PREFIX}${this.nextId++}`,
      upstream,
      method,
      subject,
      ...(typeof token === 'string' || typeof token === 'number' ? { progressToken: token } : {}),
      leave: () => activity.leave(),
    };
    this.pending.set(read.upstreamId, read);
    this.pendingByClientId.set(clientId, read);
    this.armTimer(read);
    try {
      await thawed;
      if (!this.pending.has(read.upstreamId)) return;
      await upstream.forwarded.send({ jsonrpc: '2.0', id: read.upstreamId, method, params });
    } catch (error) {
      if (this.settle(read, 'sandbox-died', (error as Error).message)) {
        this.replyError(clientId, ErrorCode.InternalError, `sandbox ${sandbox} could not take ${method}`);
      }
    }
  }

  /** Why a read is not forwarded (a prompt that is not shown), or undefined. */
  private refusal(method: string, params: Record<string, unknown>): string | undefined {
    if (method === 'prompts/get') {
      const name = params.name;
      if (typeof name !== 'string') return 'Invalid prompts/get request: expected params.name (string)';
      if (!this.options.promptShown(name)) return `Unknown prompt (or not approved): ${name}`;
    }
    if (method === 'completion/complete' && isObject(params.ref) && params.ref.type === 'ref/prompt') {
      const name = params.ref.name;
      if (typeof name !== 'string' || !this.options.promptShown(name)) return `Unknown prompt (or not approved)`;
    }
    if (method === 'completion/complete' && isObject(params.ref) && params.ref.type === 'ref/resource') {
      const uri = params.ref.uri;
      if (typeof uri !== 'string' || !this.options.templateShown(uri))
        return `Unknown resource template (or not approved)`;
    }
    if (method.startsWith('resources/') && typeof params.uri !== 'string') {
      return `Invalid ${method} request: expected params.uri (string)`;
    }
    return undefined;
  }

  private setLevel(request: JsonRpcObject): void {
    const level = request.params?.level;
    if (typeof level !== 'string') {
      return this.replyError(request.id!, ErrorCode.InvalidParams, 'Invalid logging/setLevel: expected params.level');
    }
    this.level = level;
    for (const upstream of this.upstreams) this.sendLevel(upstream, level);
    this.send({ jsonrpc: '2.0', id: request.id!, result: {} }, request.id);
  }

  /** Tells a sandbox the client's logging level (its answer is dropped). */
  private sendLevel(upstream: Upstream, level: string): void {
    if (!upstream.client.getServerCapabilities()?.logging) return;
    void upstream.forwarded
      .send({
        jsonrpc: '2.0',
        id: `${READ_ID_PREFIX}level-${this.nextId++}`,
        method: 'logging/setLevel',
        params: { level },
      })
      .catch(() => undefined);
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
    const read = requestId === undefined ? undefined : this.pendingByClientId.get(requestId);
    const reason = notification.params?.reason;
    if (!read || !this.settle(read, 'cancelled', typeof reason === 'string' ? reason : 'cancelled by the client')) {
      return false;
    }
    this.cancelUpstream(read, typeof reason === 'string' ? reason : undefined);
    return true;
  }

  private cancelUpstream(read: PendingRead, reason?: string): void {
    void read.upstream.forwarded
      .send({
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: read.upstreamId, ...(reason ? { reason } : {}) },
      })
      .catch(() => undefined);
  }

  private armTimer(read: PendingRead): void {
    if (read.timer) clearTimeout(read.timer);
    read.timer = setTimeout(() => {
      const seconds = Math.round(this.options.timeoutMs / 1000);
      if (!this.settle(read, 'error', `no answer within ${seconds} s`)) return;
      this.cancelUpstream(read, `hintbox: no answer within ${seconds} s`);
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
    this.pendingByClientId.delete(read.clientId);
    if (read.timer) clearTimeout(read.timer);
    read.leave();
    this.record({
      type: 'request',
      sandbox: this.options.readSandbox,
      method: read.method,
      subject: read.subject,
      outcome,
      detail,
    });
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

/** What a read is about, for the audit: a URI, a prompt's name, a completion's reference. */
function subjectOf(method: string, params: Record<string, unknown>): string | null {
  if (typeof params.uri === 'string') return params.uri;
  if (method === 'prompts/get' && typeof params.name === 'string') return params.name;
  if (method === 'completion/complete' && isObject(params.ref)) {
    const ref = params.ref;
    const name = typeof ref.name === 'string' ? ref.name : typeof ref.uri === 'string' ? ref.uri : undefined;
    return name === undefined ? null : `${String(ref.type)} ${name}`;
  }
  return null;
}
