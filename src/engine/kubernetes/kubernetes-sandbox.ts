import { PassThrough } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import type { ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';
import { monotonicMs } from '../../util/clock.js';
import { delay } from '../../util/delay.js';
import type { Logger } from '../../util/logger.js';
import { collectStderr, STDERR_LOG_MAX_BYTES, STDERR_TAIL_LINES } from '../stderr-log.js';
import { SandboxStartError, type HeldSandbox, type StartedSandbox } from '../sandbox-engine.js';
import { connectReleased } from '../started-sandbox.js';
import type { Kind, KubeApi } from './kube-api.js';
import type { KubeObject } from './kubernetes-objects.js';
import { attachToGate, type AttachedGate } from './pod-attach.js';
import { podProgress, runningImageId } from './pod-status.js';

/**
 * One sandbox on a cluster: its NetworkPolicy, then its Pod (so the Pod never runs a moment
 * without the policy), then, once the Pod runs, the API's attach to its gate. The server is held
 * there until `release`. On any failure both objects are deleted before the error is thrown.
 */

export interface HoldPodOptions {
  api: KubeApi;
  kubeConfig: KubeConfig;
  id: string;
  /** The sandbox's objects as rendered: its Pod and its NetworkPolicy. */
  objects: readonly KubeObject[];
  /** The gate's token (in the Pod's env): what must answer the attach. */
  token: string;
  log: Logger;
  startTimeoutMs: number;
  clientCapabilities?: ClientCapabilities;
  /** How often the Pod's status is read while it comes up. Default 250 ms. */
  pollMs?: number;
  /** Told the image the runtime resolved (`…@sha256:…`) once the Pod runs. */
  onImageId?: (imageId: string) => void;
}

export async function holdPod(options: HoldPodOptions): Promise<HeldSandbox> {
  const { api, id, log } = options;
  const pod = options.objects.find((o) => o.kind === 'Pod');
  if (!pod) throw new SandboxStartError(`sandbox ${id}: nothing to run (no Pod rendered)`);
  const name = pod.metadata.name;
  const made: { kind: Kind; name: string }[] = [];
  let attached: AttachedGate | undefined;
  let removed: Promise<void> | undefined;
  const remove = (): Promise<void> =>
    (removed ??= (async () => {
      attached?.close();
      // The Pod first: what runs goes before the policy that fences it.
      for (const object of [...made].reverse()) await api.delete(object.kind, object.name);
    })().catch((error: unknown) => {
      removed = undefined; // a later call tries again
      throw error;
    }));
  const tail: string[] = [];
  const stderr = new PassThrough();
  collectStderr(stderr, tail, log, { left: STDERR_LOG_MAX_BYTES });
  try {
    for (const object of [...options.objects].sort((a, b) => (a.kind === 'Pod' ? 1 : 0) - (b.kind === 'Pod' ? 1 : 0))) {
      await api.create(object.kind as Kind, object).catch((error: Error) => {
        throw new SandboxStartError(`sandbox ${id}: ${error.message}`);
      });
      made.push({ kind: object.kind as Kind, name: object.metadata.name });
    }
    const running = await waitRunning(api, name, 'server', options.startTimeoutMs, options.pollMs ?? 250).catch(
      (error: Error) => {
        throw new SandboxStartError(`sandbox ${id}: pod ${api.namespace}/${name}: ${error.message}`);
      },
    );
    const imageId = runningImageId(running, 'server');
    if (imageId) options.onImageId?.(imageId);
    attached = await attachToGate({
      kubeConfig: options.kubeConfig,
      namespace: api.namespace,
      pod: name,
      token: options.token,
      timeoutMs: options.startTimeoutMs,
      onStderr: (text) => stderr.write(text),
    });
    const gate = attached;
    void gate.ended.then((status) => {
      if (status) tail.push(`[hintbox] the attach ended: ${status}`);
      stderr.end();
    });
    return {
      id,
      containerId: name,
      remove,
      release: async () => {
        try {
          return await release(gate, { ...options, name, tail, remove });
        } catch (error) {
          await remove().catch((e: Error) => log.warn(`could not remove pod ${name}: ${e.message}`));
          throw error;
        }
      },
    };
  } catch (error) {
    await remove().catch((e: Error) => log.warn(`could not remove sandbox ${id}'s objects: ${e.message}`));
    throw error;
  }
}

async function release(
  gate: AttachedGate,
  ctx: HoldPodOptions & { name: string; tail: string[]; remove: () => Promise<void> },
): Promise<StartedSandbox> {
  const { transport, control } = gate.release();
  void gate.ended.then(() => control.close());
  // Woken while frozen: the gate has killed every process and exits; the Pod goes too.
  const woken = new Promise<string>((resolve) =>
    control.onWoken((error) => {
      ctx.log.error(`sandbox ${ctx.id}: ${error.message}`);
      void ctx.remove().catch((e: Error) => ctx.log.warn(`could not remove pod ${ctx.name}: ${e.message}`));
      resolve(error.message);
    }),
  );
  return connectReleased({
    id: ctx.id,
    containerId: ctx.name,
    stdio: transport,
    closed: gate.ended.then(() => undefined),
    startTimeoutMs: ctx.startTimeoutMs,
    capabilities: ctx.clientCapabilities ?? {},
    stderrSays: () =>
      ctx.tail.length ? `; its stderr ends with:\n${ctx.tail.join('\n')}` : '; it wrote nothing to stderr',
    stderrTail: () => ctx.tail.slice(-STDERR_TAIL_LINES).join('\n'),
    remove: ctx.remove,
    // The gate stops the Pod's processes (a Pod has no pause); a failed freeze is fatal to the
    // sandbox: the caller removes it.
    freeze: () => control.freeze(),
    thaw: () => control.thaw(),
    woken,
  });
}

/** The Pod once its container `container` runs; rejects at once when it never will, or when time runs out. */
export async function waitRunning(
  api: KubeApi,
  name: string,
  container: string,
  timeoutMs: number,
  pollMs: number,
): Promise<KubeObject> {
  const deadline = monotonicMs() + timeoutMs;
  let why = 'not read yet';
  for (;;) {
    const pod = await api.read('Pod', name);
    if (!pod) throw new Error('it was deleted while it came up');
    const progress = podProgress(pod, container);
    if (progress.state === 'running') return pod;
    if (progress.state === 'failed') throw new Error(progress.why);
    why = progress.why;
    if (monotonicMs() + pollMs > deadline) throw new Error(`not running within ${timeoutMs} ms (${why})`);
    await delay(pollMs);
  }
}
