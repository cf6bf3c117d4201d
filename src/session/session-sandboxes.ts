import type { AuditLog } from '../audit/audit-record.js';
import { databaseAdminUrl } from '../database/database-env.js';
import type { SessionDatabase, SessionDatabaseOptions } from '../database/session-database.js';
import {
  sandboxUserIds,
  type EgressRequest,
  type HeldSandbox,
  type PreparedImage,
  type SandboxEngine,
  type SandboxSpec,
  type SessionIdentity,
  type StartedSandbox,
} from '../engine/sandbox-engine.js';
import type { Upstream } from '../gateway/gateway.js';
import { sandboxRoots, upstreamClientCapabilities } from '../gateway/server-requests.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { grantCanChange, type SandboxGrant } from '../policy/plan-sandboxes.js';
import type { ServerTrustState } from '../policy/server-trust.js';
import type { Profile } from '../profile/load-profile.js';
import { delay } from '../util/delay.js';
import { assertNoNestedMounts } from '../sandbox/nested-mounts.js';
import { assertNoSpecialFiles } from '../sandbox/special-files.js';
import { Previewer } from '../sandbox/preview.js';
import type { Logger } from '../util/logger.js';

/** A sandbox whose server waits at the gate. */
export interface HeldUpstream {
  /** Lets the server run and connects to it. */
  release(): Promise<Upstream>;
  /** Removes the sandbox; its server never ran. */
  remove(): Promise<void>;
}

export interface SessionSandboxesOptions {
  engine: SandboxEngine;
  profile: Profile;
  identity: SessionIdentity;
  trust: ServerTrustState;
  log: Logger;
  /** The user its sandboxes run as when the profile names none (`defaultSandboxUser`), looked up once per session. */
  defaultUser: { uid: number; gid: number } | undefined;
  /** Told of each request a sandbox's egress proxy decided. */
  onEgress?: (sandboxId: string, request: EgressRequest) => void;
  /** Told when a sandbox's gate killed it because it ran while frozen (`text`: why). */
  onWoken?: (sandboxId: string, text: string) => void;
  /** Where sandbox starts and stops are recorded. */
  audit?: Pick<AuditLog, 'recordEvent'>;
}

/**
 * Every sandbox of one session, from its start until it is handed to the gateway: the grants of
 * its classes, the ones started (not yet served), the ones held at their gate, starts under way.
 * The one place a sandbox is created: the session's identity, image, user and database access
 * go in here. Once closed, a start that ends removes what it made.
 */
export class SessionSandboxes {
  /** The grant of each class, as the latest plan gave it. */
  readonly grants = new Map<string, SandboxGrant>();
  /** Sandboxes whose server runs, not yet handed to a gateway. */
  private readonly started = new Map<string, Upstream>();
  /**
   * Sandboxes of classes that can change something, started and held at their gate until the
   * first call allowed into them (the gateway's start of that class releases it).
   */
  private readonly heldAtGate = new Map<string, HeldUpstream>();
  private readonly generations = new Map<string, number>();
  /** Starts of planned classes under way in the background, by class. */
  private readonly underWay = new Map<string, Promise<unknown>>();
  /** Starts (and other work) under way: `close` waits for them. */
  private readonly pending = new Set<Promise<unknown>>();
  private closed = false;
  /** The image every sandbox runs, once prepared. */
  private image?: PreparedImage;
  /** Roles and socket relays, when the profile has a database. */
  database?: SessionDatabase;

  constructor(private readonly options: SessionSandboxesOptions) {}

  get isClosed(): boolean {
    return this.closed;
  }

  /** Throws when the session is closed (a start that ends after it must not go on). */
  assertOpen(): void {
    if (this.closed) throw new Error(`session ${this.options.identity.sessionId} is closed`);
  }

