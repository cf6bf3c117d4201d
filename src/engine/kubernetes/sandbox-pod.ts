import { parseSize } from '../../profile/profile-schema.js';
import { mountValues, substituteSandboxValues } from '../../profile/sandbox-values.js';
import { sandboxUserIds, type SandboxSpec } from '../sandbox-engine.js';
import {
  egressRelayEnv,
  GATE_SOCKET_ENV,
  GATE_TOKEN_ENV,
  GATE_TUNABLES_ENV,
  SANDBOX_IO_DIR,
} from '../gate-variables.js';
import {
  containerName,
  LABEL_CLASS,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PID,
  LABEL_PREVIEW,
  LABEL_SERVER,
  LABEL_SESSION,
} from '../sandbox-labels.js';
import { commandWithValues, proxyEnv, SANDBOX_HOME, SANDBOX_TMP } from '../sandbox-process.js';
import { volumeMasks } from '../image-volumes.js';
import { SQUID_PORT } from '../squid-config.js';
import { kubeName, labelValue, type KubeObject, type ObjectMeta, type OwnerReference } from './kubernetes-objects.js';

/**
 * Pure translation of a planned sandbox into a Kubernetes Pod and its deny-all NetworkPolicy:
 * the same promises as the Docker engine's container spec (container-spec.ts), in the API's
 * words. What Kubernetes has no field for (a pids limit, a per-call freeze) is said in
 * docs/engines.md, not pretended here.
 */

/** Where the gate binary is in a sandbox Pod: the initContainer copies it into this emptyDir. */
export const POD_GATE_DIR = '/run/hintbox/bin';
export const POD_GATE_PATH = `${POD_GATE_DIR}/gate`;
/** Where hintbox's own image keeps the static gate (images/hintbox): the initContainer copies it from there. */
export const HINTBOX_IMAGE_GATE_PATH = '/usr/lib/hintbox/dist/hintbox-gate';
/** The gate's socket variable set to this: its stdin and stdout are the channel (the API's attach). */
export const GATE_STDIO = '-';
/** The label that selects one sandbox Pod (its NetworkPolicy's podSelector). */
export const LABEL_POD = 'hintbox.pod';
/** The label of the session's egress proxy Pod (what egress classes may reach). */
export const LABEL_EGRESS_PROXY = 'hintbox.egress-proxy';

/** Where the cluster is and how the sandboxes reach hintbox; the same for a whole session. */
export interface KubernetesTarget {
  namespace: string;
  /** hintbox's own Pod: every object is owned by it, so the cluster collects what a dead hintbox left. */
  owner?: { name: string; uid: string };
  /** An image holding the static gate binary at `gate.path` and a `cp` (hintbox's own image). */
  gate: { image: string; path: string };
  /**
   * How hintbox reaches the gate: `attach` (the API's attach to the Pod's stdin and stdout, over
   * WebSocket: calls never use the pod network), or `socket` (the gate's Unix socket in a host
   * folder bound at SANDBOX_IO_DIR: for `podman kube play` and single-node setups, which have no
   * attach to stdin).
   */
  channel: { kind: 'attach'; token: string } | { kind: 'socket'; hostDir: string; sandboxPath: string; token: string };
  /**
   * How the profile's mounts reach the Pod: `pvc` (default; the operator's PersistentVolumeClaims,
   * named by `claims[source]`, else `hintbox-<mount name>`), or `hostPath` (the node's folder; not
   * allowed by the baseline and restricted Pod Security levels).
   */
  volumes?: { kind: 'pvc'; claims?: Readonly<Record<string, string>> } | { kind: 'hostPath' };
  /** The session's egress proxy Service address (`http://10.0.0.7:3128`): for classes with egress. */
  egressProxyUrl?: string;
  /** `hostUsers: false` (a user namespace per Pod): default true; clusters before 1.33 need the feature gate. */
  userNamespaces?: boolean;
}

export interface SandboxPodInput extends SandboxSpec {
  target: KubernetesTarget;
  /** The image's `VOLUME` paths: each gets a bounded memory emptyDir (the runtime would make a writable folder). */
  imageVolumes?: readonly string[];
}

/** The session-wide labels of every object hintbox makes on the cluster. */
export function sessionLabels(input: Pick<SandboxSpec, 'session' | 'profile'>): Record<string, string> {
  return {
    [LABEL_SESSION]: labelValue(LABEL_SESSION, input.session.sessionId),
    [LABEL_SERVER]: labelValue(LABEL_SERVER, input.profile.name),
    [LABEL_OWNER_HOST]: labelValue(LABEL_OWNER_HOST, input.session.ownerHost),
    [LABEL_OWNER_PID]: String(input.session.ownerPid),
  };
}

