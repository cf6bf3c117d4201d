import { LoggingLevelSchema, type LoggingLevel } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../util/logger.js';
import type { JsonRpcObject } from '../mcp/json-rpc.js';
import { METHOD, NOTIFICATION } from '../mcp/methods.js';
import type { ForwardedRequest, RequestLifecycle } from './forwarded-request.js';
import { Relisting } from './relisting.js';
import { SandboxPool, type Upstream, type UpstreamFactory } from './sandbox-pool.js';
import { isServerRequest } from './server-requests.js';

/**
 * The sandboxes of one server and the gateways that use them: one gateway under `hintbox run`,
 * one per client under `hintbox serve` (the clients of a server share its sandboxes). It owns
 * the pool and is the only reader of every upstream's messages, which it hands to the gateway
 * they belong to:
 *
 * - an answer, to the pending request it answers, found by its id among the gateways' calls
 *   and reads (each gateway forwards under ids of its own: {@link listenerTag}), which passes it
 *   back to its client itself; a progress notification likewise by its token (the relays send
 *   their own tokens upstream, so two clients' tokens never meet);
 * - a request of the server (sampling, elicitation, roots) to the gateway with tool calls in
 *   flight in that sandbox when only one has (over stdio, a request says no more of what it
 *   belongs to); when the calls of several clients are in flight there it could be any one's,
 *   and is refused, never guessed;
 * - a log message to the gateway with requests in flight there when only one has (or when only
 *   one gateway is served); else it is dropped: it could be about another client's call;
 * - a resource update to all (each passes only its client's subscriptions);
 * - a list change, to the session, once (it lists again and updates every gateway), unless a
 *   held sandbox said it outside any call of any client.
 *
 * What is not a gateway's goes to the upstream's own SDK client (its numeric ids: handshake, lists).
 */

/** What the dispatcher asks of the forwarded requests of one kind (`RequestLifecycle`). */
export type ForwardedRequests = Pick<
  RequestLifecycle<ForwardedRequest>,
  'get' | 'answer' | 'progress' | 'busyIn' | 'upstreamClosed'
>;

/** A gateway as the shared sandboxes see it (its request relay). */
export interface SandboxClient {
  /** Its tool calls in flight: the dispatcher finds one by its upstream id and hands it its answer. */
  readonly calls: ForwardedRequests;
  /** Its reads, prompts and completions in flight, likewise. */
  readonly reads: ForwardedRequests;
  /** A message of an upstream that is no request's answer or progress, when the dispatcher chose it: true when taken. */
  fromServer(sandboxId: string, upstream: Upstream, message: JsonRpcObject): boolean;
}

export interface SharedSandboxesOptions {
  upstreams: UpstreamFactory;
  log: Logger;
  /** See `SandboxPoolOptions.onSandboxIdle`. */
  onSandboxIdle?: (sandbox: string) => Promise<void> | void;
  /** A server said its tools changed: the session lists them again (one listing at a time). */
  onToolsListChanged?: (from: Upstream) => Promise<void>;
  /** A server said its prompts or resources changed. */
  onPromptsOrResourcesChanged?: (from: Upstream) => Promise<void>;
  /**
   * A server's request refused because calls of several clients were in flight in its sandbox
   * (at most one a second; `more`: those refused since the last, unrecorded): for the audit trail.
   */
  onUnboundRequest?: (sandboxId: string, method: string, more: number) => void;
}

const LIST_CHANGES = new Set<string>([
  NOTIFICATION.toolsChanged,
  NOTIFICATION.promptsChanged,
  NOTIFICATION.resourcesChanged,
]);

/** The ids a gateway's relays use upstream begin `hintbox…:<tag>:`; its tag is unique in the process. */
let lastTag = 0;
export function listenerTag(): string {
  return `g${++lastTag}`;
}

export class SharedSandboxes {
  readonly pool: SandboxPool;
  private readonly listeners = new Set<SandboxClient>();
  /** Every upstream served now (each is told the logging level). */
  private readonly upstreams = new Set<Upstream>();
  private readonly toolsRelisting: Relisting;
  private readonly promptsAndResourcesRelisting: Relisting;
  private closing = false;
  private lastRefusalLog = 0;
  private refusedUnrecorded = 0;
  /** Each client's logging level, and the level each sandbox was last told. */
  private readonly levels = new Map<SandboxClient, LoggingLevel>();
  private readonly sentLevels = new Map<Upstream, LoggingLevel>();
  /** The clients subscribed to each resource URI. */
  private readonly subscribers = new Map<string, Set<SandboxClient>>();
  private levelId = 0;

