import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { Gateway, SharedSandboxes, type Upstream } from '../gateway/gateway.js';
import type { RejectedTool } from '../catalog/discover-tools.js';
import {
  grantCanChange,
  planSandboxes,
  sandboxId,
  strictestGrant,
  type SandboxPlan,
} from '../policy/plan-sandboxes.js';
import { ceilingOf } from '../profile/profile-ceiling.js';
import type { Profile } from '../profile/load-profile.js';
import { sandboxUserIds, type EgressRequest, type SessionIdentity } from '../engine/sandbox-engine.js';
import { parseEgressHosts, type EgressHost } from '../policy/egress-hosts.js';
import { egressViolation } from '../policy/egress-violation.js';
import { EventBudget } from '../util/event-budget.js';
import { reportHintViolation, type HintViolationReport } from './hint-violation.js';
import { databaseAdminUrl } from '../database/database-env.js';
import { SessionDatabase } from '../database/session-database.js';
import type { PrivilegeViolation } from '../database/socket-relay.js';
import { assertNoNestedMounts } from '../sandbox/nested-mounts.js';
import { assertNoSpecialFiles } from '../sandbox/special-files.js';
import { assertWritableMounts, defaultSandboxUser } from '../sandbox/mount-owners.js';
import { CallGuard, compilePreApprovals } from '../gateway/call-guard.js';
import { lockedDefinitions, lockFilePath, lockTool, updateLockFile, type LockFile } from '../approvals/lock-file.js';
import { describeGrant, type DefinitionToApprove } from '../console/console-pages.js';
import type { DefinitionSource } from '../console/console-server.js';
import { ServerTrustState } from '../policy/server-trust.js';
import { diffPins, formatPinChanges, type PinnedDefinition } from '../policy/tool-pin.js';
import { approvedHashIn, approvedInstructions, warnIfInstructionsDiffer } from './guarded-tools.js';
import { SessionSandboxes } from './session-sandboxes.js';
import type { GatewaySettings, SessionOptions } from './session-options.js';
import { newSessionId, sessionIdentity } from '../util/session-identity.js';
import { listValidTools, startEarly, startPlanned, type EarlyStart } from './start-sandboxes.js';
import { databaseCallHooks, reportDatabaseViolation } from './database-violation.js';
import { SessionPromptsAndResources } from './session-prompts-and-resources.js';
import { routesOf, type ToolRoutes } from './tool-routes.js';

export type { GatewaySettings, SessionOptions } from './session-options.js';

