import type { KubeObject } from './kubernetes-objects.js';

/**
 * Pure: where a sandbox Pod is on its way up, read from its `status`. A Pod that can never come
 * up (its image cannot be pulled, its gate's copy failed, it ended) is said at once in one line,
 * rather than waited on until the start times out.
 */

export type PodProgress = { state: 'running' } | { state: 'pending'; why: string } | { state: 'failed'; why: string };

/** Waiting reasons the kubelet does not recover from by itself within a start. */
const FATAL_WAITING = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'ErrImageNeverPull',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
  'CrashLoopBackOff',
]);

interface ContainerStatus {
  name?: string;
  image?: string;
  imageID?: string;
  state?: {
    running?: object;
    waiting?: { reason?: string; message?: string };
    terminated?: { exitCode?: number; reason?: string; message?: string };
  };
}

interface PodStatus {
  phase?: string;
  reason?: string;
  message?: string;
  conditions?: { type?: string; status?: string; reason?: string; message?: string }[];
  containerStatuses?: ContainerStatus[];
  initContainerStatuses?: ContainerStatus[];
}

/** How far `pod`'s container `container` is: running, still coming (and why), or never. */
export function podProgress(pod: KubeObject, container: string): PodProgress {
  const status = (pod.status ?? {}) as PodStatus;
  if (status.phase === 'Failed' || status.phase === 'Succeeded') {
    return { state: 'failed', why: `it ended (${status.phase}${detail(status.reason, status.message)})` };
  }
  for (const init of status.initContainerStatuses ?? []) {
    const problem = containerProblem(init, 'its gate (the initContainer)');
    if (problem) return { state: 'failed', why: problem };
  }
  const own = (status.containerStatuses ?? []).find((c) => c.name === container);
  if (own) {
    const problem = containerProblem(own, `image ${own.image ?? '?'}`);
    if (problem) return { state: 'failed', why: problem };
    if (own.state?.running && status.phase === 'Running') return { state: 'running' };
    if (own.state?.waiting)
      return { state: 'pending', why: `waiting${detail(own.state.waiting.reason, own.state.waiting.message)}` };
  }
  const unscheduled = status.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False');
  if (unscheduled) return { state: 'pending', why: `not scheduled${detail(unscheduled.reason, unscheduled.message)}` };
  return { state: 'pending', why: `phase ${status.phase ?? 'unknown'}` };
}

/** The image the runtime resolved for `container` (`registry/name@sha256:…`), once it runs. */
export function runningImageId(pod: KubeObject, container: string): string | undefined {
  const own = ((pod.status as PodStatus | undefined)?.containerStatuses ?? []).find((c) => c.name === container);
  return own?.imageID || undefined;
}

function containerProblem(status: ContainerStatus, what: string): string | undefined {
  const waiting = status.state?.waiting;
  if (waiting?.reason && FATAL_WAITING.has(waiting.reason)) {
    const pull = /Image|Pull/.test(waiting.reason) ? ' (is it in a registry the cluster can pull from?)' : '';
    return `${what} cannot start: ${waiting.reason}${detail(undefined, waiting.message)}${pull}`;
  }
  const ended = status.state?.terminated;
  // An initContainer that ended well is done; any container that ended otherwise is not coming.
  if (ended && (ended.exitCode !== 0 || what.startsWith('image'))) {
    return `${what} ended with code ${ended.exitCode ?? '?'}${detail(ended.reason, ended.message)}`;
  }
  return undefined;
}

function detail(reason: string | undefined, message: string | undefined): string {
  const text = [reason, message].filter(Boolean).join(': ').replace(/\s+/g, ' ').trim();
  return text ? `: ${text.slice(0, 300)}` : '';
}
