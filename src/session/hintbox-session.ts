import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { Gateway, SharedSandboxes, type Upstream } from '../gateway/gateway.js';
import type { RejectedTool } from '../catalog/discover-tools.js';
import { EarlyAnnouncements } from '../catalog/early-announcements.js';
import { grantCanChange, planSandboxes, type SandboxPlan } from '../policy/plan-sandboxes.js';
import { ceilingOf } from '../profile/profile-ceiling.js';
import type { Profile } from '../profile/load-profile.js';
import { sandboxUserIds, type SessionIdentity } from '../engine/sandbox-engine.js';
import { parseEgressHosts } from '../policy/egress-hosts.js';
import { HintViolations } from './hint-violations.js';
import { assertWritableMounts, defaultSandboxUser } from '../sandbox/mount-owners.js';
import type { CallGuard } from '../gateway/call-guard.js';
import { lockedDefinitions, type LockFile } from '../approvals/lock-file.js';
import type { DefinitionSource } from '../console/console-server.js';
import { ServerTrustState } from '../policy/server-trust.js';
import type { PinnedDefinition } from '../policy/tool-pin.js';
import { approvedInstructions, warnIfInstructionsDiffer } from './guarded-tools.js';
import { SessionSandboxes } from './session-sandboxes.js';
import type { GatewaySettings, SessionOptions } from './session-options.js';
import { newSessionId, sessionIdentity } from '../util/session-identity.js';
import { aborted } from '../util/aborted.js';
import { listValidTools, startDiscovery, startPlannedSandboxes } from './start-sandboxes.js';
import { sessionGuardOf } from './session-guard.js';
import { databaseCallHooks } from './database-violation.js';
import { SessionPromptsAndResources } from './session-prompts-and-resources.js';
import { routesOf, type ToolRoutes } from './tool-routes.js';
import { definitionSourceOf } from './definition-source.js';
import { egressWatch } from './egress-watch.js';
import { ColdStart } from './cold-start.js';
export type { GatewaySettings, SessionOptions } from './session-options.js';

/** The tools a session serves, what the server listed that was left out, and their plan: replaced together. */
type ToolListing = { tools: Tool[]; rejected: RejectedTool[]; plan: SandboxPlan };

/**
 * One server under hintbox: it orders the start (checks, database, image, discovery, plan,
 * sandboxes: `SessionSandboxes` owns them), keeps the tools and the server's trust, and makes
 * the gateways: one under `hintbox run`, one per client under `hintbox serve`, all over the
 * same running sandboxes (`SharedSandboxes`), each with its own guard (caller, tags, the person
 * asked). Created by `HintboxSession.open` (or `openFromLock`); disposing it removes every
 * sandbox it made (also those of failed starts).
 */
export class HintboxSession implements AsyncDisposable {
  readonly sessionId: string;
  readonly identity: SessionIdentity;
  instructions?: string;
  /** The server's trust in this session: one owner, shared with the call guard. */
  private readonly trust: ServerTrustState;
  private readonly sandboxes: SessionSandboxes;
  /** Its prompts, resources and templates (`promptsAndResources.listed`: as the server listed them last). */
  readonly promptsAndResources: SessionPromptsAndResources;
  /** Set by the first `dispose`: every later one waits for the same teardown. */
  private closing?: Promise<void>;
  /** The running sandboxes, shared by the gateways; the session lists again when they say so. */
  private readonly shared: SharedSandboxes;
  /** The gateways served now, each with its settings and guard. */
  private readonly gateways = new Map<Gateway, { settings: GatewaySettings; guard?: CallGuard }>();
  /** A trusted server without a lock file: its tools as first listed in this run (trust on first use). */
  private readonly firstSeen = new Map<string, PinnedDefinition>();
  /** What the discovery sandbox announced before a gateway listened to it: listed again before serving. */
  private readonly early = new EarlyAnnouncements<Upstream>();
  private cold?: ColdStart; // set by `openFromLock` only
  private listing: ToolListing;
  private readonly violations: HintViolations;

