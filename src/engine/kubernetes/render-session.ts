import { SQUID_PORT } from '../squid-config.js';
import type { SandboxSpec } from '../sandbox-engine.js';
import { renderEgressProxy } from './egress-proxy-pod.js';
import type { KubeObject } from './kubernetes-objects.js';
import { restrictedViolations } from './pod-security.js';
import { renderSandboxPod, type KubernetesTarget } from './sandbox-pod.js';

/**
 * Pure: every object a session's sandboxes are on a cluster — per sandbox a Pod and its
 * deny-all NetworkPolicy, and per egress class its proxy's Pod, Service and NetworkPolicy —
 * in the order they would be created (the proxy before the sandboxes it serves). What
 * `hintbox plan --engine kubernetes` prints.
 */
export interface SessionRender {
  objects: KubeObject[];
  /** Each Pod's breaches of the restricted Pod Security level (`pod: field: problem`); hostPath volumes land here. */
  restricted: string[];
}

export function renderSession(
  specs: readonly SandboxSpec[],
  target: KubernetesTarget,
  /** The egress proxies' Service addresses by class, once created; else the Service's name stands in. */
  proxyUrls: Readonly<Record<string, string>> = {},
): SessionRender {
  const objects: KubeObject[] = [];
  for (const spec of specs) {
    let egressProxyUrl: string | undefined;
    if (spec.grant.network === 'egress' && !spec.preview) {
      const proxy = renderEgressProxy({ ...spec, target });
      objects.push(...proxy);
      egressProxyUrl = proxyUrls[spec.sandboxId] ?? `http://${(proxy[1] as KubeObject).metadata.name}:${SQUID_PORT}`;
    }
    objects.push(
      ...renderSandboxPod({ ...spec, target: { ...target, ...(egressProxyUrl ? { egressProxyUrl } : {}) } }),
    );
  }
  const restricted = objects
    .filter((o) => o.kind === 'Pod')
    .flatMap((pod) =>
      restrictedViolations(pod.spec as Record<string, unknown>).map((p) => `${pod.metadata.name}: ${p}`),
    );
  return { objects, restricted };
}
