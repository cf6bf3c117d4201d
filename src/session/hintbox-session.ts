import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { Gateway, type RoutedTool, type Upstream } from '../gateway/gateway.js';
import { describeRejected, listToolsRaw, validateTools, type RejectedTool } from '../gateway/discover-tools.js';
import { ImageBuilder } from '../engine/docker/image-builder.js';
import {
  grantCanChange,
  grantKey,
  planSandboxes,
  sandboxId,
  strictestGrant,
  type Ceiling,
  type SandboxGrant,
  type SandboxPlan,
} from '../policy/plan-sandboxes.js';
import type { Profile } from '../profile/load-profile.js';
import {
  buildContainerSpec,
  sandboxUserIds,
  serverCommand,
  type GateMounts,
  type ContainerSpecInput,
  type SessionIdentity,
} from '../engine/docker/container-spec.js';
import type Docker from 'dockerode';
import { databaseAdminUrl } from '../database/database-env.js';
import { SessionDatabase } from '../database/session-database.js';
import type { PrivilegeViolation } from '../database/socket-relay.js';
import type { DockerConnection } from '../engine/docker/docker-connection.js';
import { holdSandbox, type HeldSandbox, type StartedSandbox } from '../engine/docker/docker-sandbox.js';
import { Previewer } from '../sandbox/preview.js';
import { hostMountPoints, nestedMountPoints } from '../sandbox/nested-mounts.js';
import { assertNoSpecialFiles } from '../sandbox/special-files.js';
import { removeSession } from '../engine/docker/sweep.js';
import type { Logger } from '../util/logger.js';
import { CallGuard, compilePreApprovals, type GuardedTool } from '../gateway/call-guard.js';
import type { AuditLog } from '../audit/audit-record.js';
import { instructionsHash, lockedDefinitions, lockedTool, type LockFile } from '../approvals/lock-file.js';
import type { PinnedDefinition } from '../policy/tool-pin.js';
import { approvedInstructions, guardTools } from './guarded-tools.js';
import type { KnownTools } from './known-tools.js';
import { delay } from '../util/delay.js';
import { HintboxError } from '../util/hintbox-error.js';
import { hintboxEnvironment } from '../config/environment.js';

/** The approved hash of a tool in the lock file as it is now (a reader that fails counts as none). */
function approvedHashIn(approvals: () => LockFile | undefined): (tool: string) => string | undefined {
  return (tool) => {
    const lock = approvals();
    return lock ? lockedTool(lock, tool)?.sha256 : undefined;
  };
}

/** uid/gid of this hintbox process (the default sandbox user, never root), where the platform has them. */
function hostUserIds(): { uid: number; gid: number } | undefined {
  return process.getuid && process.getgid ? { uid: process.getuid(), gid: process.getgid() } : undefined;
}

/** A short random id for a session; it names and labels everything the session creates. */
export function newSessionId(): string {
  return randomBytes(4).toString('hex');
}

export function sessionIdentity(sessionId: string): SessionIdentity {
  return { sessionId, ownerHost: os.hostname(), ownerPid: process.pid };
}

/** The operator's ceiling, as the pure planner needs it. */
export function ceilingOf(profile: Profile): Ceiling {
  return {
    mounts: profile.mounts,
    network: profile.network,
    split: profile.split,
    overrides: Object.fromEntries(Object.entries(profile.tools).map(([name, rule]) => [name, rule.annotations])),
    ...(profile.database ? { database: profile.database.privilege } : {}),
  };
}

export class SandboxPolicyError extends HintboxError {
  constructor(message: string) {
    super(message, { exitCode: 2 });
    this.name = 'SandboxPolicyError';
  }
}

/**
 * Refuses read-only sources that have mount points below them on an engine that cannot make
 * bind mounts read-only recursively: those nested mounts would stay writable.
 */
export function assertNoNestedMounts(
  profile: Profile,
  docker: DockerConnection,
  mountPoints = hostMountPoints(),
): void {
  if (docker.recursiveReadOnly) return;
  const problems = profile.mounts.flatMap((mount, index) => {
    const nested = nestedMountPoints(mount.source, mountPoints);
    return nested.length
      ? [
          `${profile.file}: mounts[${index}].source: ${mount.source} has nested mount points (${nested.join(', ')}), which the Docker engine (API ${docker.apiVersion} < 1.44) cannot make read-only`,
        ]
      : [];
  });
  if (problems.length) throw new SandboxPolicyError(problems.join('\n'));
}