  /**
   * What comes before any sandbox: the mounts checked (nested mount points, special files), the
   * profile's database opened if it has one (roles and socket relays: one that cannot be reached
   * or is not prepared stops the start; its admin URL by default read from the variable the
   * profile names), and the image prepared, which every sandbox then runs.
   */
  async prepare(options: {
    rebuildImage: boolean;
    databaseAdminUrl: string | undefined;
    onDatabaseViolation: SessionDatabaseOptions['onViolation'];
  }): Promise<PreparedImage> {
    const { profile, identity, log, engine } = this.options;
    assertNoNestedMounts(profile, engine);
    await assertNoSpecialFiles(profile);
    if (profile.database) {
      // The roles' and relays' code is loaded only for a profile with a database.
      const { SessionDatabase } = await import('../database/session-database.js');
      const database = await SessionDatabase.open({
        adminUrl: options.databaseAdminUrl ?? databaseAdminUrl({ file: profile.file, database: profile.database }),
        section: profile.database,
        callTimeoutMs: profile.timeouts.call * 1000,
        identity,
        log,
        onViolation: options.onDatabaseViolation,
      });
      // A cold start's session may be disposed while this ran: its relays and roles go now.
      if (this.closed) await database.close();
      this.assertOpen();
      this.database = database;
    }
    this.image = await engine.prepareImage(profile, { rebuild: options.rebuildImage });
    return this.image;
  }

  /** `close` waits for this (bounded by the start timeout). */
  track(work: Promise<unknown>): void {
    const settled: Promise<unknown> = work.then(
      () => this.pending.delete(settled),
      () => this.pending.delete(settled),
    );
    this.pending.add(settled);
  }

  /**
   * Does server code in a sandbox of this grant run only while a call allowed into it is in
   * flight? Yes when the grant can change something, unless the profile (of a trusted server:
   * checked at load) lets it run free and the server has not broken a hint.
   */
  holdsUntilCalled(grant: SandboxGrant): boolean {
    return (this.options.profile.hold || this.options.trust.reason !== undefined) && grantCanChange(grant);
  }

  /** The spec of a sandbox class (a preview's too). */
  spec(id: string, grant: SandboxGrant, database?: SandboxSpec['database']): SandboxSpec {
    if (!this.image) throw new Error(`session ${this.options.identity.sessionId}: the server's image is not ready yet`);
    return {
      session: this.options.identity,
      profile: this.options.profile,
      sandboxId: id,
      grant,
      command: this.image.command,
      imageId: this.image.id,
      ...(this.options.defaultUser ? { defaultUser: this.options.defaultUser } : {}),
      ...(database ? { database } : {}),
      clientCapabilities: upstreamClientCapabilities(this.options.profile.serverRequests),
      ...(grant.network === 'egress'
        ? { onEgress: (request: EgressRequest) => this.options.onEgress?.(id, request) }
        : {}),
    };
  }

  isStarted(id: string): boolean {
    return this.started.has(id);
  }

  keepStarted(id: string, upstream: Upstream): void {
    this.started.set(id, upstream);
  }

  keepHeld(id: string, held: HeldUpstream): void {
    this.heldAtGate.set(id, held);
  }

  /** Closes a started sandbox the plan no longer has. */
  async dropStarted(id: string): Promise<void> {
    const upstream = this.started.get(id);
    this.started.delete(id);
    await upstream?.close();
  }

  /** The classes held at their gate. */
  heldIds(): string[] {
    return [...this.heldAtGate.keys()];
  }

  /** Hands the started sandboxes over (to a gateway): they are no longer this object's to close. */
  takeStarted(): Map<string, Upstream> {
    const started = new Map(this.started);
    this.started.clear();
    return started;
  }

  /** The upstream of class `id`: the one held at its gate since the start, else a new one. */
  async start(id: string): Promise<Upstream> {
    const kept = this.started.get(id);
    if (kept) {
      this.started.delete(id); // handed over
      return kept;
    }
    const waiting = this.heldAtGate.get(id);
    if (waiting) {
      this.heldAtGate.delete(id);
      return waiting.release();
    }
    // Being started in the background (a cold start's planned sandboxes): that one, not a second.
    const underWay = this.underWay.get(id);
    if (underWay) {
      await underWay.catch(() => undefined);
      return this.start(id);
    }
    return (await this.hold(id)).release();
  }

  /** Marks the start of class `id` as under way until `work` settles: `start(id)` waits for it. */
  starting<T>(id: string, work: Promise<T>): Promise<T> {
    const settled = work.finally(() => {
      if (this.underWay.get(id) === settled) this.underWay.delete(id);
    });
    this.underWay.set(id, settled);
    return settled;
  }

  /**
   * Creates and starts a sandbox of class `id` whose server is held at the gate: nothing of
   * the image runs until `release`. Tracked until it settles, so that `close` can wait for it.
   */
  hold(id: string): Promise<HeldUpstream> {
    const holding = this.create(id);
    this.track(holding);
    return holding;
  }

