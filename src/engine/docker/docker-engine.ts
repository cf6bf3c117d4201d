import { mkdirSync } from 'node:fs';
import os from 'node:os';
import type Docker from 'dockerode';
import type { Profile } from '../../profile/load-profile.js';
import type { Logger } from '../../util/logger.js';
import {
  sandboxUserIds,
  SandboxStartError,
  type HeldSandbox,
  type HoldOptions,
  type PreparedImage,
  type SandboxEngine,
  type SandboxInfo,
  type SandboxSpec,
  type BindSource,
} from '../sandbox-engine.js';
import { checkSamePaths, findOwnContainer, stageGate } from './own-container.js';
import { buildContainerSpec } from './container-spec.js';
import { LABEL_CLASS, LABEL_OWNER_PID } from '../sandbox-labels.js';
import { serverCommand } from '../sandbox-process.js';
import { connectDocker, type DockerConnection } from './docker-connection.js';
import { holdSandbox } from './docker-sandbox.js';
import { gateBinary } from './gate.js';
import { packageLockPath, packageSource } from '../../packages/package-source.js';
import { ensureNpmImage } from './npm-package-image.js';
import { ensurePypiImage } from './pypi-package-image.js';
import { buildHintboxImage } from './hintbox-image.js';
import { ImageBuilder } from './image-builder.js';
import { ensureEgressProxyImage, startEgress, type StartedEgress } from './egress-proxy.js';
import { makeIsOwnerAlive, removeSession, sweepOrphans } from './sweep.js';
import { createOpenNetwork, removeOpenNetwork } from './open-network.js';
import { imageVolumePaths } from '../image-volumes.js';
import { networkRefusal } from './engine-networks.js';
import { hintboxEnvironment, type HintboxEnvironment } from '../../config/environment.js';
import { newSessionId } from '../../util/session-identity.js';

export interface DockerEngineOptions {
  /** Progress of image builds. */
  log: Logger;
  /** A Debian trixie image to build the server bases on instead of `debian:trixie-slim` (HINTBOX_BASE_IMAGE). */
  baseImage?: string;
}

/**
 * The sandbox engine on a local Docker engine: a sandbox is a hardened container whose first
 * program is hintbox's gate (`gate.ts`), its spec the translation in `container-spec.ts`.
 */
export class DockerEngine implements SandboxEngine {
  /** The gate's host path when not the package's own (hintbox in a container: `checkBindSources`). */
  private gate: string | undefined;
  /** The egress (network and proxy) of each class with hosts by name, by session and class; made at its first start. */
  private readonly egress = new Map<string, Promise<StartedEgress>>();
  /** How many times each class's egress was started (a lost proxy is replaced under a new name). */
  private readonly egressStarts = new Map<string, number>();
  /** Image builders by rebuild flag, kept so that concurrent prepares share a build (imageBuilder). */
  private readonly builders = new Map<boolean, ImageBuilder>();
  /** The `VOLUME` paths of the images prepared, by content id (an id's image never changes). */
  private readonly volumesById = new Map<string, string[]>();
  /** Sessions being removed: their proxies ending is expected (see startEgress `closing`). */
  private readonly closingSessions = new Set<string>();
  /** The open network of every session's open sandboxes (open-network.ts); made at the first, removed by `close`. */
  private openNetwork: Promise<string> | undefined;
  /** Set by `close`: no open network is made after it. */
  private closed = false;

  private constructor(
    /** The engine's client; only code of this folder uses it. */
    readonly connection: DockerConnection,
    private readonly options: DockerEngineOptions,
  ) {}

  /** Connects to the engine named by DOCKER_HOST (a local socket), else the default one. */
  static async connect(
    options: DockerEngineOptions,
    env: Pick<HintboxEnvironment, 'dockerHost'> = hintboxEnvironment(),
  ): Promise<DockerEngine> {
    return new DockerEngine(await connectDocker(env), options);
  }

  /** Over a connection made elsewhere (tests that share one). */
  static over(connection: DockerConnection, options: DockerEngineOptions): DockerEngine {
    return new DockerEngine(connection, options);
  }

  private get docker(): Docker {
    return this.connection.docker;
  }

  get description(): string {
    const name = this.connection.kind === 'podman' ? 'Podman (Docker-compatible API)' : 'Docker';
    return `${name} at ${this.connection.endpoint}, API ${this.connection.apiVersion}`;
  }

  get recursiveReadOnly(): boolean {
    return this.connection.recursiveReadOnly;
  }