/** A sandbox started before discovery answered (held at its gate), and the rights it has. */
interface EarlyStart {
  key: string;
  held: Promise<HeldUpstream>;
}

/** A sandbox whose server waits at the gate. */
interface HeldUpstream {
  /** Lets the server run and connects to it. */
  release(): Promise<Upstream>;
  /** Removes the sandbox; its server never ran. */
  remove(): Promise<void>;
}

export interface SessionOptions {
  profile: Profile;
  /** The tools each image listed last time: their sandboxes start in parallel with discovery. */
  knownTools?: KnownTools;
  docker: DockerConnection;
  log: Logger;
  sessionId?: string;
  /** Rebuild images even when they look current. */
  rebuildImages?: boolean;
  /** The admin URL of the profile's database; default: read from the variable the profile names. */
  databaseAdminUrl?: string;
  /** Where sandbox starts and stops and hint violations are recorded (the run's audit log). */
  audit?: Pick<AuditLog, 'recordEvent'>;
}

export interface GatewaySettings {
  /**
   * The lock file of approved definitions, read again when a hidden tool is called (an approval
   * during the run); returns undefined when there is none. Without it and an audit log no call
   * is approved or recorded (tests of routing).
   */
  approvals?: () => LockFile | undefined;
  /** Where every call is recorded before it is forwarded. */
  audit?: AuditLog;
  /** `--tags`: serve only tools with one of these tags. */
  tagFilter?: readonly string[];
}

/**
 * One server under hintbox: discovery, plan, sandboxes. Created by `HintboxSession.open`;
 * disposing it removes every container it made (also those of failed starts).
 */
export class HintboxSession implements AsyncDisposable {
  readonly sessionId: string;
  readonly identity: SessionIdentity;
  plan!: SandboxPlan;
  tools: Tool[] = [];
  rejected: RejectedTool[] = [];
  instructions?: string;
  private readonly started = new Map<string, Upstream>();
  /**
   * Sandboxes of classes that can change something, started and held at their gate until the
   * first call allowed into them (the gateway's start of that class releases it).
   */
  private readonly heldAtGate = new Map<string, HeldUpstream>();
  private readonly grants = new Map<string, SandboxGrant>();
  private readonly generations = new Map<string, number>();
  /** Sandbox starts under way: `dispose` waits for them (each removes itself once disposed). */
  private readonly pending = new Set<Promise<unknown>>();
  private disposed = false;
  /** Roles and socket relays, when the profile has a database. */
  private database?: SessionDatabase;
  private gateway?: Gateway;
  private guard?: CallGuard;
  /** A trusted server without a lock file: its tools as first listed in this run (trust on first use). */
  private readonly firstSeen = new Map<string, PinnedDefinition>();
  /** Set when a sandbox broke a hint: the server is untrusted for the rest of the session. */
  private untrustedBecause?: string;
  /** The server's program and arguments (from the profile and the image). */
  private command?: string[];
  /** The image's id as inspected at start: every sandbox of the session runs exactly it. */
  private imageId?: string;
  /** A cold start's discovery in the background (`openFromLock`). */
  private verifying?: Promise<void>;

  private constructor(private readonly options: SessionOptions) {
    this.sessionId = options.sessionId ?? newSessionId();
    this.identity = sessionIdentity(this.sessionId);
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
    const verifying = session.discoverAndPlan(true);
    // The gateway's calls and the run hear of a failure; `dispose` waits for it to settle.
    session.pending.add(verifying.catch(() => undefined));
    session.verifying = verifying;
    return session;
  }

  /** Until the server is verified (a cold start from the lock file); undefined once open has returned. */
  get verified(): Promise<void> | undefined {
    return this.verifying;
  }

  get profile(): Profile {
    return this.options.profile;
  }

