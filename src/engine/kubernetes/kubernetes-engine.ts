import { randomBytes } from 'node:crypto';
import os from 'node:os';
// The config module alone: the package's index would bring every generated API model into the bundle.
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import type { Profile } from '../../profile/load-profile.js';
import { UsageError } from '../../util/hintbox-error.js';
import type { Logger } from '../../util/logger.js';
import { makeIsOwnerAlive } from '../../util/process-alive.js';
import { LABEL_CLASS, LABEL_OWNER_HOST, LABEL_OWNER_PID } from '../sandbox-labels.js';
import { serverCommand } from '../sandbox-process.js';
import { SQUID_PORT } from '../squid-config.js';
import {
  SandboxStartError,
  type BindSource,
  type HeldSandbox,
  type HoldOptions,
  type PreparedImage,
  type SandboxEngine,
  type SandboxInfo,
  type SandboxSpec,
} from '../sandbox-engine.js';
import { renderEgressProxy } from './egress-proxy-pod.js';
import { KubeApi, type Kind } from './kube-api.js';
import type { KubeObject } from './kubernetes-objects.js';
import { holdPod, waitRunning } from './kubernetes-sandbox.js';
import { removeKubernetesSession, sweepKubernetesOrphans } from './kubernetes-sweep.js';
import { HINTBOX_IMAGE_GATE_PATH, renderSandboxPod, type KubernetesTarget } from './sandbox-pod.js';

/** The cluster's name in a kubeconfig that `loadFromDefault` made from a Pod's service account. */
const IN_CLUSTER = 'inCluster';

export interface KubernetesEngineOptions {
  kubeConfig: KubeConfig;
  log: Logger;
  /** Default: the kubeconfig context's namespace, else `default`. */
  namespace?: string;
  /** An image with the gate at `HINTBOX_IMAGE_GATE_PATH` (HINTBOX_GATE_IMAGE). Default: hintbox's own Pod's image. */
  gateImage?: string;
  /** hintbox's own Pod (owner of everything it makes). Default, in a Pod: the Pod named as this host. */
  owner?: { name: string; uid: string };
  /** How profile mounts reach the Pods. Default: the operator's PersistentVolumeClaims. */
  volumes?: KubernetesTarget['volumes'];
  /** `hostUsers: false` on the sandbox Pods. Default true. */
  userNamespaces?: boolean;
  /** How often a Pod's status is read while it comes up. Default 250 ms. */
  pollMs?: number;
  /** This process's host name as its objects are labelled (`SessionIdentity.ownerHost`). Default `os.hostname()`. */
  hostName?: string;
}

/**
 * The sandbox engine on a Kubernetes cluster: a sandbox is a Pod (sandbox-pod.ts) behind a
 * deny-all NetworkPolicy, its stdio the API's attach to hintbox's gate (pod-attach.ts); an
 * egress class gets its proxy Pod and Service first. hintbox builds no image here: every image
 * must already be in a registry the cluster pulls from, and one that is not fails the sandbox's
 * start in one line (nothing left). Writers are frozen between calls by their gate, over the
 * attach (pod-attach.ts); a database grant or an open network is refused (the renderer).
 */
export class KubernetesEngine implements SandboxEngine {
  readonly recursiveReadOnly = true;
  private readonly api: KubeApi;
  private readonly hostName: string;
  /** Each class's egress proxy URL, by session and class; made at its first sandbox. */
  private readonly egress = new Map<string, Promise<string>>();
  /** The image each reference resolved to when it first ran: later Pods run exactly it. */
  private readonly pinned = new Map<string, string>();

  private constructor(private readonly options: KubernetesEngineOptions & { namespace: string; gateImage: string }) {
    this.api = new KubeApi(options.kubeConfig, options.namespace);
    this.hostName = options.hostName ?? os.hostname();
  }

