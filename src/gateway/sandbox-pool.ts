import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { SplitTransport } from '../mcp/split-transport.js';
import type { Logger } from '../util/logger.js';
import { SandboxActivity, type SandboxFreezer } from './sandbox-activity.js';

/** A connected upstream: the MCP client of one running sandbox. */
export interface Upstream {
  /** An SDK client, connected (handshake, listings). */
  readonly client: Client;
  /** The same connection for the relay: forwarded calls, their answers, progress, list changes. */
  readonly forwarded: SplitTransport;
  /** Resolves when the upstream's connection ends, expectedly or not. */
  readonly closed: Promise<void>;
  /** Text that explains a death, e.g. the server's last stderr lines. */
  diagnostics(): string;
  close(): Promise<void>;
  /** How to freeze the sandbox (absent: it cannot be; tests of routing). */
  readonly freezer?: SandboxFreezer;
  /**
   * Whether it may run only while a call is in flight in it: it is thawed before a call and
   * frozen when its last call ends. Default true when it has a freezer.
   */
  readonly holdBetweenCalls?: boolean;
}

/** Starts (or restarts) the upstream of a sandbox. */
export type UpstreamFactory = (sandboxId: string) => Promise<Upstream>;

export interface SandboxPoolOptions {
  upstreams: UpstreamFactory;
  log: Logger;
  /** Every upstream the pool serves, once, when it is adopted: e.g. the relay listens to it. */
  onUpstream?: (sandboxId: string, upstream: Upstream) => void;
  /**
   * The last call in flight in a sandbox ended (and a held sandbox is frozen again): e.g. end
   * its database sessions. The sandbox's next call waits until it is done.
   */
  onSandboxIdle?: (sandbox: string) => Promise<void> | void;
}

interface UpstreamSlot {
  current?: Promise<Upstream>;
  /** The upstream `current` resolved to, when it was adopted: while `current` is still `promise`, it serves. */
  adopted?: { promise: Promise<Upstream>; upstream: Upstream };
}

/**
 * The running sandboxes of one server, by class: started on first use (or handed over by the
 * session), started again after a death, and, per upstream, the count of calls in flight that
 * thaws and freezes a held sandbox (`SandboxActivity`). Shared by the gateways of every client
 * (`SharedSandboxes` reads each upstream it serves: `onUpstream`).
 */
export class SandboxPool {
  private readonly slots = new Map<string, UpstreamSlot>();
  /** Calls in flight per upstream (a restarted sandbox is a new upstream with a count of its own). */
  private readonly activities = new WeakMap<Upstream, SandboxActivity>();
  /** The sandbox each adopted upstream serves. */
  private readonly sandboxOf = new WeakMap<Upstream, string>();
  /** Sandboxes frozen between calls from now on, whatever their upstream says (the server lost trust). */
  private readonly heldFromNow = new Set<string>();
  private closing = false;

  constructor(private readonly options: SandboxPoolOptions) {}

  /** Serves a sandbox that is already running (the discovery sandbox, sandboxes started eagerly). */
  adopt(sandboxId: string, upstream: Upstream): void {
    if (this.closing) {
      // Handed over after the pool closed (a start that ended late): nobody will serve it.
      void upstream.close().catch(() => undefined);
      return;
    }
    const slot = this.slot(sandboxId);
    const current = Promise.resolve(upstream);
    slot.current = current;
    slot.adopted = { promise: current, upstream };
    this.sandboxOf.set(upstream, sandboxId);
    this.options.onUpstream?.(sandboxId, upstream);
    void upstream.closed.then(() => {
      if (slot.current !== current) return;
      slot.current = undefined;
      if (this.closing) return;
      const why = upstream.diagnostics();
      this.options.log.warn(
        `sandbox ${sandboxId} died${why ? `:\n${why}` : ''}; it will be started again on the next call`,
      );
      void upstream.close().catch(() => undefined);
    });
  }

  /**
   * The upstream of a class when it runs and is connected now, without waiting (the hot path of
   * every call); undefined when it must be started or awaited (`upstreamFor`).
   */
  runningUpstream(sandboxId: string): Upstream | undefined {
    const slot = this.slots.get(sandboxId);
    const adopted = slot?.adopted;
    if (!adopted || slot.current !== adopted.promise || !adopted.upstream.forwarded.connected) return undefined;
    return adopted.upstream;
  }

  /** The running upstream of a class, started (or started again) when there is none. */
  async upstreamFor(sandboxId: string, again = false): Promise<Upstream> {
    const slot = this.slot(sandboxId);
    const current = slot.current;
    if (current) {
      const upstream = await current;
      if (upstream.forwarded.connected || again) return upstream;
      // Its connection is gone (it died, or was removed after a failed freeze) and the slot has
      // not heard yet: start a new one rather than fail the call.
      if (slot.current === current) slot.current = undefined;
      return this.upstreamFor(sandboxId, true);
    }
    this.options.log.info(`starting sandbox ${sandboxId}`);
    const starting = this.options.upstreams(sandboxId).then((upstream) => {
      if (slot.current === starting) this.adopt(sandboxId, upstream);
      return upstream;
    });
    slot.current = starting;
    starting.catch(() => {
      if (slot.current === starting) slot.current = undefined;
    });
    return starting;
  }