  /** A gateway over this session's sandboxes (routes by the plan). */
  createGateway(settings: GatewaySettings = {}): Promise<Gateway> {
    const { routed, guarded } = this.routes(settings);
    const gatekeeper =
      settings.audit && guarded
        ? new CallGuard({
            server: this.profile.name,
            session: this.sessionId,
            trust: this.profile.trust,
            tools: guarded,
            preApprovals: compilePreApprovals(this.profile.preApprove),
            audit: settings.audit,
            approvalTimeoutMs: this.profile.approval.timeout * 1000,
            profileFile: this.profile.file,
            log: this.options.log,
            previewer: this.previewer(),
            ...(settings.approvals ? { approvedHash: approvedHashIn(settings.approvals) } : {}),
            onApproved: () => void this.gateway?.announceToolListChanged(),
            onUntrusted: (reason) => this.distrust(reason),
          })
        : undefined;
    if (gatekeeper) {
      this.guard = gatekeeper;
      if (this.untrustedBecause) gatekeeper.markUntrusted(this.untrustedBecause);
    }
    // Instructions reach the client only as approved (the lock file), like tools; without
    // approvals (tests of routing), never.
    const instructions = settings.approvals
      ? approvedInstructions({
          profile: this.profile,
          instructions: this.instructions,
          lock: settings.approvals,
          log: this.options.log,
        })
      : undefined;
    const started = new Map(this.started);
    this.started.clear();
    const database = this.database;
    // A cold start: the running server's tools replace the locked ones once discovery has
    // answered, and its sandboxes go to the gateway; calls wait for both.
    const verified = this.verifying?.then(() => this.serveVerified(settings));
    this.gateway = new Gateway({
      ...(verified ? { verified } : {}),
      serverName: this.profile.name,
      tools: routed,
      started,
      upstreams: (id) => this.startUpstream(id),
      log: this.options.log,
      callTimeoutMs: this.profile.timeouts.call * 1000,
      ...(instructions ? { instructions } : {}),
      ...(gatekeeper ? { gatekeeper } : {}),
      onToolsListChanged: (from) => this.relist(from, settings),
      ...(database
        ? {
            // A call past its deadline may hold a lock or run a query on: cut its sandbox's sessions.
            onDeadline: (sandbox: string, tool: string) => {
              void database.endCallSessions(sandbox).then(
                (n) =>
                  n > 0 &&
                  this.options.log.warn(`${tool}: deadline passed, cut ${n} database session(s) of sandbox ${sandbox}`),
                (error: Error) =>
                  this.options.log.warn(`could not cut the database sessions of ${sandbox}: ${error.message}`),
              );
            },
            // A call's database sessions end with it: no lock, transaction or LISTEN outlives the
            // sandbox's last call in flight (a held sandbox is frozen first, so it cannot reconnect).
            onSandboxIdle: (sandbox: string) =>
              database.endCallSessions(sandbox).then(
                (n) => void (n > 0 && this.options.log.debug(`ended ${n} database session(s) of sandbox ${sandbox}`)),
                (error: Error) =>
                  this.options.log.warn(
                    `could not end the database sessions of sandbox ${sandbox} after its call: ${error.message}`,
                  ),
              ),
          }
        : {}),
    });
    return Promise.resolve(this.gateway);
  }

  /**
   * The server announced that its tools changed: list them again (from the sandbox that said
   * so), validate, plan again, compare with the approved pins — a changed tool is hidden and
   * refused until approved again — and hand the gateway its new routes.
   */
  private async relist(from: Upstream, settings: GatewaySettings): Promise<void> {
    const raw = await listToolsRaw(from.client, this.profile.timeouts.start * 1000);
    const { tools, rejected } = validateTools(raw);
    for (const r of rejected) this.options.log.warn(describeRejected(r));
    this.rejected = rejected;
    this.adoptTools(tools);
    const routed = await this.updateGatewayRoutes(settings);
    this.options.log.info(`${this.profile.name} changed its tools: listed again, ${routed} routed`);
  }

  /** The tools served from now on, and their plan (the grants of its sandboxes kept). */
  private adoptTools(tools: Tool[]): void {
    this.tools = tools;
    this.plan = planSandboxes(tools, ceilingOf(this.profile));
    for (const sandbox of this.plan.sandboxes) this.grants.set(sandbox.id, sandbox);
  }