  private constructor(
    private readonly options: SessionOptions,
    /** False for a session that only lists (approve, plan, install): its one sandbox mounts everything read-only. */
    serves = true,
  ) {
    // Who its sandboxes run as, looked up once: a workspace that user cannot write stops a run here, before anything starts.
    const defaultUser = defaultSandboxUser(options.profile);
    if (serves) assertWritableMounts(options.profile, sandboxUserIds(options.profile, defaultUser));
    const network = options.profile.network;
    this.listing = { tools: [], rejected: [], plan: planSandboxes([], ceilingOf(options.profile)) };
    this.sessionId = options.sessionId ?? newSessionId();
    this.identity = sessionIdentity(this.sessionId);
    this.trust = new ServerTrustState(options.profile.trust);
    this.trust.onLost((reason) => this.distrust(reason));
    this.promptsAndResources = new SessionPromptsAndResources({
      profile: options.profile,
      session: this.sessionId,
      trust: this.trust,
      log: options.log,
      timeoutMs: () => options.profile.timeouts.start * 1000,
      served: () => [...this.gateways].map(([gateway, { settings }]) => ({ gateway, approvals: settings.approvals })),
    });
    this.sandboxes = new SessionSandboxes({
      engine: options.engine,
      profile: options.profile,
      identity: this.identity,
      trust: this.trust,
      log: options.log,
      defaultUser,
      onEgress: egressWatch({
        server: options.profile.name,
        session: this.sessionId,
        backend: typeof network === 'object' ? parseEgressHosts(network.backend) : [],
        toolsDuring: (sandbox, from, to) =>
          [...this.gateways.keys()].flatMap((gateway) => gateway.toolsDuring(sandbox, from, to)),
        plan: () => this.plan,
        violated: (sandboxId, text) => this.violations.hint(sandboxId, text),
        log: options.log,
        ...(options.audit ? { audit: options.audit } : {}),
      }),
      onWoken: (sandboxId, text) => this.violations.hint(sandboxId, `held until called: ${text}`), // broke its hold
      ...(options.audit ? { audit: options.audit } : {}),
    });
    this.violations = new HintViolations({
      server: options.profile.name,
      session: this.sessionId,
      trust: this.trust,
      grants: this.sandboxes.grants,
      plan: () => this.plan,
      gateways: () => this.gateways,
      log: options.log,
      ...(options.audit ? { audit: options.audit } : {}),
    });
    this.shared = new SharedSandboxes({
      upstreams: (id) => this.sandboxes.start(id),
      log: options.log,
      // Looked up at each call (a cold start opens it later); no database: no idle step after each call.
      onSandboxIdle:
        options.profile.database && databaseCallHooks(() => this.sandboxes.database, options.log).onSandboxIdle,
      onToolsListChanged: (from) => this.relist(from),
      onPromptsOrResourcesChanged: (from) => this.promptsAndResources.relist(from),
      onUnboundRequest: (sandbox, method, more) =>
        this.promptsAndResources.refusedUnbound(options.audit, sandbox, method, more),
    });
  }

  /**
   * Builds the image if needed, discovers the tools in the strictest sandbox, plans, and
   * (with `startAll`) starts every planned sandbox in parallel. On failure, or when `signal`
   * aborts, everything the session started is removed (`dispose`) before it rejects.
   */
  static async open(options: SessionOptions & { startAll: boolean }): Promise<HintboxSession> {
    const session = new HintboxSession(options, options.startAll);
    const { signal } = options;
    const stop = (): void => void session.dispose();
    signal?.addEventListener('abort', stop, { once: true });
    try {
      signal?.throwIfAborted();
      const start = session.discoverAndPlan(options.startAll);
      // `dispose` waits for it (bounded by the start timeout): nothing it makes outlives the session.
      session.sandboxes.track(start);
      await (signal ? Promise.race([start, aborted(signal)]) : start);
      return session;
    } catch (error) {
      await session.dispose();
      throw error;
    } finally {
      signal?.removeEventListener('abort', stop);
    }
  }

  /**
   * A cold start from the lock file: the session is served at once with the locked tools (their
   * plan and routes; the approved instructions), while the image is built if needed, discovery
   * runs and every planned sandbox starts in the background (`verified`). A gateway created
   * meanwhile holds every call until then, and then serves what the running server turned out
   * to list: a tool that differs from its lock entry is hidden and refused as on any start, and
   * the client is told the list changed. When verification fails, the caller disposes the
   * session. `deferVerification`: the discovery begins only at {@link verify} (serve starts
   * many servers a few at a time); until then the session serves from the lock all the same.
   */
  static openFromLock(options: SessionOptions & { lock: LockFile; deferVerification?: boolean }): HintboxSession {
    const session = new HintboxSession(options);
    options.signal?.addEventListener('abort', () => void session.dispose(), { once: true });
    session.instructions = options.lock.instructions.text ?? undefined;
    session.adoptTools(lockedDefinitions(options.lock), []);
    session.promptsAndResources.adoptLocked(options.lock);
    session.cold = new ColdStart(() => {
      const discovery = session.discoverAndPlan(true, true);
      session.sandboxes.track(discovery); // `dispose` waits for it to settle
      return discovery;
    });
    if (!options.deferVerification) void session.cold.begin();
    return session;
  }

  /** A cold start's verification: the discovery, then the serving of the verified server too (else undefined). */
  get verified(): Promise<void> | undefined {
    return this.cold?.verified;
  }

  /** Begins a cold start's deferred verification; resolves once the server is discovered (undefined: not cold). */
  verify(): Promise<void> | undefined {
    return this.cold?.begin();
  }