  async prepareImage(
    { server, file, network }: Pick<Profile, 'server' | 'file'> & { network?: Profile['network'] },
    options: { rebuild?: boolean } = {},
  ): Promise<PreparedImage> {
    const builder = this.imageBuilder(options);
    if (typeof network === 'object') await ensureEgressProxyImage(builder);
    const source = packageSource(server);
    if (source) {
      const lockFile = packageLockPath(file, source.kind);
      const packageOptions = { lockFile, bin: server.bin, log: this.options.log };
      if (source.kind === 'npm') {
        await ensureNpmImage(builder, server.image, source, { ...packageOptions, debian: server.debian ?? [] });
      } else {
        await ensurePypiImage(builder, server.image, source, packageOptions);
      }
    } else {
      await builder.ensure(server.image, server.build);
    }
    // The gate executes the server: what the image would run, resolved once.
    const image = await this.docker.getImage(server.image).inspect();
    this.volumesById.set(image.Id, imageVolumePaths(image.Config.Volumes));
    return { id: image.Id, command: serverCommand(server, image.Config) };
  }

  /** Builds hintbox's own image (`hintbox images build --hintbox`); returns its name. */
  prepareHintboxImage(options: { rebuild?: boolean } = {}): Promise<string> {
    return buildHintboxImage(this.imageBuilder(options));
  }

  /**
   * One builder per engine (and rebuild flag): servers prepared at once (serve's folder) share
   * each build of the same image instead of building it once each.
   */
  private imageBuilder(options: { rebuild?: boolean }): ImageBuilder {
    const rebuild = options.rebuild === true;
    let builder = this.builders.get(rebuild);
    if (!builder) {
      builder = this.newImageBuilder(rebuild);
      this.builders.set(rebuild, builder);
    }
    return builder;
  }

  private newImageBuilder(rebuild: boolean): ImageBuilder {
    return new ImageBuilder({
      docker: this.docker,
      log: this.options.log,
      ...(this.options.baseImage ? { baseImage: this.options.baseImage } : {}),
      ...(rebuild ? { rebuild: true } : {}),
    });
  }

  /**
   * hintbox in a container of this engine: its gate is copied to the state folder (the one in
   * the package is not on the host), and every path sandboxes get must be at the same host path.
   */
  async checkBindSources(sources: readonly BindSource[]): Promise<void> {
    const env = hintboxEnvironment();
    const own = await findOwnContainer(this.docker, env.inContainer);
    if (!own) return;
    this.options.log.info(`hintbox runs in container ${own.id.slice(0, 12)}: its sandboxes are siblings`);
    // A fresh host folder mounted over the image's: its socket folders are made in $TMPDIR.
    mkdirSync(os.tmpdir(), { recursive: true });
    this.gate = stageGate(env.stateDir);
    checkSamePaths(own, [
      ...sources,
      { path: this.gate, what: "hintbox's sandbox gate (copied into the state folder)" },
    ]);
  }

  async hold(spec: SandboxSpec, options: HoldOptions): Promise<HeldSandbox> {
    // Before anything is made for it: no proxy, no network, no container (a preview has no network).
    const refused = spec.preview ? undefined : networkRefusal(this.connection.kind, spec.grant.network, spec.sandboxId);
    if (refused) throw new SandboxStartError(refused);
    const egress = spec.grant.network === 'egress' && !spec.preview ? await this.egressOf(spec, options) : undefined;
    const openNetwork = spec.grant.network === 'bridge' && !spec.preview ? await this.openNetworkOf() : undefined;
    const imageVolumes = await this.volumesOf(spec.imageId ?? spec.profile.server.image);
    return holdSandbox({
      docker: this.docker,
      ...(this.gate ? { gateBinary: this.gate } : {}),
      id: spec.preview ? `preview-${spec.sandboxId}` : spec.sandboxId,
      spec: (gate) =>
        buildContainerSpec({
          ...spec,
          engine: { recursiveReadOnly: this.recursiveReadOnly, kind: this.connection.kind },
          gate,
          imageVolumes,
          ...(egress ? { egress } : {}),
          ...(openNetwork ? { openNetwork } : {}),
        }),
      sandboxUser: sandboxUserIds(spec.profile, spec.defaultUser),
      log: options.log,
      startTimeoutMs: options.startTimeoutMs,
      ...(spec.clientCapabilities ? { clientCapabilities: spec.clientCapabilities } : {}),
      freezer: hintboxEnvironment().freezer,
    });
  }