/** When no call ran while the proxy had a request: how far either side to look for the one that made it. */
const EGRESS_SLACK_MS = 250;
/** Refused requests written to the audit trail per sandbox: a burst, then so many a second (the rest counted). */
const EGRESS_RECORDS_BURST = 100;
const EGRESS_RECORDS_PER_SECOND = 10;

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
  plan!: SandboxPlan;
  tools: Tool[] = [];
  rejected: RejectedTool[] = [];
  instructions?: string;
  /** The server's trust in this session: one owner, shared with the call guard. */
  private readonly trust: ServerTrustState;
  private readonly sandboxes: SessionSandboxes;
  /** Its prompts, resources and templates (`promptsAndResources.offers`: as the server listed them last). */
  readonly promptsAndResources: SessionPromptsAndResources;
  private disposed = false;
  /** The running sandboxes, shared by the gateways; the session lists again when they say so. */
  private readonly shared: SharedSandboxes;
  /** The gateways served now, each with its settings and guard. */
  private readonly gateways = new Map<Gateway, { settings: GatewaySettings; guard?: CallGuard }>();
  /** A trusted server without a lock file: its tools as first listed in this run (trust on first use). */
  private readonly firstSeen = new Map<string, PinnedDefinition>();
  /** The discovery sandbox announced a tool change before the gateway listened to it. */
  private changedBeforeServed?: Upstream;
  /** A cold start's discovery in the background (`openFromLock`); `discovered` once it answered. */
  private verifying?: Promise<void>;
  private discovered = false;
  /** The server's backend (`network.backend`), parsed once: what its closed-world tools may reach. */
  private readonly backend: readonly EgressHost[];
  /** Per sandbox: how many refusals are written down (a server can make them by the thousand). */
  private readonly egressBudgets = new Map<string, EventBudget>();

  private constructor(private readonly options: SessionOptions) {
    // Who its sandboxes run as, looked up once: a workspace that user cannot write stops it here, before anything starts.
    const defaultUser = defaultSandboxUser(options.profile);
    assertWritableMounts(options.profile, sandboxUserIds(options.profile, defaultUser));
    const network = options.profile.network;
    this.backend = typeof network === 'object' ? parseEgressHosts(network.backend) : [];
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
      onEgress: (sandboxId, request) => this.onEgress(sandboxId, request),
      ...(options.audit ? { audit: options.audit } : {}),
    });
    this.shared = new SharedSandboxes({
      upstreams: (id) => this.sandboxes.start(id),
      log: options.log,
      // Looked up at each call: a cold start opens the database after the gateway is made.
      onSandboxIdle: databaseCallHooks(() => this.sandboxes.database, options.log).onSandboxIdle,
      onToolsListChanged: (from) => this.relist(from),
      onOffersChanged: (from) => this.promptsAndResources.relist(from),
      onUnboundRequest: (sandbox, method, more) =>
        this.promptsAndResources.refusedUnbound(options.audit, sandbox, method, more),
    });
  }

  /**
   * Builds the image if needed, discovers the tools in the strictest sandbox, plans, and
   * (with `startAll`) starts every planned sandbox in parallel. On failure everything the
   * session started is removed before the error is thrown.
   */
  static async open(options: SessionOptions & { startAll: boolean }): Promise<HintboxSession> {
    const session = new HintboxSession(options);
    try {
      await session.discoverAndPlan(options.startAll);
      return session;
    } catch (error) {
      await session.dispose();
      throw error;
    }
  }

  /**
   * A cold start from the lock file: the session is served at once with the locked tools (their
   * plan and routes; the approved instructions), while the image is built if needed, discovery
   * runs and every planned sandbox starts in the background (`verified`). A gateway created
   * meanwhile holds every call until then, and then serves what the running server turned out
   * to list: a tool that differs from its lock entry is hidden and refused as on any start, and
   * the client is told the list changed. When verification fails, the caller disposes the
   * session.
   */
  static openFromLock(options: SessionOptions & { lock: LockFile }): HintboxSession {
    const session = new HintboxSession(options);
    session.instructions = options.lock.instructions.text ?? undefined;
    session.adoptTools(lockedDefinitions(options.lock));
    session.promptsAndResources.adoptLocked(options.lock);
    const verifying = session.discoverAndPlan(true, true);
    // The gateway's calls and the run hear of a failure; `dispose` waits for it to settle.
    session.sandboxes.track(verifying);
    session.verifying = verifying;
    verifying.then(() => (session.discovered = true)).catch(() => undefined);
    return session;
  }

  /** A cold start's verification: the discovery, then the serving of the verified server too (else undefined). */
  get verified(): Promise<void> | undefined {
    return this.verifying;
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
    const gatekeeper =
      settings.audit && guarded
        ? new CallGuard({
            server: this.profile.name,
            session: this.sessionId,
            caller: settings.caller ?? null,
            trust: this.trust,
            tools: guarded,
            preApprovals: compilePreApprovals(this.profile.preApprove),
            audit: settings.audit,
            approvalTimeoutMs: this.profile.approval.timeout * 1000,
            profileFile: this.profile.file,
            log,
            // Writers of a copied folder are frozen while it is copied, through their calls' line.
            previewer: this.sandboxes.previewer((ids, work) => this.shared.pool.holdFrozenDuring(ids, work)),
            ...(settings.approvals ? { approvedHash: approvedHashIn(settings.approvals) } : {}),
            onApproved: () => void gateway.announceToolListChanged(),
            ...(settings.console
              ? {
                  console: settings.console,
                  describeSandbox: (id: string) => {
                    const grant = this.sandboxes.grants.get(id);
                    return grant ? describeGrant(grant) : '';
                  },
                }
              : {}),
          })
        : undefined;
    // Instructions reach the client only as approved (the lock file), like tools; without
    // approvals (tests of routing), never.
    const instructions = settings.approvals
      ? approvedInstructions({ profile: this.profile, instructions: this.instructions, lock: settings.approvals, log })
      : undefined;
    // A cold start: the running server's tools replace the locked ones once discovery has
    // answered, and its sandboxes are served; this gateway's calls wait for both. A gateway
    // made later (another client) is served the verified server at once.
    const verified = this.discovered
      ? undefined
      : this.verifying?.then((): Promise<void> => this.serveVerified(gateway, settings));
    // The run waits for this one (serving the verified server may fail too: the run ends then).
    if (verified) this.verifying = verified;
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
      ...(gatekeeper ? { gatekeeper } : {}),
      onDeadline: databaseCallHooks(() => this.sandboxes.database, log).onDeadline,
    });
    this.gateways.set(gateway, { settings, ...(gatekeeper ? { guard: gatekeeper } : {}) });
    return (verified ? Promise.resolve() : this.listAgainIfChanged()).then(() => gateway);
  }

  /**
   * The console's view of this session's tools that wait for approval (never approved, or
   * changed since), and the approval of one: written into the lock file beside the profile as
   * `hintbox approve` does, then served by every gateway of the session from then on.
   */
  definitionSource(): DefinitionSource {
    const lockFile = lockFilePath(this.profile.file);
    const guards = (): CallGuard[] => [...this.gateways.values()].flatMap((g) => (g.guard ? [g.guard] : []));
    const waiting = () => {
      const tools = guards()[0]?.guardedTools;
      return tools ? [...tools.values()].filter((t) => t.pinState !== 'approved' && !t.approvalsUnreadable) : [];
    };
    return {
      pending: (): DefinitionToApprove[] =>
        waiting().map((t) => ({
          server: this.profile.name,
          tool: t.name,
          hash: t.pin.hash,
          ...(t.approvedDefinition
            ? { changes: formatPinChanges(diffPins(t.approvedDefinition, t.pin.definition)) }
            : {}),
          definition: JSON.stringify(t.pin.definition, null, 2),
          lockFile,
        })),
      approve: async (hash) => {
        const tool = waiting().find((t) => t.pin.hash === hash);
        if (!tool) return false;
        await updateLockFile(lockFile, this.profile.name, (lock) => lockTool(lock, tool.pin));
        for (const guard of guards()) guard.recheckApproval(tool.name);
        return true;
      },
    };
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
    this.rejected = rejected;
    this.adoptTools(tools);
    for (const gateway of [...this.gateways.keys()]) await this.updateGatewayRoutes(gateway);
    this.options.log.info(`${this.profile.name} changed its tools: listed again, ${this.plan.tools.length} planned`);
  }

  /** Lists again when the server announced a change before it was served (calls wait for it). */
  private async listAgainIfChanged(): Promise<void> {
    await this.promptsAndResources.listAgainIfChanged();
    const from = this.changedBeforeServed;
    this.changedBeforeServed = undefined;
    // As a re-listing the relay asks for: one that fails is logged, and the last listing stands.
    await (from?.forwarded.connected ? this.relist(from) : undefined)?.catch((error: Error) =>
      this.options.log.error(`listing the tools again failed: ${error.message}`),
    );
  }

  /** The tools served from now on, and their plan (the grants of its sandboxes kept). */
  private adoptTools(tools: Tool[]): void {
    this.tools = tools;
    this.plan = planSandboxes(tools, ceilingOf(this.profile));
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

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    await Promise.all([...this.gateways.keys()].map((gateway) => this.closeGateway(gateway)));
    await this.shared.close();
    await this.sandboxes.close(this.profile.timeouts.start * 1000);
    // Only once no sandbox can use them: relays closed, roles dropped.
    await this.sandboxes.database?.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispose();
  }

  /** `background`: the planned sandboxes start after this resolves (a cold start's verification). */
  private async discoverAndPlan(startAll: boolean, background = false): Promise<void> {
    const { profile, engine, log } = this.options;
    const sandboxes = this.sandboxes;
    assertNoNestedMounts(profile, engine);
    await assertNoSpecialFiles(profile);
    if (profile.database) {
      // Before any sandbox: a database that cannot be reached or is not prepared stops the run.
      const adminUrl =
        this.options.databaseAdminUrl ?? databaseAdminUrl({ file: profile.file, database: profile.database });
      const database = await SessionDatabase.open({
        adminUrl,
        section: profile.database,
        callTimeoutMs: profile.timeouts.call * 1000,
        identity: this.identity,
        log,
        onViolation: (sandboxId, role, violation) => this.onDatabaseViolation(sandboxId, role, violation),
      });
      // A cold start's session may be disposed while this ran: its relays and roles go now.
      if (sandboxes.isClosed) await database.close();
      sandboxes.assertOpen();
      sandboxes.database = database;
    }
    const image = await engine.prepareImage(profile, { rebuild: this.options.rebuildImages === true });
    sandboxes.useImage(image);

    const ceiling = ceilingOf(profile);
    const strictest = strictestGrant(ceiling);
    const discoveryId = sandboxId(strictest);
    sandboxes.grants.set(discoveryId, strictest);
    const early = startAll
      ? await startEarly({
          sandboxes,
          knownTools: this.options.knownTools,
          server: profile.name,
          imageId: image.id,
          ceiling,
          discoveryId,
          log,
        })
      : new Map<string, EarlyStart>();
    log.info(`discovering tools in the strictest sandbox (${discoveryId}: read-only mounts, no network)`);
    const discovery = await sandboxes.start(discoveryId);
    sandboxes.keepStarted(discoveryId, discovery);
    // A change the server announces before the gateway listens to it: listed again before serving.
    discovery.forwarded.take = (m) =>
      this.promptsAndResources.changedEarly(m, discovery) ||
      ((m as { method?: string }).method === 'notifications/tools/list_changed' &&
        Boolean((this.changedBeforeServed = discovery)));

    const { tools, rejected } = await listValidTools(discovery, profile.timeouts.start * 1000, log);
    this.rejected = rejected;
    await this.promptsAndResources.list(discovery);
    this.instructions = discovery.client.getInstructions();
    this.adoptTools(tools);
    void this.options.knownTools
      ?.write(profile.name, image.id, tools)
      .catch((error: Error) => log.debug(`could not keep the tools of ${profile.name}: ${error.message}`));

    // Kept when it serves reads of prompts and resources, though no tool is planned there.
    if (!this.plan.sandboxes.some((s) => s.id === discoveryId) && !SessionPromptsAndResources.servedBy(discovery)) {
      await sandboxes.dropStarted(discoveryId);
    }
    if (!startAll) return;
    const planned = startPlanned({ sandboxes, plan: this.plan, early, log }).then(async () => {
      // Closed meanwhile (a cold start's run that ended): what came up after goes too.
      if (sandboxes.isClosed) await sandboxes.closeKept();
    });
    if (!background) {
      await planned;
      sandboxes.assertOpen();
      return;
    }
    // A cold start: the server is verified once discovery has answered; a call waits for its own
    // sandbox only (its start under way, or a new one if this one failed).
    sandboxes.track(planned);
    planned.catch((error: Error) =>
      log.error(`a planned sandbox of ${profile.name} did not start: ${error.message}; a call into it starts it again`),
    );
    sandboxes.assertOpen();
  }

  /** Postgres refused a sandbox's session: a hint violation; the server is untrusted from now on. */
  private onDatabaseViolation(sandboxId: string, role: string, violation: PrivilegeViolation): void {
    const reason = reportDatabaseViolation({
      role,
      violation,
      privilege: this.sandboxes.grants.get(sandboxId)?.database,
      ...this.violationReport(sandboxId),
    });
    this.loseTrust(reason);
  }

  /** What every hint violation of a sandbox is reported with: its calls in flight (marked), its planned tools, the session. */
  private violationReport(sandboxId: string): Omit<HintViolationReport, 'text'> {
    return {
      sandboxId,
      running: (sandbox, violation) =>
        [...this.gateways.keys()].flatMap((gateway) => gateway.noteHintViolation(sandbox, violation)),
      planned: (this.plan as SandboxPlan | undefined)?.sandboxes.find((s) => s.id === sandboxId)?.tools ?? [],
      server: this.profile.name,
      session: this.sessionId,
      log: this.options.log,
      ...(this.options.audit ? { audit: this.options.audit } : {}),
    };
  }

  /** The server broke a hint: untrusted for the rest of the session (through a gateway's guard, which audits it). */
  private loseTrust(reason: string): void {
    const guard = [...this.gateways.values()].find((served) => served.guard)?.guard;
    void (guard ? guard.markUntrusted(reason) : this.trust.lose(reason));
  }

  /**
   * A request through a sandbox's egress proxy: a refused one is audited with the tools in flight,
   * the host and the port; one a closed-world tool made outside the server's backend is a hint
   * violation (the server is untrusted from then on).
   */
  private onEgress(sandboxId: string, request: EgressRequest): void {
    // The proxy logs a request when it is done with it, often after the call that made it was
    // answered: the calls are those that ran while the proxy had it; failing any, those just around it.
    const now = Date.now();
    const during = (slack: number): string[] => [
      ...new Set(
        [...this.gateways.keys()].flatMap((gateway) =>
          gateway.toolsDuring(sandboxId, (request.startedAt ?? now) - slack, (request.endedAt ?? now) + slack),
        ),
      ),
    ];
    const exact = during(0);
    const inFlight = exact.length > 0 ? exact : during(EGRESS_SLACK_MS);
    const plan = this.plan as SandboxPlan | undefined;
    const planned = plan?.sandboxes.find((s) => s.id === sandboxId)?.tools ?? [];
    const target = `${request.method} ${request.host}:${request.port}`;
    const budget =
      this.egressBudgets.get(sandboxId) ?? new EventBudget(EGRESS_RECORDS_BURST, EGRESS_RECORDS_PER_SECOND);
    this.egressBudgets.set(sandboxId, budget);
    const take = request.allowed ? undefined : budget.take();
    if (take?.record) {
      const more = take.skipped ? ` (and ${take.skipped} more refused, not written down)` : '';
      this.options.log.warn(
        `egress refused: sandbox ${sandboxId} (${inFlight.join(', ') || 'no call in flight'}) asked for ${target}${more}`,
      );
      this.options.audit?.recordEvent?.({
        type: 'egress.denied',
        session: this.sessionId,
        server: this.profile.name,
        tool: inFlight.join(', ') || null,
        sandbox: sandboxId,
        host: request.host,
        port: request.port,
        method: request.method,
        ...(take.skipped ? { skipped: take.skipped } : {}),
      });
    } else if (request.allowed) {
      this.options.log.debug(`egress: sandbox ${sandboxId} reached ${target}`);
    }
    const text = egressViolation({
      request,
      tools: inFlight.length ? inFlight : planned,
      closedWorld: (tool) => plan?.tools.find((t) => t.name === tool)?.effective.openWorldHint === false,
      backend: this.backend,
    });
    if (!text) return;
    this.loseTrust(reportHintViolation({ ...this.violationReport(sandboxId), text }));
  }

  /**
   * The server lost trust (it broke a hint). A `hold: false` profile's sandboxes that can change
   * something are frozen between calls from now on (held ones already are).
   */
  private distrust(_reason: string): void {
    this.promptsAndResources.trustLost(); // never throws: it logs
    if (this.profile.hold) return;
    const writers = [...this.sandboxes.grants].filter(([, grant]) => grantCanChange(grant)).map(([id]) => id);
    void this.shared.pool
      .holdBetweenCallsFromNow(writers)
      .catch((error: Error) =>
        this.options.log.error(
          `could not freeze the sandboxes of ${this.profile.name} between calls: ${error.message}`,
        ),
      );
  }
}