  get tools(): readonly Tool[] {
    return this.listing.tools;
  }

  /** What the server listed last that was left out (malformed). */
  get rejected(): readonly RejectedTool[] {
    return this.listing.rejected;
  }

  get plan(): SandboxPlan {
    return this.listing.plan;
  }

  get profile(): Profile {
    return this.options.profile;
  }

  /**
   * A gateway over this session's sandboxes (routes by the plan), for one client; several may
   * be served at once. Close it with {@link closeGateway}.
   */
  createGateway(settings: GatewaySettings = {}): Promise<Gateway> {
    const { log } = this.options;
    const { routed, guarded } = this.routes(settings);
    const guard = sessionGuardOf({
      profile: this.profile,
      session: this.sessionId,
      trust: this.trust,
      sandboxes: this.sandboxes,
      holdFrozenDuring: (ids, work) => this.shared.pool.holdFrozenDuring(ids, work),
      settings,
      guarded,
      onApproved: () => void gateway.announceToolListChanged(),
      log,
    });
    // Instructions reach the client only as approved (the lock file), like tools; without approvals, never.
    const approved = settings.approvals
      ? approvedInstructions({ profile: this.profile, instructions: this.instructions, lock: settings.approvals, log })
      : undefined;
    // A client shown fewer tools than the server lists is told why, and what the person must do.
    const instructions = [approved, guard?.hiddenToolsNote()].filter((t) => t !== undefined).join('\n\n') || undefined;
    // A cold start: the running server's tools replace the locked ones once discovery has
    // answered, and its sandboxes are served; this gateway's calls wait for both. A gateway
    // made later (another client) is served the verified server at once.
    const cold = this.cold?.pending ? this.cold : undefined;
    const verified = cold?.verified.then((): Promise<void> => this.serveVerified(gateway, settings));
    // The run waits for this one (serving the verified server may fail too: the run ends then).
    if (cold && verified) cold.verified = verified;
    for (const [id, upstream] of this.sandboxes.takeStarted()) this.shared.adopt(id, upstream);
    const gateway: Gateway = new Gateway({
      ...(verified ? { verified } : {}),
      serverName: this.profile.name,
      ...this.promptsAndResources.gatewayOptions(settings),
      tools: routed,
      shared: this.shared,
      log,
      callTimeoutMs: this.profile.timeouts.call * 1000,
      ...(instructions ? { instructions } : {}),
      ...(guard ? { guard } : {}),
      caller: settings.caller ?? null,
      onDeadline: databaseCallHooks(() => this.sandboxes.database, log).onDeadline,
    });
    this.gateways.set(gateway, { settings, ...(guard ? { guard } : {}) });
    return (verified ? Promise.resolve() : this.listAgainIfChanged()).then(() => gateway);
  }

  /** The console's view of this session's tools that wait for approval, and the approval of one. */
  definitionSource(): DefinitionSource {
    return definitionSourceOf(this.profile, () =>
      [...this.gateways.values()].flatMap((g) => (g.guard ? [g.guard] : [])),
    );
  }

  /** Closes a client's gateway: its calls in flight are cancelled; the sandboxes serve on. */
  async closeGateway(gateway: Gateway): Promise<void> {
    this.gateways.delete(gateway);
    await gateway.close();
  }

  /**
   * The server said its tools changed: listed again (from the sandbox that said so), validated,
   * planned, compared with the pins (a changed tool is hidden until approved again), and routed.
   */
  private async relist(from: Upstream): Promise<void> {
    const { tools, rejected } = await listValidTools(from, this.profile.timeouts.start * 1000, this.options.log);
    this.adoptTools(tools, rejected);
    for (const gateway of [...this.gateways.keys()]) await this.updateGatewayRoutes(gateway);
    this.options.log.info(`${this.profile.name} changed its tools: listed again, ${this.plan.tools.length} planned`);
  }

  /** Lists again when the server announced a change before it was served (calls wait for it). */
  private async listAgainIfChanged(): Promise<void> {
    await this.promptsAndResources.listAgainIfChanged(this.early.takeFrom('promptsAndResources'));
    const from = this.early.takeFrom('tools');
    // As a re-listing the relay asks for: one that fails is logged, and the last listing stands.
    await (from?.forwarded.connected ? this.relist(from) : undefined)?.catch((error: Error) =>
      this.options.log.error(`listing the tools again failed: ${error.message}`),
    );
  }

  /** The tools served from now on, and their plan (the grants of its sandboxes kept). */
  private adoptTools(tools: Tool[], rejected: RejectedTool[]): void {
    this.listing = { tools, rejected, plan: planSandboxes(tools, ceilingOf(this.profile)) };
    for (const sandbox of this.plan.sandboxes) this.sandboxes.grants.set(sandbox.id, sandbox);
  }