  /** Hands the gateway (and its guard) the routes of the current tools; returns how many. */
  private async updateGatewayRoutes(settings: GatewaySettings): Promise<number> {
    const { routed, guarded } = this.routes(settings);
    await this.gateway?.updateTools(routed, () => guarded && this.guard?.replaceTools(guarded));
    return routed.size;
  }

  /**
   * A cold start's discovery has answered (its tools, plan and sandboxes are this session's):
   * the gateway serves the running server's tools instead of the locked ones, and its sandboxes.
   */
  private async serveVerified(settings: GatewaySettings): Promise<void> {
    const { log } = this.options;
    for (const [id, upstream] of this.started) this.gateway?.adopt(id, upstream);
    this.started.clear();
    const routed = await this.updateGatewayRoutes(settings);
    let approved: string | null | undefined;
    try {
      approved = settings.approvals?.()?.instructions.sha256;
    } catch {
      approved = undefined;
    }
    if (approved !== undefined && approved !== instructionsHash(this.instructions)) {
      log.warn(
        `the server's instructions differ from the approved ones in the lock file: the client was given the approved ones at initialize; see "hintbox approve ${this.profile.file} --instructions"`,
      );
    }
    log.info(`verified ${this.profile.name} against its lock file: ${routed} tool(s) routed`);
  }

  /** Routes (and, with pins and an audit log, the guard's view) of the current tools and plan. */
  private routes(settings: GatewaySettings): { routed: Map<string, RoutedTool>; guarded?: Map<string, GuardedTool> } {
    const byName = new Map(this.tools.map((t) => [t.name, t]));
    const guarded =
      settings.approvals && settings.audit
        ? guardTools({
            profile: this.profile,
            session: this.sessionId,
            tools: this.tools,
            plan: this.plan.tools,
            readLock: settings.approvals,
            firstSeen: this.firstSeen,
            audit: settings.audit,
            log: this.options.log,
            ...(settings.tagFilter ? { tagFilter: settings.tagFilter } : {}),
          })
        : undefined;
    const routed = new Map<string, RoutedTool>();
    for (const planned of this.plan.tools) {
      const definition = byName.get(planned.name);
      if (definition && (!guarded || guarded.has(planned.name))) {
        routed.set(planned.name, { definition, sandbox: planned.sandbox });
      }
    }
    return guarded ? { routed, guarded } : { routed };
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    await this.closeSandboxes();
    // Starts under way see `disposed` when they end and remove what they made; wait for them
    // (bounded by the start timeout) so that nothing is created after the removal below.
    const timeoutMs = this.options.profile.timeouts.start * 1000;
    await Promise.race([Promise.allSettled([...this.pending]), delay(timeoutMs)]);
    // Whatever was started and not tracked (a start cut short): remove by label.
    await removeSession(this.options.docker.docker, this.sessionId).catch((error: Error) =>
      this.options.log.warn(`could not remove the containers of session ${this.sessionId}: ${error.message}`),
    );
    // Only once no container can use them: relays closed, roles dropped.
    await this.database?.close();
  }

  /** Closes the sandboxes the session holds (not yet handed to a gateway). */
  private async closeSandboxes(): Promise<void> {
    const started = [...this.started.values()];
    const held = [...this.heldAtGate.values()];
    this.started.clear();
    this.heldAtGate.clear();
    await Promise.all([
      ...started.map((u) => u.close().catch(() => undefined)),
      ...held.map((h) => h.remove().catch(() => undefined)),
    ]);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispose();
  }

