import { parseEgressHosts } from '../../policy/egress-hosts.js';
import { LABEL_CLASS } from '../sandbox-labels.js';
import { EGRESS_PROXY_IMAGE } from '../squid-config.js';
import { squidConfig, SQUID_PORT } from '../squid-config.js';
import type { SandboxSpec } from '../sandbox-engine.js';
import { kubeName, labelValue, type KubeObject } from './kubernetes-objects.js';
import {
  LABEL_EGRESS_PROXY,
  LABEL_POD,
  ownedMeta,
  ownedPod,
  restrictedContext,
  sessionLabels,
  type KubernetesTarget,
} from './sandbox-pod.js';

/**
 * Pure: the egress proxy of one sandbox class on Kubernetes — its Pod (hintbox's Squid image,
 * configured as on Docker), a Service in front of it, and a NetworkPolicy that lets only that
 * class's sandbox Pods reach it and it reach only the outside world's web ports (no Pod or
 * Service of the cluster). The sandboxes themselves have no other egress (sandbox-pod.ts).
 */

/** Debian's `proxy` user, as which the proxy image runs Squid. */
const PROXY_UID = 13;

export function renderEgressProxy(
  input: Pick<SandboxSpec, 'session' | 'profile' | 'sandboxId' | 'grant'> & { target: KubernetesTarget },
): KubeObject[] {
  const { target, sandboxId } = input;
  const hosts = input.grant.egress?.hosts ?? [];
  const name = kubeName(`hintbox-${input.session.sessionId}-${input.profile.name}-${sandboxId}-egress`);
  const labels = {
    ...sessionLabels(input),
    [LABEL_CLASS]: labelValue(LABEL_CLASS, `egress-${sandboxId}`),
    [LABEL_EGRESS_PROXY]: '1',
    [LABEL_POD]: name,
  };
  // The sandboxes it serves are chosen by the NetworkPolicy below; the proxy's own address
  // rules (no private, loopback or link-local address; see squid-config.ts) still apply.
  const config = squidConfig({
    hosts: parseEgressHosts(hosts),
    clients: ['0.0.0.0/0', '::/0'],
    hostAddresses: [],
    listen: 'all',
  });
  const limits = { cpu: '500m', memory: `${128 * 1024 ** 2}` };
  const pod = ownedPod(
    name,
    target,
    labels,
    { uid: PROXY_UID, gid: PROXY_UID },
    {
      containers: [
        {
          name: 'squid',
          image: EGRESS_PROXY_IMAGE,
          imagePullPolicy: 'IfNotPresent',
          env: [{ name: 'HINTBOX_SQUID_CONF', value: config }],
          ports: [{ name: 'proxy', containerPort: SQUID_PORT, protocol: 'TCP' }],
          securityContext: restrictedContext(PROXY_UID, PROXY_UID),
          resources: { requests: limits, limits },
          volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
        },
      ],
      volumes: [{ name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } }],
    },
  );
  const service: KubeObject = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: ownedMeta(name, target, labels),
    spec: {
      type: 'ClusterIP',
      selector: { [LABEL_POD]: name },
      ports: [{ name: 'proxy', port: SQUID_PORT, targetPort: SQUID_PORT, protocol: 'TCP' }],
    },
  };
  const policy: KubeObject = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: ownedMeta(name, target, labels),
    spec: {
      podSelector: { matchLabels: { [LABEL_POD]: name } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        {
          from: [{ podSelector: { matchLabels: { ...sessionLabelsOnly(labels), [LABEL_CLASS]: sandboxId } } }],
          ports: [{ protocol: 'TCP', port: SQUID_PORT }],
        },
      ],
      egress: [
        // Name resolution, then the web ports of public addresses only: never the cluster's own.
        {
          ports: [
            { protocol: 'UDP', port: 53 },
            { protocol: 'TCP', port: 53 },
          ],
        },
        {
          to: [
            {
              ipBlock: {
                cidr: '0.0.0.0/0',
                except: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10'],
              },
            },
          ],
          ports: [...new Set(hosts.map((h) => Number(h.slice(h.lastIndexOf(':') + 1))))].map((port) => ({
            protocol: 'TCP',
            port,
          })),
        },
      ],
    },
  };
  return [pod, service, policy];
}

function sessionLabelsOnly(labels: Record<string, string>): Record<string, string> {
  return { 'hintbox.session': labels['hintbox.session'] as string };
}