  /** Hands a gateway (and its guard) the routes of the current tools; returns how many. */
  private async updateGatewayRoutes(gateway: Gateway): Promise<number> {
    const served = this.gateways.get(gateway);
    if (!served) return 0; // closed meanwhile
    const { routed, guarded } = this.routes(served.settings);
    await gateway.updateTools(routed, () => guarded && served.guard?.replaceTools(guarded));
    return routed.size;
  }

  /** A cold start's discovery answered: the gateway serves the running server's tools and sandboxes, not the lock's. */
  private async serveVerified(gateway: Gateway, settings: GatewaySettings): Promise<void> {
    const { log } = this.options;
    for (const [id, upstream] of this.sandboxes.takeStarted()) this.shared.adopt(id, upstream);
    const routed = await this.updateGatewayRoutes(gateway);
    await gateway.updatePromptsAndResources(this.promptsAndResources.visible(settings.approvals));
    await this.listAgainIfChanged();
    warnIfInstructionsDiffer({ profile: this.profile, instructions: this.instructions, lock: settings.approvals, log });
    log.info(`verified ${this.profile.name} against its lock file: ${routed} tool(s) routed`);
  }

  /** Routes (and, with pins and an audit log, the guard's view) of the current tools and plan. */
  private routes(settings: GatewaySettings): ToolRoutes {
    const { profile, log } = this.options;
    return routesOf(
      { profile, session: this.sessionId, tools: this.tools, plan: this.plan, firstSeen: this.firstSeen, log },
      settings,
    );
  }

  /**
   * The one teardown of a session, for `run`, `serve` and the tests: its gateways closed, its
   * sandboxes removed (with every container of its id: those of a start cut short too, once
   * the start has ended, bounded by the start timeout), then its database relays and roles.
   * Every call waits for the same teardown.
   */
  dispose(): Promise<void> {
    return (this.closing ??= this.close());
  }

  private async close(): Promise<void> {
    this.cold?.abandon(new Error(`session ${this.sessionId} closed before ${this.profile.name} was verified`));
    await Promise.all([...this.gateways.keys()].map((gateway) => this.closeGateway(gateway)));
    await this.shared.close();
    await this.sandboxes.close(this.profile.timeouts.start * 1000);
    // Only once no sandbox can use them: relays closed, roles dropped.
    await this.sandboxes.database?.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose();
  }

  /** `background`: the planned sandboxes start after this resolves (a cold start's verification). */
  private async discoverAndPlan(startAll: boolean, background = false): Promise<void> {
    const { profile, log } = this.options;
    const sandboxes = this.sandboxes;
    const image = await sandboxes.prepare({
      rebuildImage: this.options.rebuildImages === true,
      databaseAdminUrl: this.options.databaseAdminUrl,
      onDatabaseViolation: (sandboxId, role, violation) => this.violations.database(sandboxId, role, violation),
    });

    const { discoveryId, discovery, early } = await startDiscovery({
      startAll,
      sandboxes,
      knownTools: this.options.knownTools,
      server: profile.name,
      imageId: image.id,
      ceiling: ceilingOf(profile),
      log,
    });
    // A change the server announces before the gateway listens to it: listed again before serving.
    discovery.forwarded.take = (m) => this.early.take(m, discovery);

    const { tools, rejected } = await listValidTools(discovery, profile.timeouts.start * 1000, log);
    await this.promptsAndResources.list(discovery);
    this.instructions = discovery.client.getInstructions();
    this.adoptTools(tools, rejected);
    void this.options.knownTools
      ?.write(profile.name, image.id, tools)
      .catch((error: Error) => log.debug(`could not keep the tools of ${profile.name}: ${error.message}`));

    // Kept when it serves reads of prompts and resources, though no tool is planned there.
    if (!this.plan.sandboxes.some((s) => s.id === discoveryId) && !SessionPromptsAndResources.servedBy(discovery)) {
      await sandboxes.dropStarted(discoveryId);
    }
    if (startAll)
      await startPlannedSandboxes({ sandboxes, plan: this.plan, early, log, server: profile.name, background });
  }

  /**
   * The server lost trust (it broke a hint). A `hold: false` profile's sandboxes that can change
   * something are frozen between calls from now on (held ones already are).
   */
  private distrust(_reason: string): void {
    this.promptsAndResources.trustLost(); // never throws: it logs
    if (this.profile.hold) return;
    const writers = [...this.sandboxes.grants].filter(([, grant]) => grantCanChange(grant)).map(([id]) => id);
    const { log } = this.options;
    const failed = `could not freeze the sandboxes of ${this.profile.name} between calls`;
    void this.shared.pool.holdBetweenCallsFromNow(writers).catch((e: Error) => log.error(`${failed}: ${e.message}`));
  }
}