  private async discoverAndPlan(startAll: boolean): Promise<void> {
    const { profile, docker, log } = this.options;
    assertNoNestedMounts(profile, docker);
    await assertNoSpecialFiles(profile);
    if (profile.database) {
      // Before any container: a database that cannot be reached or is not prepared stops the run.
      const adminUrl =
        this.options.databaseAdminUrl ?? databaseAdminUrl({ file: profile.file, database: profile.database });
      this.database = await SessionDatabase.open({
        adminUrl,
        section: profile.database,
        callTimeoutMs: profile.timeouts.call * 1000,
        identity: this.identity,
        log,
        onViolation: (sandboxId, role, violation) => this.onDatabaseViolation(sandboxId, role, violation),
      });
      // A cold start's session may be disposed while this ran: its relays and roles go now.
      if (this.disposed) {
        await this.database.close();
        throw new Error(`session ${this.sessionId} is closed`);
      }
    }
    const builder = new ImageBuilder({
      docker: docker.docker,
      log,
      ...(hintboxEnvironment().baseImage ? { baseImage: hintboxEnvironment().baseImage } : {}),
      ...(this.options.rebuildImages ? { rebuild: true } : {}),
    });
    await builder.ensure(profile.server.image, profile.server.build);
    // The gate executes the server: what the image would run, resolved once.
    const image = await docker.docker.getImage(profile.server.image).inspect();
    this.command = serverCommand(profile.server, image.Config);
    this.imageId = image.Id;

    const ceiling = ceilingOf(profile);
    const strictest = strictestGrant(ceiling);
    const discoveryId = sandboxId(strictest);
    this.grants.set(discoveryId, strictest);
    const early = startAll ? await this.startEarly(image.Id, ceiling, discoveryId) : new Map<string, EarlyStart>();
    log.info(`discovering tools in the strictest sandbox (${discoveryId}: read-only mounts, no network)`);
    const discovery = await this.startUpstream(discoveryId);
    this.started.set(discoveryId, discovery);

    const raw = await listToolsRaw(discovery.client, profile.timeouts.start * 1000);
    const { tools, rejected } = validateTools(raw);
    for (const r of rejected) log.warn(describeRejected(r));
    this.rejected = rejected;
    this.instructions = discovery.client.getInstructions();
    this.adoptTools(tools);
    void this.options.knownTools
      ?.write(profile.name, image.Id, tools)
      .catch((error: Error) => log.debug(`could not keep the tools of ${profile.name}: ${error.message}`));

    // Early starts the plan does not have (or gives other rights) go at once.
    const planned = new Map(this.plan.sandboxes.map((s) => [s.id, grantKey(s)]));
    for (const [id, start] of early) {
      if (planned.get(id) === start.key) continue;
      early.delete(id);
      if (!planned.has(id)) this.grants.delete(id);
      log.info(`sandbox ${id} was started early but this start's tools do not plan it: removing it (it never ran)`);
      void start.held.then((h) => h.remove()).catch(() => undefined);
    }
    if (!this.plan.sandboxes.some((s) => s.id === discoveryId)) {
      this.started.delete(discoveryId);
      await discovery.close();
    }
    if (startAll) {
      const toStart = this.plan.sandboxes.filter((s) => !this.started.has(s.id) && !early.has(s.id));
      if (toStart.length) {
        log.info(`starting ${toStart.length} more sandbox(es) in parallel: ${toStart.map((s) => s.id).join(', ')}`);
      }
      // A class that can change something stays at its gate until a call is allowed into it.
      const results = await Promise.allSettled([
        ...toStart.map(async (s) =>
          this.holdsUntilCalled(s)
            ? this.heldAtGate.set(s.id, await this.holdUpstream(s.id))
            : this.started.set(s.id, await this.startUpstream(s.id)),
        ),
        ...[...early].map(async ([id, start]) => {
          const held = await start.held;
          const grant = this.grants.get(id);
          if (grant && this.holdsUntilCalled(grant)) this.heldAtGate.set(id, held);
          else this.started.set(id, await held.release());
        }),
      ]);
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
      const waiting = [...this.heldAtGate.keys()];
      if (waiting.length) {
        log.info(`${waiting.join(', ')}: held at the gate until a call is allowed into it (frozen between calls)`);
      }
    }
    // Disposed meanwhile (a cold start's run that ended): what came up after goes too.
    if (this.disposed) {
      await this.closeSandboxes();
      throw new Error(`session ${this.sessionId} is closed`);
    }
  }

  /**
   * Does server code in a sandbox of this grant run only while a call allowed into it is in
   * flight? Yes when the grant can change something, unless the profile (of a trusted server:
   * checked at load) lets it run free.
   */
  private holdsUntilCalled(grant: SandboxGrant): boolean {
    return (this.profile.hold || this.untrustedBecause !== undefined) && grantCanChange(grant);
  }