  /** The class's egress, started at its first sandbox and kept for its restarts; a failed start is tried again next time. */
  private egressOf(spec: SandboxSpec, options: HoldOptions): Promise<StartedEgress> {
    const key = `${spec.session.sessionId}/${spec.sandboxId}`;
    let egress = this.egress.get(key);
    if (!egress) {
      const generation = (this.egressStarts.get(key) ?? 0) + 1;
      this.egressStarts.set(key, generation);
      const started: Promise<StartedEgress> = startEgress({
        docker: this.docker,
        session: spec.session,
        server: spec.profile.name,
        sandboxId: spec.sandboxId,
        hosts: spec.grant.egress?.hosts ?? [],
        outbound: hintboxEnvironment().egressNetworks,
        dns: hintboxEnvironment().egressDns,
        log: options.log,
        gateBinary: this.gate ?? gateBinary(),
        sandboxGid: sandboxUserIds(spec.profile, spec.defaultUser).gid,
        onRequest: (request) => spec.onEgress?.(request),
        // The next sandbox of the class gets a new proxy (those running lost their way out).
        onLost: () => this.egress.get(key) === started && this.egress.delete(key),
        closing: () => this.closingSessions.has(spec.session.sessionId),
        generation,
        startTimeoutMs: options.startTimeoutMs,
      });
      egress = started;
      this.egress.set(key, started);
      started.catch(() => this.egress.get(key) === started && this.egress.delete(key));
    }
    return egress;
  }

  /**
   * The process's open network, made at its first open sandbox (of any session) and shared by all:
   * `enable_icc=false` keeps its containers apart as well as a network each would. A failed
   * creation is tried again next time.
   */
  private openNetworkOf(): Promise<string> {
    if (this.closed) return Promise.reject(new Error('the sandbox engine is closed: no open sandbox is started'));
    if (!this.openNetwork) {
      const made = createOpenNetwork(this.docker, {
        id: newSessionId(),
        ownerHost: os.hostname(),
        ownerPid: process.pid,
      });
      this.openNetwork = made;
      made.catch(() => this.openNetwork === made && (this.openNetwork = undefined));
    }
    return this.openNetwork;
  }

  /**
   * The image's `VOLUME` paths: read when the image was prepared (the sandbox is created from that
   * id), else inspected now (an image named by its tag).
   */
  private async volumesOf(image: string): Promise<string[]> {
    const known = this.volumesById.get(image);
    if (known) return known;
    const inspected = await this.docker.getImage(image).inspect();
    const volumes = imageVolumePaths(inspected.Config.Volumes);
    this.volumesById.set(inspected.Id, volumes);
    return volumes;
  }

  async removeSession(sessionId: string): Promise<number> {
    this.closingSessions.add(sessionId);
    const ofSession = (key: string): boolean => key.startsWith(`${sessionId}/`);
    const proxies = [...this.egress.keys()].filter(ofSession).map((key) => this.egress.get(key));
    for (const key of [...this.egress.keys()].filter(ofSession)) this.egress.delete(key);
    for (const key of [...this.egressStarts.keys()].filter(ofSession)) this.egressStarts.delete(key);
    const removed = await removeSession(this.docker, sessionId);
    // The proxies' socket folders too (their containers went with the session's labels).
    for (const proxy of proxies) await proxy?.then((egress) => egress.remove()).catch(() => undefined);
    return removed;
  }

  async close(): Promise<void> {
    this.closed = true;
    const network = await this.openNetwork?.catch(() => undefined);
    this.openNetwork = undefined;
    if (network) await removeOpenNetwork(this.docker, network);
  }

  sweepOrphans(log: Logger): Promise<string[]> {
    return sweepOrphans(this.docker, makeIsOwnerAlive(os.hostname()), log);
  }

  async sandboxesOf(ownerPid: number): Promise<SandboxInfo[]> {
    const containers = await this.docker.listContainers({
      all: true,
      filters: { label: [`${LABEL_OWNER_PID}=${ownerPid}`] },
    });
    return Promise.all(
      containers.map(async (c) => {
        const info = await this.docker.getContainer(c.Id).inspect();
        return {
          sandboxClass: c.Labels[LABEL_CLASS] ?? '',
          network: String(info.HostConfig.NetworkMode ?? ''),
          mounts: info.Mounts.map((m) => ({ target: m.Destination, readOnly: !m.RW })),
          user: info.Config.User,
          capabilitiesDropped: (info.HostConfig.CapDrop as string[] | undefined) ?? [],
        };
      }),
    );
  }
}