  /**
   * A sandbox that stopped answering (a call of it timed out with no other call in it): stopped,
   * so that its class's next call starts a fresh one instead of waiting on it too.
   */
  recycle(sandboxId: string, upstream: Upstream, why: string): void {
    const slot = this.slots.get(sandboxId);
    const current = slot?.current;
    if (!slot || !current) return;
    void current.then(
      (running) => {
        if (running !== upstream || slot.current !== current || this.closing) return;
        slot.current = undefined;
        this.options.log.warn(`sandbox ${sandboxId} ${why}: stopped; the next call starts a fresh one`);
        void upstream.close().catch(() => undefined);
      },
      () => undefined,
    );
  }

  /** Whether a sandbox is held: frozen whenever no call is in flight in it. */
  isHeld(upstream: Upstream, sandboxId: string): boolean {
    return this.activityOf(upstream, sandboxId).held;
  }

  /**
   * Runs a request of hintbox's own to a sandbox it serves (a listing). In a sandbox that runs
   * free between calls it counts as a call in flight: the work done once the sandbox is idle
   * (ending its database sessions) waits until it is over, so that the end of a call never
   * cuts what the listing runs. A held sandbox is never thawed (nor kept thawed) for it: its
   * server runs only inside calls, so such a listing is answered only while a call runs there.
   * An upstream the pool does not serve runs `work` as it is.
   */
  async serving<T>(upstream: Upstream, work: () => Promise<T>): Promise<T> {
    const sandboxId = this.sandboxOf.get(upstream);
    if (sandboxId === undefined) return work();
    const activity = this.activityOf(upstream, sandboxId);
    if (activity.held) return work();
    const entered = activity.enter();
    try {
      await entered;
      return await work();
    } finally {
      activity.leave();
    }
  }

  /** The count of calls in flight in this upstream, made when it is first used. */
  activityOf(upstream: Upstream, sandboxId: string): SandboxActivity {
    let activity = this.activities.get(upstream);
    if (!activity) {
      let ended = false;
      void upstream.closed.then(() => (ended = true));
      activity = new SandboxActivity({
        ...(upstream.freezer ? { freezer: upstream.freezer } : {}),
        holdBetweenCalls:
          upstream.freezer !== undefined && (upstream.holdBetweenCalls !== false || this.heldFromNow.has(sandboxId)),
        onFreezeFailed: (error) => {
          // A sandbox that died (or is being removed) cannot be frozen, and need not be.
          if (ended || this.closing) return this.options.log.debug(`sandbox ${sandboxId} ended: no freeze`);
          // Fail closed: a sandbox that cannot be frozen must not run on between calls, nor one
          // whose thaw went unanswered hold a call sent into it.
          this.options.log.error(
            `could not freeze or thaw sandbox ${sandboxId} (${error.message}): removing it; it will be started again on the next call`,
          );
          void upstream.close().catch(() => undefined);
        },
        ...(this.options.onSandboxIdle ? { onIdle: () => this.options.onSandboxIdle?.(sandboxId) } : {}),
      });
      this.activities.set(upstream, activity);
    }
    return activity;
  }

  /**
   * From now on these sandboxes are frozen between calls, even those their upstream let run
   * free (`hold: false`): their server lost trust (a hint violation).
   */
  async holdBetweenCallsFromNow(sandboxIds: readonly string[]): Promise<void> {
    for (const id of sandboxIds) this.heldFromNow.add(id);
    const running = await this.runningUpstreams(sandboxIds);
    await Promise.all(running.map(([id, upstream]) => this.activityOf(upstream, id).holdBetweenCalls()));
  }

  /**
   * Runs `work` with these sandboxes frozen (calls in flight included) and no call going into
   * them meanwhile: for hintbox's own reads of what they can write (the preview's copies).
   * Sandboxes held at their gate run nothing and need no freeze. Rejects, without running
   * `work`, when one cannot be frozen.
   */
  async holdFrozenDuring<T>(sandboxIds: readonly string[], work: () => Promise<T>): Promise<T> {
    // In one order (by id), so that two holds never wait for each other.
    const running = await this.runningUpstreams(sandboxIds);
    const nest = (i: number): Promise<T> => {
      const next = running[i];
      if (!next) return work();
      const [id, upstream] = next;
      return this.activityOf(upstream, id).holdFrozenDuring(() => nest(i + 1));
    };
    return nest(0);
  }

  /** Closes every upstream. */
  async close(): Promise<void> {
    this.closing = true;
    const upstreams = [...this.slots.values()].flatMap((s) => (s.current ? [s.current] : []));
    this.slots.clear();
    await Promise.all(upstreams.map((p) => p.then((u) => u.close()).catch(() => undefined)));
  }

  /** The running upstreams, by sandbox id (those still starting are waited for). */
  private async runningUpstreams(sandboxIds?: readonly string[]): Promise<[string, Upstream][]> {
    const ids = [...(sandboxIds ?? this.slots.keys())].sort();
    const found = await Promise.all(
      ids.map(async (id) => {
        const upstream = await this.slots.get(id)?.current?.catch(() => undefined);
        return upstream ? ([[id, upstream]] as [string, Upstream][]) : [];
      }),
    );
    return found.flat();
  }

  private slot(sandboxId: string): UpstreamSlot {
    let slot = this.slots.get(sandboxId);
    if (!slot) {
      slot = {};
      this.slots.set(sandboxId, slot);
    }
    return slot;
  }
}