/** Metadata with the namespace, labels and the owner reference to hintbox's own Pod. */
export function ownedMeta(name: string, target: KubernetesTarget, labels: Record<string, string>): ObjectMeta {
  const owner: OwnerReference[] = target.owner
    ? [{ apiVersion: 'v1', kind: 'Pod', name: target.owner.name, uid: target.owner.uid, blockOwnerDeletion: false }]
    : [];
  return { name, namespace: target.namespace, labels, ...(owner.length ? { ownerReferences: owner } : {}) };
}

/** The restricted Pod Security container context, for the sandbox's user. */
export function restrictedContext(uid: number, gid: number): Record<string, unknown> {
  return {
    runAsNonRoot: true,
    runAsUser: uid,
    runAsGroup: gid,
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
    privileged: false,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

/**
 * The fields every Pod hintbox makes shares: run once (never restarted), no service-account
 * token, no service links, its own user namespace unless the target says the cluster has none,
 * and the Pod-level restricted context for `uid`:`gid`.
 */
export function ownedPod(
  name: string,
  target: KubernetesTarget,
  labels: Record<string, string>,
  user: { uid: number; gid: number },
  spec: Record<string, unknown>,
): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: ownedMeta(name, target, labels),
    spec: { ...podBasics(target, user), ...spec },
  };
}

function podBasics(target: KubernetesTarget, { uid, gid }: { uid: number; gid: number }): Record<string, unknown> {
  return {
    restartPolicy: 'Never',
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    ...(target.userNamespaces === false ? {} : { hostUsers: false }),
    securityContext: {
      runAsNonRoot: true,
      runAsUser: uid,
      runAsGroup: gid,
      seccompProfile: { type: 'RuntimeDefault' },
    },
  };
}

/** The Pod of one sandbox, and the NetworkPolicy that leaves it no network but what its grant has. */
export function renderSandboxPod(input: SandboxPodInput): KubeObject[] {
  const { profile, target, sandboxId } = input;
  if (input.database) {
    throw new Error(
      `sandbox ${sandboxId}: a database grant is not rendered for Kubernetes yet (its relay socket is a host folder)`,
    );
  }
  // A dry run never reaches the outside world, whatever its grant says.
  const network = input.preview ? 'none' : input.grant.network;
  if (network === 'bridge') {
    throw new Error(`sandbox ${sandboxId}: an open network (network: open) is not rendered for Kubernetes`);
  }
  if (network === 'egress' && !target.egressProxyUrl) {
    throw new Error(`sandbox ${sandboxId}: its egress proxy is not ready (no network without it)`);
  }
  const { uid, gid } = sandboxUserIds(profile, input.defaultUser);
  const name = kubeName(containerName(input.session, profile.name, sandboxId), ...podSuffix(input));
  const labels = {
    ...sessionLabels(input),
    [LABEL_CLASS]: labelValue(LABEL_CLASS, input.preview ? `preview-${sandboxId}` : sandboxId),
    ...(input.preview ? { [LABEL_PREVIEW]: '1' } : {}),
    [LABEL_POD]: name,
  };
  const tmpfs = `${parseSize(profile.limits.tmpfs)}`;
  const memory = `${parseSize(profile.limits.memory)}`;
  const resources = { cpu: `${Math.round(profile.limits.cpus * 1000)}m`, memory };

  const volumes: Record<string, unknown>[] = [];
  const mounts: Record<string, unknown>[] = [];
  const scratch = (volume: string, mountPath: string): void => {
    volumes.push({ name: volume, emptyDir: { medium: 'Memory', sizeLimit: tmpfs } });
    mounts.push({ name: volume, mountPath });
  };
  scratch('tmp', SANDBOX_TMP);
  scratch('home', SANDBOX_HOME);
  input.grant.mounts.forEach((m, i) => {
    const volume = `mount-${i}`;
    volumes.push({ name: volume, ...mountSource(m.source, profile.mounts, target) });
    mounts.push({
      name: volume,
      mountPath: m.target,
      readOnly: m.readOnly,
      // Nested mount points under a read-only mount stay read-only too (Kubernetes 1.33+;
      // the kubelet refuses the Pod where the runtime cannot, rather than mount it writable).
      ...(m.readOnly ? { recursiveReadOnly: 'Enabled', mountPropagation: 'None' } : {}),
    });
  });
  // The gate's copy: written by the initContainer, read-only to the server.
  volumes.push({ name: 'gate', emptyDir: { sizeLimit: '16Mi' } });
  mounts.push({ name: 'gate', mountPath: POD_GATE_DIR, readOnly: true });
  if (target.channel.kind === 'socket') {
    volumes.push({ name: 'gate-io', hostPath: { path: target.channel.hostDir, type: 'Directory' } });
    mounts.push({ name: 'gate-io', mountPath: SANDBOX_IO_DIR, readOnly: true });
  }
  const masks = volumeMasks({
    imageVolumes: input.imageVolumes ?? [],
    binds: mounts.filter((m) => m.name !== 'tmp' && m.name !== 'home').map((m) => String(m.mountPath)),
    tmpfs: [SANDBOX_TMP, SANDBOX_HOME],
    options: '',
    what: `sandbox ${sandboxId}`,
  });
  Object.keys(masks).forEach((path, i) => scratch(`image-volume-${i}`, path));

  const values = { ...mountValues(profile.mounts) };
  const profileEnv = Object.fromEntries(
    Object.entries(profile.env).map(([k, v]) => [k, substituteSandboxValues(v, values, `env.${k}`)]),
  );
  const command = commandWithValues(input.command, profile.server.args, values);
  const env = {
    ...profileEnv,
    ...(network === 'egress' ? proxyEnv(target.egressProxyUrl as string) : {}),
    HOME: SANDBOX_HOME,
    TMPDIR: SANDBOX_TMP,
    [GATE_SOCKET_ENV]: target.channel.kind === 'socket' ? target.channel.sandboxPath : GATE_STDIO,
    [GATE_TOKEN_ENV]: target.channel.token,
    // The relay is not used here (the Pod's egress is its Service), but the variables are set empty all the same: the image may not set them.
    ...egressRelayEnv(undefined),
    GLIBC_TUNABLES: '',
    [GATE_TUNABLES_ENV]: profileEnv.GLIBC_TUNABLES === undefined ? '' : `=${profileEnv.GLIBC_TUNABLES}`,
  };
  const pod = ownedPod(
    name,
    target,
    labels,
    { uid, gid },
    {
      hostNetwork: false,
      hostPID: false,
      hostIPC: false,
      shareProcessNamespace: false,
      initContainers: [
        {
          name: 'gate',
          image: target.gate.image,
          imagePullPolicy: 'IfNotPresent',
          command: ['cp', target.gate.path, POD_GATE_PATH],
          securityContext: restrictedContext(uid, gid),
          resources: { requests: { cpu: '100m', memory: '32Mi' }, limits: { cpu: '100m', memory: '32Mi' } },
          volumeMounts: [{ name: 'gate', mountPath: POD_GATE_DIR }],
        },
      ],
      containers: [
        {
          name: 'server',
          image: input.imageId ?? profile.server.image,
          imagePullPolicy: 'IfNotPresent',
          // The gate runs first and executes the server once hintbox releases it.
          command: [POD_GATE_PATH, ...command],
          args: [],
          workingDir: profile.server.workdir ?? SANDBOX_HOME,
          env: Object.entries(env).map(([k, v]) => ({ name: k, value: v })),
          // stdin only for the API's attach; the gate's socket needs none.
          stdin: target.channel.kind === 'attach',
          stdinOnce: target.channel.kind === 'attach',
          tty: false,
          securityContext: restrictedContext(uid, gid),
          resources: { requests: resources, limits: resources },
          volumeMounts: mounts,
        },
      ],
      volumes,
    },
  );
  return [pod, sandboxNetworkPolicy(name, labels, target, network === 'egress')];
}