  /**
   * The engine for the kubeconfig's current context (KUBECONFIG, ~/.kube/config, or the Pod's
   * service account). hintbox's own Pod, when it runs in one, owns every object and gives the
   * gate's image unless `gateImage` names one.
   */
  static async connect(
    options: Omit<KubernetesEngineOptions, 'kubeConfig'> & { kubeConfig?: KubeConfig },
  ): Promise<KubernetesEngine> {
    const kubeConfig = options.kubeConfig ?? new KubeConfig();
    if (!options.kubeConfig) kubeConfig.loadFromDefault();
    if (!kubeConfig.getCurrentCluster()) {
      throw new UsageError('the Kubernetes engine: no cluster found (set KUBECONFIG, or run hintbox in a Pod)');
    }
    const namespace =
      options.namespace ?? kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace ?? 'default';
    const api = new KubeApi(kubeConfig, namespace);
    // Only in a Pod (the service account's config): elsewhere a Pod that happens to bear this
    // host's name is not hintbox's, and must neither own its sandboxes nor give their gate.
    const inPod = kubeConfig.getCurrentCluster()?.name === IN_CLUSTER;
    const own = options.owner || !inPod ? undefined : await api.read('Pod', options.hostName ?? os.hostname());
    const owner = options.owner ?? (own?.metadata.uid ? { name: own.metadata.name, uid: own.metadata.uid } : undefined);
    const ownImage = ((own?.spec as { containers?: { image?: string }[] } | undefined)?.containers ?? [])[0]?.image;
    const gateImage = options.gateImage ?? ownImage;
    if (!gateImage) {
      throw new UsageError(
        `HINTBOX_GATE_IMAGE: hintbox runs outside the cluster (or its Pod ${options.hostName ?? os.hostname()} is not in namespace ${namespace}): name an image the cluster can pull that holds hintbox's gate at ${HINTBOX_IMAGE_GATE_PATH} (hintbox's own image)`,
      );
    }
    return new KubernetesEngine({ ...options, kubeConfig, namespace, gateImage, ...(owner ? { owner } : {}) });
  }

  get description(): string {
    const owner = this.options.owner ? `, owned by pod ${this.options.owner.name}` : '';
    return `Kubernetes at ${this.api.server}, namespace ${this.options.namespace}${owner}`;
  }

  /**
   * Resolves what the image runs without pulling it (hintbox has no registry client): the
   * profile's `server.command` and `server.args`. Whether the cluster can pull it shows at the
   * first Pod, which then fails in one line.
   */
  prepareImage(profile: Pick<Profile, 'server' | 'file'> & Partial<Pick<Profile, 'network'>>): Promise<PreparedImage> {
    const { server } = profile;
    try {
      return Promise.resolve({ id: server.image, command: serverCommand(server, {}) });
    } catch (error) {
      return Promise.reject(
        new UsageError(
          `${profile.file}: ${(error as Error).message}; on Kubernetes hintbox cannot read an image's own command`,
        ),
      );
    }
  }

  /** Nothing of this host is bound into a Pod: mounts are the operator's volumes. */
  checkBindSources(_sources: readonly BindSource[]): Promise<void> {
    return Promise.resolve();
  }

  async hold(spec: SandboxSpec, options: HoldOptions): Promise<HeldSandbox> {
    const id = spec.preview ? `preview-${spec.sandboxId}` : spec.sandboxId;
    const token = randomBytes(16).toString('hex');
    const egressProxyUrl =
      spec.grant.network === 'egress' && !spec.preview ? await this.egressOf(spec, options) : undefined;
    const reference = spec.imageId ?? spec.profile.server.image;
    let objects: KubeObject[];
    try {
      objects = renderSandboxPod({
        ...spec,
        imageId: this.pinned.get(reference) ?? reference,
        target: { ...this.target({ kind: 'attach', token }), ...(egressProxyUrl ? { egressProxyUrl } : {}) },
      });
    } catch (error) {
      throw new SandboxStartError(`${(error as Error).message} (the Kubernetes engine)`);
    }
    return holdPod({
      api: this.api,
      kubeConfig: this.options.kubeConfig,
      id,
      objects,
      token,
      log: options.log,
      startTimeoutMs: options.startTimeoutMs,
      ...(spec.clientCapabilities ? { clientCapabilities: spec.clientCapabilities } : {}),
      ...(this.options.pollMs ? { pollMs: this.options.pollMs } : {}),
      onImageId: (imageId) => {
        // A pullable digest only (`name@sha256:…`); a runtime's local id would not pull elsewhere.
        if (/^[^\s@]+@sha256:[0-9a-f]{64}$/.test(imageId) && !imageId.includes('://') && !this.pinned.has(reference)) {
          this.pinned.set(reference, imageId);
        }
      },
    });
  }