  /**
   * Creates and starts, in parallel with discovery, the sandboxes that the tools this image
   * listed at its last start plan under the current ceiling (on a first start or a changed
   * image: the ceiling's class), each held at its gate: none runs anything of the image until
   * discovery has answered and this start's plan has the same class with the same rights.
   */
  private async startEarly(imageId: string, ceiling: Ceiling, discoveryId: string): Promise<Map<string, EarlyStart>> {
    const { profile, log, knownTools } = this.options;
    const early = new Map<string, EarlyStart>();
    if (!knownTools) return early;
    const known = await knownTools.read(profile.name, imageId).catch(() => undefined);
    // Nothing known of this image yet: guess the class an unannotated tool gets (the ceiling's),
    // which is also where writing tools land when the ceiling has no network. Held, a wrong
    // guess costs a container start and nothing else.
    const claims = known ?? [{ name: '(a tool without annotations)' }];
    for (const sandbox of planSandboxes(claims, ceiling).sandboxes) {
      if (sandbox.id === discoveryId) continue;
      this.grants.set(sandbox.id, sandbox);
      const held = this.holdUpstream(sandbox.id);
      held.catch(() => undefined); // awaited (or dropped) once discovery has answered
      early.set(sandbox.id, { key: grantKey(sandbox), held });
    }
    if (early.size) {
      log.info(
        `starting ${[...early.keys()].join(', ')} early (held at the gate until discovery answers${known ? '' : "; a guess: nothing is known of this image's tools yet"})`,
      );
    }
    return early;
  }

  /**
   * Postgres refused a sandbox's session (42501, 25006): a tool did what its hints said it would
   * not. Logged as a hint violation naming the server and the tools running there, recorded on
   * those calls' audit outcomes, and the server is untrusted for the rest of the session.
   */
  private onDatabaseViolation(sandboxId: string, role: string, violation: PrivilegeViolation): void {
    const privilege = this.grants.get(sandboxId)?.database;
    const hint =
      privilege === 'read'
        ? 'readOnlyHint'
        : privilege === 'append'
          ? 'destructiveHint'
          : "the profile's database grant";
    const text = `${hint}: Postgres refused the ${privilege ?? ''} role ${role} (SQLSTATE ${violation.sqlstate}: ${violation.message})`;
    const running = this.gateway?.noteHintViolation(sandboxId, text) ?? [];
    const plan = this.plan as SandboxPlan | undefined;
    const tools = running.length
      ? [...new Set(running)]
      : (plan?.sandboxes.find((s) => s.id === sandboxId)?.tools ?? []);
    const who = running.length
      ? `tool ${tools.join(', ')}`
      : `one of the tools ${tools.join(', ') || '(discovery)'} (no call was running)`;
    this.options.log.error(`hint violation: server ${this.profile.name}, ${who}, sandbox ${sandboxId}: ${text}`);
    this.options.audit?.recordEvent?.({
      type: 'hint.violation',
      session: this.sessionId,
      server: this.profile.name,
      tool: tools.join(', ') || null,
      sandbox: sandboxId,
      violation: text,
    });
    const reason = `${tools.join(', ') || sandboxId} broke ${text}`;
    this.distrust(reason);
    this.guard?.markUntrusted(reason);
  }

  /**
   * The server broke a hint: untrusted for the rest of the session. A `hold: false` profile no
   * longer lets its sandboxes that can change something run free: they are frozen between calls
   * from now on (held ones already are).
   */
  private distrust(reason: string): void {
    if (this.untrustedBecause !== undefined) return;
    this.untrustedBecause = reason;
    if (this.profile.hold) return;
    const writers = [...this.grants].filter(([, grant]) => grantCanChange(grant)).map(([id]) => id);
    void this.gateway
      ?.holdBetweenCallsFromNow(writers)
      .catch((error: Error) =>
        this.options.log.error(
          `could not freeze the sandboxes of ${this.profile.name} between calls: ${error.message}`,
        ),
      );
  }

  /** Dry runs of calls, in throwaway sandboxes over copies of the writable mounts (no network). */
  private previewer(): Previewer {
    const { profile, docker, log } = this.options;
    return new Previewer({
      docker: docker.docker,
      log,
      grantOf: (id) => this.grants.get(id),
      specFor: (id, grant, gate) => this.containerSpec(id, grant, gate),
      sandboxUser: sandboxUserIds(profile, hostUserIds()),
      startTimeoutMs: profile.timeouts.start * 1000,
      // The session's sandboxes that can write a copied folder are frozen while it is copied,
      // through the same line as their calls' thaws and freezes.
      holdWriters: (sources, work) => {
        const writers = [...this.grants]
          .filter(([, grant]) => grant.mounts.some((m) => !m.readOnly && sources.includes(m.source)))
          .map(([id]) => id);
        return this.gateway ? this.gateway.holdFrozenDuring(writers, work) : work();
      },
    });
  }