function podSuffix(input: SandboxSpec): string[] {
  if (input.preview) return ['preview'];
  return input.generation ? [String(input.generation)] : [];
}

/** A profile mount's volume source: the operator's PVC for it, or the node's folder. */
function mountSource(
  source: string,
  profileMounts: SandboxSpec['profile']['mounts'],
  target: KubernetesTarget,
): Record<string, unknown> {
  const volumes = target.volumes ?? { kind: 'pvc' };
  if (volumes.kind === 'hostPath') return { hostPath: { path: source, type: 'Directory' } };
  const named = profileMounts?.find((m) => m.source === source)?.name;
  const claim = volumes.claims?.[source] ?? (named ? `hintbox-${named}` : undefined);
  if (!claim) {
    throw new Error(
      `mount ${source}: no PersistentVolumeClaim for it (give the mount a name, or a claim for its source)`,
    );
  }
  return { persistentVolumeClaim: { claimName: kubeName(claim) } };
}

/**
 * Deny-all, both ways, for one sandbox Pod; an egress class may reach only the session's
 * egress proxy, on its port. Holds only where the cluster's network plugin enforces
 * NetworkPolicy (a cluster without one accepts the object and enforces nothing).
 */
function sandboxNetworkPolicy(
  podName: string,
  labels: Record<string, string>,
  target: KubernetesTarget,
  egress: boolean,
): KubeObject {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: ownedMeta(podName, target, labels),
    spec: {
      podSelector: { matchLabels: { [LABEL_POD]: podName } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: egress
        ? [
            {
              to: [
                {
                  podSelector: {
                    matchLabels: { [LABEL_SESSION]: labels[LABEL_SESSION] as string, [LABEL_EGRESS_PROXY]: '1' },
                  },
                },
              ],
              ports: [{ protocol: 'TCP', port: SQUID_PORT }],
            },
          ]
        : [],
    },
  };
}