  constructor(private readonly options: SharedSandboxesOptions) {
    this.pool = new SandboxPool({
      upstreams: options.upstreams,
      log: options.log,
      onUpstream: (id, upstream) => this.serve(id, upstream),
      ...(options.onSandboxIdle ? { onSandboxIdle: options.onSandboxIdle } : {}),
    });
    const stopped = (): boolean => this.closing;
    // A listing counts as a call in flight in its sandbox (`SandboxPool.serving`).
    const relisting = (what: string, list?: (from: Upstream) => Promise<void>) =>
      new Relisting(
        what,
        (from) => this.pool.serving(from, () => list?.(from) ?? Promise.resolve()),
        options.log,
        stopped,
      );
    this.toolsRelisting = relisting('tools', options.onToolsListChanged);
    this.promptsAndResourcesRelisting = relisting('prompts and resources', options.onPromptsOrResourcesChanged);
  }

  /** A gateway joins: the messages of every upstream that are its reach it from now on. Returns how it leaves. */
  join(listener: SandboxClient): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      this.levels.delete(listener);
      for (const [uri, subscribers] of this.subscribers) {
        if (subscribers.delete(listener) && subscribers.size === 0) this.subscribers.delete(uri);
      }
      this.tellLevel();
    };
  }

  /** A client is (or is no longer) subscribed to a resource (the sandbox answered its request). */
  subscribed(listener: SandboxClient, uri: string, now: boolean): void {
    const subscribers = this.subscribers.get(uri) ?? new Set();
    if (now && this.listeners.has(listener)) subscribers.add(listener);
    else subscribers.delete(listener);
    if (subscribers.size > 0) this.subscribers.set(uri, subscribers);
    else this.subscribers.delete(uri);
  }

  /**
   * Whether another client is subscribed to a resource: one client's unsubscribe then is not
   * sent on (the server's subscription is all of its clients'). The last one's is.
   */
  othersSubscribed(listener: SandboxClient, uri: string): boolean {
    return [...(this.subscribers.get(uri) ?? [])].some((other) => other !== listener);
  }

  /**
   * A client's `logging/setLevel`: every sandbox (and each started later) logs at the most
   * verbose level any of its clients asked for; each gateway passes its own client only its level
   * and above.
   */
  setLevel(listener: SandboxClient, level: LoggingLevel): void {
    if (this.listeners.has(listener)) this.levels.set(listener, level);
    this.tellLevel();
  }

  /** Serves a sandbox that is already running (see `SandboxPool.adopt`). */
  adopt(sandboxId: string, upstream: Upstream): void {
    this.pool.adopt(sandboxId, upstream);
  }

  async close(): Promise<void> {
    this.closing = true;
    this.listeners.clear();
    await this.pool.close();
  }

  private serve(sandboxId: string, upstream: Upstream): void {
    this.upstreams.add(upstream);
    upstream.forwarded.take = (message) => this.dispatch(sandboxId, upstream, message);
    this.tellLevel();
    void upstream.closed.then(() => {
      this.upstreams.delete(upstream);
      this.sentLevels.delete(upstream);
      for (const listener of [...this.listeners]) {
        listener.calls.upstreamClosed(upstream);
        listener.reads.upstreamClosed(upstream);
      }
    });
  }

  /** Sends each sandbox that logs the most verbose level its clients asked for, when it has another. */
  private tellLevel(): void {
    const order = LoggingLevelSchema.options;
    const asked = [...this.levels.values()].sort((a, b) => order.indexOf(a) - order.indexOf(b))[0];
    if (asked === undefined) return;
    for (const upstream of this.upstreams) {
      if (this.sentLevels.get(upstream) === asked || !upstream.client.getServerCapabilities()?.logging) continue;
      this.sentLevels.set(upstream, asked);
      void upstream.forwarded
        .send({
          jsonrpc: '2.0',
          id: `hintbox-level:${++this.levelId}`,
          method: METHOD.setLevel,
          params: { level: asked },
        })
        .catch(() => undefined);
    }
  }

  /** Hands an upstream's message to whom it belongs (see the class); false: to the upstream's SDK client. */
  private dispatch(sandboxId: string, upstream: Upstream, m: JsonRpcObject): boolean {
    if (m.method === undefined) {
      // The SDK client's own ids are numbers; a gateway's are strings. One of a gateway that has
      // left (or a cancelled request's late answer) is dropped. (Every answer comes here: found
      // without copying the listeners, whose set is not changed before the answer is handed on.)
      if (typeof m.id !== 'string') return false;
      for (const { calls, reads } of this.listeners) {
        const call = calls.get(m.id);
        if (call) {
          calls.answer(call, upstream, m);
          return true;
        }
        const read = reads.get(m.id);
        if (read) {
          reads.answer(read, upstream, m);
          return true;
        }
      }
      return m.id.startsWith('hintbox');
    }
    const listeners = [...this.listeners];
    const give = (listener: SandboxClient | undefined): boolean =>
      listener?.fromServer(sandboxId, upstream, m) ?? false;
    const method = m.method;
    if (method === NOTIFICATION.progress) {
      if (listeners.some((l) => l.calls.progress(upstream, m) || l.reads.progress(upstream, m))) return true;
      // A token of hintbox's whose request has ended: dropped.
      const token = m.params?.progressToken;
      return typeof token === 'string' && token.startsWith('hintbox');
    }
    if (LIST_CHANGES.has(method)) {
      if (m.id !== undefined) return true; // a request in disguise: dropped
      // A held sandbox runs only for calls: an announcement outside any (between an answer and its freeze) is dropped.
      if (this.pool.isHeld(upstream, sandboxId) && !listeners.some((l) => busyIn(l, upstream, false))) {
        this.options.log.debug(`a held sandbox announced a list change outside a call: ignored`);
        return true;
      }
      const relisting = method === NOTIFICATION.toolsChanged ? this.toolsRelisting : this.promptsAndResourcesRelisting;
      relisting.announced(upstream);
      return true;
    }
    if (m.id !== undefined && isServerRequest(method)) {
      // To the one gateway with calls in flight there; with none, any gateway refuses it (or
      // answers roots/list); with no gateway at all, the upstream's SDK client does.
      const busy = listeners.filter((l) => busyIn(l, upstream, true));
      if (busy.length > 1) return this.refuseUnbound(sandboxId, upstream, m);
      return give(busy[0] ?? listeners[0]);
    }
    if (method === NOTIFICATION.cancelled) return listeners.some((l) => l.fromServer(sandboxId, upstream, m));
    if (method === NOTIFICATION.message) {
      const busy = listeners.filter((l) => busyIn(l, upstream, false));
      if (listeners.length === 1 || busy.length === 1) return give(busy[0] ?? listeners[0]);
      this.options.log.debug(
        `a log message of sandbox ${sandboxId} with ${busy.length} clients' requests in flight: dropped`,
      );
      return true;
    }
    if (method === NOTIFICATION.resourceUpdated) {
      for (const listener of listeners) listener.fromServer(sandboxId, upstream, m);
      return true;
    }
    return false;
  }

  /**
   * A server's request while calls of several clients are in flight in its sandbox: which one
   * it is for cannot be known, so it is answered with an error (logged at most once a second).
   */
  private refuseUnbound(sandboxId: string, upstream: Upstream, m: JsonRpcObject): boolean {
    const now = Date.now();
    if (now - this.lastRefusalLog >= 1000) {
      this.lastRefusalLog = now;
      this.options.log.warn(
        `a server asked ${String(m.method)} while calls of several clients were in flight in its sandbox: refused (it cannot be bound to one)`,
      );
      this.options.onUnboundRequest?.(sandboxId, String(m.method), this.refusedUnrecorded);
      this.refusedUnrecorded = 0;
    } else this.refusedUnrecorded++;
    const message = 'hintbox: calls of several clients are in flight in this sandbox; a request cannot be bound to one';
    void upstream.forwarded
      .send({ jsonrpc: '2.0', id: m.id as string | number, error: { code: -32600, message } })
      .catch(() => undefined);
    return true;
  }
}

/** Whether a tool call of a client (`callsOnly`), or any request of its, is in flight in an upstream. */
function busyIn(client: SandboxClient, upstream: Upstream, callsOnly: boolean): boolean {
  return client.calls.busyIn(upstream) || (!callsOnly && client.reads.busyIn(upstream));
}