  /** The container of a sandbox class: the one place the session's identity and user go in. */
  private containerSpec(
    id: string,
    grant: SandboxGrant,
    gate: GateMounts,
    database?: ContainerSpecInput['database'],
  ): Docker.ContainerCreateOptions {
    const { profile, docker } = this.options;
    const hostUser = hostUserIds();
    if (!this.command) throw new Error(`session ${this.sessionId}: the server's command is not known yet`);
    return buildContainerSpec({
      session: this.identity,
      profile,
      sandboxId: id,
      grant,
      engine: { recursiveReadOnly: docker.recursiveReadOnly },
      command: this.command,
      ...(this.imageId ? { imageId: this.imageId } : {}),
      gate,
      ...(hostUser ? { hostUser } : {}),
      ...(database ? { database } : {}),
    });
  }

  /** The upstream of class `id`: the one held at its gate since the start, else a new one. */
  private async startUpstream(id: string): Promise<Upstream> {
    const waiting = this.heldAtGate.get(id);
    this.heldAtGate.delete(id);
    return (waiting ?? (await this.holdUpstream(id))).release();
  }

  /**
   * Creates and starts a sandbox of class `id` whose server is held at the gate: nothing of
   * the image runs until `release`. Tracked until it settles, so that `dispose` can wait for it.
   */
  private holdUpstream(id: string): Promise<HeldUpstream> {
    const holding = this.hold(id);
    this.pending.add(holding);
    void holding.then(
      () => this.pending.delete(holding),
      () => this.pending.delete(holding),
    );
    return holding;
  }

  private async hold(id: string): Promise<HeldUpstream> {
    if (this.disposed) throw new Error(`session ${this.sessionId} is closed`);
    const { profile, docker, log } = this.options;
    const grant = this.grants.get(id);
    if (!grant) throw new Error(`no sandbox ${id} in the plan`);
    // The role and relay are made on the class's first start and reused by its restarts.
    const database =
      grant.database && this.database
        ? await this.database.access(id, grant.database, sandboxUserIds(profile, hostUserIds()))
        : undefined;
    if (this.disposed) throw new Error(`session ${this.sessionId} is closed`);
    // Restarts get a fresh name: the dead container may still be on its way out.
    const generation = this.generations.get(id) ?? 0;
    this.generations.set(id, generation + 1);
    const held: HeldSandbox = await holdSandbox({
      docker: docker.docker,
      id,
      spec: (gate) => {
        const spec = this.containerSpec(id, grant, gate, database);
        if (generation > 0) spec.name = `${spec.name}-${generation}`;
        return spec;
      },
      sandboxUser: sandboxUserIds(profile, hostUserIds()),
      log: log.child(`${profile.name}/${id}`),
      startTimeoutMs: profile.timeouts.start * 1000,
    });
    if (this.disposed) {
      await held.remove();
      throw new Error(`session ${this.sessionId} is closed`);
    }
    return {
      remove: () => held.remove(),
      release: async () => {
        if (this.disposed) {
          await held.remove();
          throw new Error(`session ${this.sessionId} is closed`);
        }
        const sandbox: StartedSandbox = await held.release();
        const audit = this.options.audit;
        if (audit?.recordEvent) {
          const event = { session: this.sessionId, server: profile.name, sandbox: id, container: sandbox.containerId };
          audit.recordEvent({ type: 'sandbox.start', ...event });
          void sandbox.closed.then(() => audit.recordEvent?.({ type: 'sandbox.stop', ...event }));
        }
        return {
          client: sandbox.client,
          closed: sandbox.closed,
          diagnostics: () => sandbox.stderrTail(),
          close: () => sandbox.remove(),
          freezer: { freeze: () => sandbox.freeze(), thaw: () => sandbox.thaw() },
          holdBetweenCalls: this.holdsUntilCalled(grant),
        };
      },
    };
  }
}
