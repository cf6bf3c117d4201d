import type { Logger } from '../../util/logger.js';
import type { IsOwnerAlive } from '../../util/process-alive.js';
import { LABEL_OWNER_HOST, LABEL_OWNER_PID, LABEL_SESSION } from '../sandbox-labels.js';
import type { Kind, KubeApi } from './kube-api.js';
import type { KubeObject } from './kubernetes-objects.js';

/**
 * Finding and removing what hintbox made on a cluster, by its labels: a session's objects at its
 * end, and those of hintbox processes that are gone. Pods go first (what runs), then Services,
 * then the NetworkPolicies that fenced them.
 */

const ORDER: readonly Kind[] = ['Pod', 'Service', 'NetworkPolicy'];

/** Deletes every object labelled with the session; returns how many Pods there were. */
export async function removeKubernetesSession(api: KubeApi, sessionId: string): Promise<number> {
  let pods = 0;
  for (const kind of ORDER) {
    const objects = await api.list(kind, `${LABEL_SESSION}=${sessionId}`);
    await Promise.all(objects.map((o) => api.delete(kind, o.metadata.name)));
    if (kind === 'Pod') pods = objects.length;
  }
  return pods;
}

/**
 * Is the hintbox that made `object` gone? On this host, its process says (`isOwnerAlive`). On
 * another (another replica, a hintbox Pod that was replaced), the Pod its ownerReference names
 * says: gone, or another Pod of that name (another uid), means dead. An object of another host
 * without an owner reference is left alone: nothing tells whether its hintbox still runs.
 */
export type IsOwnerPodAlive = (name: string, uid: string) => Promise<boolean>;

export async function isOrphan(
  object: KubeObject,
  thisHost: string,
  isOwnerAlive: IsOwnerAlive,
  isOwnerPodAlive: IsOwnerPodAlive,
): Promise<boolean> {
  const labels = object.metadata.labels ?? {};
  const host = labels[LABEL_OWNER_HOST];
  if (host === thisHost) return !isOwnerAlive(host, Number(labels[LABEL_OWNER_PID]));
  const owner = object.metadata.ownerReferences?.find((r) => r.kind === 'Pod');
  return owner ? !(await isOwnerPodAlive(owner.name, owner.uid)) : false;
}

/** Removes the objects of hintbox processes that are gone; returns the removed Pods' names. */
export async function sweepKubernetesOrphans(
  api: KubeApi,
  thisHost: string,
  isOwnerAlive: IsOwnerAlive,
  log: Logger,
): Promise<string[]> {
  const owners = new Map<string, Promise<boolean>>();
  const isOwnerPodAlive: IsOwnerPodAlive = (name, uid) => {
    let alive = owners.get(`${name}/${uid}`);
    if (!alive) {
      alive = api.read('Pod', name).then((pod) => pod !== undefined && pod.metadata.uid === uid);
      owners.set(`${name}/${uid}`, alive);
    }
    return alive;
  };
  const removedPods: string[] = [];
  for (const kind of ORDER) {
    const objects = await api.list(kind, LABEL_SESSION);
    for (const object of objects) {
      if (!(await isOrphan(object, thisHost, isOwnerAlive, isOwnerPodAlive))) continue;
      const { name, labels = {} } = object.metadata;
      if (!(await api.delete(kind, name))) continue;
      if (kind === 'Pod') removedPods.push(name);
      log.info(`swept ${kind} ${name} (session ${labels[LABEL_SESSION]} is no longer running)`);
    }
  }
  return removedPods;
}