  /** Closes every sandbox not handed over, waits for starts under way, and removes what is left by label. */
  async close(timeoutMs: number): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.closeKept();
    // Starts under way see `closed` when they end and remove what they made; wait for them
    // (bounded) so that nothing is created after the removal below.
    await Promise.race([Promise.allSettled([...this.pending]), delay(timeoutMs)]);
    // Whatever was started and not tracked (a start cut short): remove by label.
    const { engine, identity, log } = this.options;
    await engine
      .removeSession(identity.sessionId)
      .catch((error: Error) =>
        log.warn(`could not remove the sandboxes of session ${identity.sessionId}: ${error.message}`),
      );
  }

  /** Closes the sandboxes kept here (not yet handed over). */
  async closeKept(): Promise<void> {
    const started = [...this.started.values()];
    const held = [...this.heldAtGate.values()];
    this.started.clear();
    this.heldAtGate.clear();
    await Promise.all([
      ...started.map((u) => u.close().catch(() => undefined)),
      ...held.map((h) => h.remove().catch(() => undefined)),
    ]);
  }

  private async create(id: string): Promise<HeldUpstream> {
    this.assertOpen();
    const { profile, engine, log, identity } = this.options;
    const grant = this.grants.get(id);
    if (!grant) throw new Error(`no sandbox ${id} in the plan`);
    // The role and relay are made on the class's first start and reused by its restarts.
    const database =
      grant.database && this.database
        ? await this.database.access(id, grant.database, sandboxUserIds(profile, this.options.defaultUser))
        : undefined;
    this.assertOpen();
    // Restarts get a fresh name: the dead container may still be on its way out.
    const generation = this.generations.get(id) ?? 0;
    this.generations.set(id, generation + 1);
    const held: HeldSandbox = await engine.hold(
      { ...this.spec(id, grant, database), ...(generation > 0 ? { generation } : {}) },
      { log: log.child(`${profile.name}/${id}`), startTimeoutMs: profile.timeouts.start * 1000 },
    );
    if (this.closed) {
      await held.remove();
      this.assertOpen();
    }
    return {
      remove: () => held.remove(),
      release: async () => {
        if (this.closed) {
          await held.remove();
          this.assertOpen();
        }
        const sandbox: StartedSandbox = await held.release();
        void sandbox.woken?.then((text) => this.options.onWoken?.(id, text));
        this.answerRoots(sandbox);
        const audit = this.options.audit;
        if (audit?.recordEvent) {
          const event = {
            session: identity.sessionId,
            server: profile.name,
            sandbox: id,
            container: sandbox.containerId,
          };
          audit.recordEvent({ type: 'sandbox.start', ...event });
          void sandbox.closed.then(() => audit.recordEvent?.({ type: 'sandbox.stop', ...event }));
        }
        return {
          client: sandbox.client,
          forwarded: sandbox.forwarded,
          closed: sandbox.closed,
          diagnostics: () => sandbox.stderrTail(),
          close: () => sandbox.remove(),
          freezer: { freeze: (cancel) => sandbox.freeze(cancel), thaw: () => sandbox.thaw() },
          holdBetweenCalls: this.holdsUntilCalled(grant),
        };
      },
    };
  }

  /** Before the gateway listens to a started sandbox (a server may ask at once): its folders, when asked. */
  private answerRoots(sandbox: StartedSandbox): void {
    const { profile } = this.options;
    if (profile.serverRequests.roots) {
      sandbox.client.setRequestHandler(ListRootsRequestSchema, () => ({ roots: sandboxRoots(profile.mounts) }));
    }
  }

  /**
   * Dry runs of calls, in throwaway sandboxes of this session over copies of the writable mounts
   * (no network). The session's sandboxes that can write a copied folder are frozen while it is
   * copied (`freezeDuring`: the gateway's, so that no call goes into them meanwhile).
   */
  previewer(freezeDuring: <T>(sandboxIds: readonly string[], work: () => Promise<T>) => Promise<T>): Previewer {
    const { profile, engine, log } = this.options;
    return new Previewer({
      engine,
      log,
      grantOf: (id) => this.grants.get(id),
      specFor: (id, grant) => ({ ...this.spec(id, grant), preview: true }),
      onStarted: (sandbox) => this.answerRoots(sandbox),
      startTimeoutMs: profile.timeouts.start * 1000,
      holdWriters: (sources, work) => {
        const writers = [...this.grants]
          .filter(([, grant]) => grant.mounts.some((m) => !m.readOnly && sources.includes(m.source)))
          .map(([id]) => id);
        return freezeDuring(writers, work);
      },
    });
  }
}