  private target(channel: KubernetesTarget['channel']): KubernetesTarget {
    const { namespace, owner, gateImage, volumes, userNamespaces } = this.options;
    return {
      namespace,
      gate: { image: gateImage, path: HINTBOX_IMAGE_GATE_PATH },
      channel,
      ...(owner ? { owner } : {}),
      ...(volumes ? { volumes } : {}),
      ...(userNamespaces === false ? { userNamespaces: false } : {}),
    };
  }

  /** The class's egress proxy (Pod, Service, NetworkPolicy), made at its first sandbox; its URL by the Service's address. */
  private egressOf(spec: SandboxSpec, options: HoldOptions): Promise<string> {
    const key = `${spec.session.sessionId}/${spec.sandboxId}`;
    let url = this.egress.get(key);
    if (!url) {
      url = this.startEgress(spec, options);
      this.egress.set(key, url);
      url.catch(() => this.egress.get(key) === url && this.egress.delete(key));
    }
    return url;
  }

  private async startEgress(spec: SandboxSpec, options: HoldOptions): Promise<string> {
    const objects = renderEgressProxy({ ...spec, target: this.target({ kind: 'attach', token: '' }) });
    const made: { kind: Kind; name: string }[] = [];
    try {
      // Its policy before the Pod, as for a sandbox.
      for (const object of [...objects].reverse()) {
        await this.api.create(object.kind as Kind, object);
        made.push({ kind: object.kind as Kind, name: object.metadata.name });
      }
      const name = (objects[0] as KubeObject).metadata.name;
      await waitRunning(this.api, name, 'squid', options.startTimeoutMs, this.options.pollMs ?? 250);
      const service = await this.api.read('Service', name);
      const ip = (service?.spec as { clusterIP?: string } | undefined)?.clusterIP;
      if (!ip || ip === 'None') throw new Error(`its Service ${name} has no cluster address`);
      return `http://${ip.includes(':') ? `[${ip}]` : ip}:${SQUID_PORT}`;
    } catch (error) {
      for (const object of made.reverse()) await this.api.delete(object.kind, object.name).catch(() => false);
      throw new SandboxStartError(
        `sandbox ${spec.sandboxId}: its egress proxy did not start: ${(error as Error).message}`,
      );
    }
  }

  async removeSession(sessionId: string): Promise<number> {
    for (const key of [...this.egress.keys()].filter((k) => k.startsWith(`${sessionId}/`))) this.egress.delete(key);
    return removeKubernetesSession(this.api, sessionId);
  }

  /** Nothing is shared between sessions on a cluster. */
  close(): Promise<void> {
    return Promise.resolve();
  }

  sweepOrphans(log: Logger): Promise<string[]> {
    return sweepKubernetesOrphans(this.api, this.hostName, makeIsOwnerAlive(this.hostName), log);
  }

  async sandboxesOf(ownerPid: number): Promise<SandboxInfo[]> {
    const pods = await this.api.list('Pod', `${LABEL_OWNER_PID}=${ownerPid},${LABEL_OWNER_HOST}=${this.hostName}`);
    return pods.map((pod) => {
      const spec = pod.spec as {
        containers?: {
          name?: string;
          env?: { name: string }[];
          securityContext?: { runAsUser?: number; runAsGroup?: number; capabilities?: { drop?: string[] } };
          volumeMounts?: { mountPath: string; readOnly?: boolean }[];
        }[];
      };
      const server = spec.containers?.find((c) => c.name === 'server') ?? spec.containers?.[0];
      const context = server?.securityContext ?? {};
      return {
        sandboxClass: pod.metadata.labels?.[LABEL_CLASS] ?? '',
        network: server?.env?.some((e) => e.name === 'HTTPS_PROXY')
          ? 'egress proxy only (NetworkPolicy)'
          : 'none (NetworkPolicy)',
        mounts: (server?.volumeMounts ?? []).map((m) => ({ target: m.mountPath, readOnly: m.readOnly === true })),
        user: `${context.runAsUser ?? ''}:${context.runAsGroup ?? ''}`,
        capabilitiesDropped: context.capabilities?.drop ?? [],
      };
    });
  }
}
