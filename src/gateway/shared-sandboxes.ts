import type { Logger } from '../util/logger.js';
import type { JsonRpcObject } from './forwarded-call.js';
import { Relisting } from './relisting.js';
import { SandboxPool, type Upstream, type UpstreamFactory } from './sandbox-pool.js';
import { isServerRequest } from './server-requests.js';

/**
 * The sandboxes of one server and the gateways that use them: one gateway under `hintbox run`,
 * one per client under `hintbox serve` (the clients of a server share its sandboxes). It owns
 * the pool and is the only reader of every upstream's messages, which it hands to the gateway
 * they belong to:
 *
 * - an answer, to the gateway whose id it carries (each gateway forwards under ids of its own:
 *   {@link listenerTag}); a progress notification likewise by its token (the relays send their
 *   own tokens upstream, so two clients' tokens never meet);
 * - a request of the server (sampling, elicitation, roots) to the gateway whose tool call is the
 *   oldest in flight in that sandbox (over stdio, a request says no more of what it belongs to);
 * - a log message to the gateway of the oldest request in flight there, or, outside any, to all;
 *   a resource update to all (each passes only its client's subscriptions);
 * - a list change, to the session, once (it lists again and updates every gateway), unless a
 *   held sandbox said it outside any call of any client.
 *
 * What is not a gateway's goes to the upstream's own SDK client (its numeric ids: handshake, lists).
 */

/** A gateway as the shared sandboxes see it. */
export interface UpstreamListener {
  /** Whether an id or a progress token is one its relays sent upstream. */
  owns(key: unknown): boolean;
  /** A message of an upstream the fanout chose it for: true when taken. */
  take(sandboxId: string, upstream: Upstream, message: JsonRpcObject): boolean;
  /** The order (a sequence, lower is older) of its oldest tool call (`callsOnly`) or request in flight in an upstream. */
  oldestIn(upstream: Upstream, callsOnly: boolean): number | undefined;
  /** A new upstream it may use (also each running one when it joins). */
  attach(sandboxId: string, upstream: Upstream): void;
  /** An upstream's connection ended: its calls there are answered. */
  upstreamClosed(upstream: Upstream): void;
}

export interface SharedSandboxesOptions {
  upstreams: UpstreamFactory;
  log: Logger;
  /** See `SandboxPoolOptions.onSandboxIdle`. */
  onSandboxIdle?: (sandbox: string) => Promise<void> | void;
  /** A server said its tools changed: the session lists them again (one listing at a time). */
  onToolsListChanged?: (from: Upstream) => Promise<void>;
  /** A server said its prompts or resources changed. */
  onOffersChanged?: (from: Upstream) => Promise<void>;
}

const LIST_CHANGES = new Set([
  'notifications/tools/list_changed',
  'notifications/prompts/list_changed',
  'notifications/resources/list_changed',
]);

/** The ids a gateway's relays use upstream begin `hintbox…:<tag>:`; its tag is unique in the process. */
let lastTag = 0;
export function listenerTag(): string {
  return `g${++lastTag}`;
}

export class SharedSandboxes {
  readonly pool: SandboxPool;
  private readonly listeners = new Set<UpstreamListener>();
  /** Every upstream served now, by sandbox id (each listener that joins is attached to them). */
  private readonly upstreams = new Map<Upstream, string>();
  private readonly toolsRelisting: Relisting;
  private readonly offersRelisting: Relisting;
  private closing = false;

  constructor(private readonly options: SharedSandboxesOptions) {
    this.pool = new SandboxPool({
      upstreams: options.upstreams,
      log: options.log,
      onUpstream: (id, upstream) => this.serve(id, upstream),
      ...(options.onSandboxIdle ? { onSandboxIdle: options.onSandboxIdle } : {}),
    });
    const stopped = (): boolean => this.closing;
    const relisting = (what: string, list?: (from: Upstream) => Promise<void>) =>
      new Relisting(what, (from) => list?.(from) ?? Promise.resolve(), options.log, stopped);
    this.toolsRelisting = relisting('tools', options.onToolsListChanged);
    this.offersRelisting = relisting('prompts and resources', options.onOffersChanged);
  }

  /** How many gateways use these sandboxes now. */
  get gateways(): number {
    return this.listeners.size;
  }

  /** A gateway joins: it is attached to every running upstream. Returns how it leaves. */
  join(listener: UpstreamListener): () => void {
    this.listeners.add(listener);
    for (const [upstream, id] of this.upstreams) listener.attach(id, upstream);
    return () => void this.listeners.delete(listener);
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
    this.upstreams.set(upstream, sandboxId);
    upstream.forwarded.take = (message) => this.dispatch(sandboxId, upstream, message);
    for (const listener of this.listeners) listener.attach(sandboxId, upstream);
    void upstream.closed.then(() => {
      this.upstreams.delete(upstream);
      for (const listener of [...this.listeners]) listener.upstreamClosed(upstream);
    });
  }

  /** Hands an upstream's message to whom it belongs (see the class); false: to the upstream's SDK client. */
  private dispatch(sandboxId: string, upstream: Upstream, m: JsonRpcObject): boolean {
    const listeners = [...this.listeners];
    const give = (listener: UpstreamListener | undefined): boolean => listener?.take(sandboxId, upstream, m) ?? false;
    if (m.method === undefined) {
      // The SDK client's own ids are numbers; a gateway's are strings. One of a gateway that has
      // left (or a cancelled call's late answer) is dropped.
      if (typeof m.id !== 'string') return false;
      return give(listeners.find((l) => l.owns(m.id))) || m.id.startsWith('hintbox');
    }
    const method = m.method;
    if (method === 'notifications/progress') return give(listeners.find((l) => l.owns(m.params?.progressToken)));
    if (LIST_CHANGES.has(method)) {
      if (m.id !== undefined) return true; // a request in disguise: dropped
      // A held sandbox runs only for calls: an announcement outside any (between an answer and its freeze) is dropped.
      if (this.pool.isHeld(upstream, sandboxId) && !listeners.some((l) => l.oldestIn(upstream, false) !== undefined)) {
        this.options.log.debug(`a held sandbox announced a list change outside a call: ignored`);
        return true;
      }
      const relisting = method === 'notifications/tools/list_changed' ? this.toolsRelisting : this.offersRelisting;
      relisting.announced(upstream);
      return true;
    }
    if (m.id !== undefined && isServerRequest(method)) {
      // Bound to the oldest tool call in flight there; with none, any gateway refuses it (or
      // answers roots/list); with no gateway at all, the upstream's SDK client does.
      return give(this.oldest(listeners, upstream, true) ?? listeners[0]);
    }
    if (method === 'notifications/cancelled') return listeners.some((l) => l.take(sandboxId, upstream, m));
    if (method === 'notifications/message') {
      const owner = this.oldest(listeners, upstream, false);
      if (owner) return give(owner);
      for (const listener of listeners) listener.take(sandboxId, upstream, m);
      return true;
    }
    if (method === 'notifications/resources/updated') {
      for (const listener of listeners) listener.take(sandboxId, upstream, m);
      return true;
    }
    return false;
  }

  private oldest(listeners: UpstreamListener[], upstream: Upstream, callsOnly: boolean): UpstreamListener | undefined {
    let found: UpstreamListener | undefined;
    let order = Infinity;
    for (const listener of listeners) {
      const seq = listener.oldestIn(upstream, callsOnly);
      if (seq !== undefined && seq < order) [found, order] = [listener, seq];
    }
    return found;
  }
}
