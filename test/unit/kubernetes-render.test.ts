import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { planSandboxes, type Ceiling } from '../../src/policy/plan-sandboxes.js';
import { renderSession } from '../../src/engine/kubernetes/render-session.js';
import { restrictedViolations } from '../../src/engine/kubernetes/pod-security.js';
import type { KubernetesTarget } from '../../src/engine/kubernetes/sandbox-pod.js';
import type { KubeObject } from '../../src/engine/kubernetes/kubernetes-objects.js';
import type { SandboxSpec } from '../../src/engine/sandbox-engine.js';
import { schemaProblems } from './support/kubernetes-schema.js';

const GOLDEN = new URL('../fixtures/kubernetes/session.golden.json', import.meta.url);
const tools = (
  JSON.parse(readFileSync(new URL('../fixtures/filesystem-tools.json', import.meta.url), 'utf8')) as {
    tools: { name: string; annotations?: unknown }[];
  }
).tools;

const ceiling: Ceiling = {
  mounts: [{ source: '/srv/workspace', target: '/workspace', mode: 'rw' }],
  network: { allow: ['docs.example.com:443'], backend: [] },
  split: true,
  overrides: {},
};
// The filesystem server's real tools, and one open-world reader that gets the egress proxy.
const plan = planSandboxes(
  [...tools, { name: 'fetch_docs', annotations: { readOnlyHint: true, openWorldHint: true } }],
  ceiling,
);

const target: KubernetesTarget = {
  namespace: 'hintbox',
  owner: { name: 'hintbox-7d9f-abcde', uid: '0b7c1c9e-0000-4000-8000-000000000001' },
  gate: { image: 'hintbox/hintbox:0.1.0', path: '/usr/lib/hintbox/dist/hintbox-gate' },
  channel: { kind: 'attach', token: 'c0ffee' },
};

function specs(): SandboxSpec[] {
  return plan.sandboxes.map((s) => ({
    session: { sessionId: 'sess42ab', ownerHost: 'hintbox-7d9f-abcde', ownerPid: 1 },
    profile: {
      name: 'filesystem',
      server: { image: 'hintbox/server-filesystem:2026.8.31', args: ['${sandbox:mount.workspace}'] },
      env: {},
      limits: { memory: '256m', cpus: 1, pids: 128, tmpfs: '32m' },
      mounts: [{ name: 'workspace', source: '/srv/workspace', target: '/workspace', mode: 'rw', allowSensitive: [] }],
    },
    sandboxId: s.id,
    grant: { network: s.network, mounts: s.mounts, ...(s.egress ? { egress: s.egress } : {}) },
    command: ['node', '/app/dist/index.js', '${sandbox:mount.workspace}'],
    defaultUser: { uid: 10001, gid: 10001 },
  }));
}

function pods(objects: KubeObject[]): KubeObject[] {
  return objects.filter((o) => o.kind === 'Pod');
}

interface Container {
  name: string;
  securityContext: Record<string, unknown>;
  resources: { requests: unknown; limits: unknown };
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean; recursiveReadOnly?: string }[];
}

describe('the Kubernetes renderer', () => {
  it('renders the filesystem server session as the golden file says', () => {
    const { objects } = renderSession(specs(), target);
    // Compared as data (the file is formatted by prettier); rewritten with HINTBOX_UPDATE_GOLDEN=1.
    if (process.env.HINTBOX_UPDATE_GOLDEN === '1') writeFileSync(GOLDEN, JSON.stringify(objects, null, 2) + '\n');
    assert.deepEqual(
      JSON.parse(JSON.stringify(objects)),
      JSON.parse(readFileSync(GOLDEN, 'utf8')),
      'set HINTBOX_UPDATE_GOLDEN=1 (then npx prettier --write the file) to accept a change on purpose',
    );
    assert.deepEqual(
      objects.map((o) => `${o.kind}/${o.metadata.name}`),
      [
        'Pod/hintbox-sess42ab-filesystem-ro-offline',
        'NetworkPolicy/hintbox-sess42ab-filesystem-ro-offline',
        'Pod/hintbox-sess42ab-filesystem-rw-offline',
        'NetworkPolicy/hintbox-sess42ab-filesystem-rw-offline',
        'Pod/hintbox-sess42ab-filesystem-ro-egress-egress',
        'Service/hintbox-sess42ab-filesystem-ro-egress-egress',
        'NetworkPolicy/hintbox-sess42ab-filesystem-ro-egress-egress',
        'Pod/hintbox-sess42ab-filesystem-ro-egress',
        'NetworkPolicy/hintbox-sess42ab-filesystem-ro-egress',
      ],
    );
  });

  // proves: K8S-SCHEMA
  it('renders only objects the Kubernetes API schemas accept, with no field they do not know', () => {
    const { objects } = renderSession(specs(), target);
    assert.ok(objects.length >= 6);
    for (const object of objects)
      assert.deepEqual(schemaProblems(object), [], `${object.kind} ${object.metadata.name}`);
  });

  // proves: K8S-SCHEMA
  it('the strict schema walk refuses a misspelt field that the schema validators alone accept', () => {
    const [pod] = pods(renderSession(specs(), target).objects) as [KubeObject];
    const spec = structuredClone(pod.spec) as { containers: { securityContext: Record<string, unknown> }[] };
    const context = spec.containers[0]!.securityContext;
    delete context.readOnlyRootFilesystem;
    context.readOnlyRootFileSystem = true;
    const problems = schemaProblems({ ...pod, spec });
    assert.deepEqual(problems, [
      `Pod ${pod.metadata.name}: /spec/containers/0/securityContext/readOnlyRootFileSystem: unknown field`,
    ]);
  });

  // proves: K8S-RESTRICTED
  it('every rendered Pod meets the restricted Pod Security level, and a breach of each control is named', () => {
    const render = renderSession(specs(), target);
    assert.deepEqual(render.restricted, []);
    const [pod] = pods(render.objects) as [KubeObject];
    const breaches: [string, (s: { containers: Container[]; [k: string]: unknown }) => void, string][] = [
      [
        'privileged',
        (s) => (s.containers[0]!.securityContext.privileged = true),
        'containers[server].securityContext.privileged',
      ],
      [
        'privilege escalation',
        (s) => delete s.containers[0]!.securityContext.allowPrivilegeEscalation,
        'containers[server].securityContext.allowPrivilegeEscalation',
      ],
      [
        'a capability',
        (s) => (s.containers[0]!.securityContext.capabilities = { drop: ['ALL'], add: ['SYS_ADMIN'] }),
        'containers[server].securityContext.capabilities.add',
      ],
      ['root', (s) => (s.containers[0]!.securityContext.runAsUser = 0), 'containers[server].securityContext.runAsUser'],
      [
        'no seccomp',
        (s) => (s.containers[0]!.securityContext.seccompProfile = { type: 'Unconfined' }),
        'containers[server].securityContext.seccompProfile.type',
      ],
      ['host network', (s) => (s.hostNetwork = true), 'hostNetwork'],
      ['a hostPath', (s) => (s.volumes as unknown[]).push({ name: 'h', hostPath: { path: '/' } }), 'volumes[h]'],
    ];
    for (const [what, breach, field] of breaches) {
      const spec = structuredClone(pod.spec) as { containers: Container[] };
      breach(spec);
      const problems = restrictedViolations(spec);
      assert.equal(problems.length, 1, `${what}: ${problems.join('; ')}`);
      assert.ok(problems[0]!.startsWith(`${field}:`), `${what}: ${problems[0]}`);
    }
  });

  // proves: K8S-RESTRICTED
  it('hardens every sandbox Pod: no token, no service links, own user namespace, requests equal limits, memory scratch with a size', () => {
    for (const pod of pods(renderSession(specs(), target).objects)) {
      const spec = pod.spec as Record<string, unknown> & {
        containers: Container[];
        volumes: Record<string, unknown>[];
      };
      assert.equal(spec.restartPolicy, 'Never');
      assert.equal(spec.automountServiceAccountToken, false);
      assert.equal(spec.enableServiceLinks, false);
      assert.equal(spec.hostUsers, false);
      for (const c of spec.containers) {
        assert.deepEqual(c.resources.requests, c.resources.limits);
        assert.equal(c.securityContext.readOnlyRootFilesystem, true);
      }
      const proxy = pod.metadata.labels!['hintbox.egress-proxy'] === '1';
      for (const v of spec.volumes.filter((v) => !proxy && (v.name === 'tmp' || v.name === 'home'))) {
        assert.deepEqual(v.emptyDir, { medium: 'Memory', sizeLimit: String(32 * 1024 ** 2) });
      }
      assert.deepEqual(
        pod.metadata.ownerReferences?.map((o) => o.uid),
        [target.owner!.uid],
      );
    }
  });

  // proves: K8S-READONLY-MOUNTS
  it('mounts the data read-only and recursively so in read-only classes, read-write only where the grant says', () => {
    const byClass = new Map(
      pods(renderSession(specs(), target).objects).map((p) => [
        p.metadata.labels!['hintbox.class'],
        (p.spec as { containers: Container[] }).containers[0]!.volumeMounts.find((m) => m.mountPath === '/workspace'),
      ]),
    );
    assert.deepEqual(byClass.get('ro-offline'), {
      name: 'mount-0',
      mountPath: '/workspace',
      readOnly: true,
      recursiveReadOnly: 'Enabled',
      mountPropagation: 'None',
    });
    assert.deepEqual(byClass.get('rw-offline'), { name: 'mount-0', mountPath: '/workspace', readOnly: false });
  });

  // proves: K8S-NETWORK
  it('gives every sandbox a deny-all NetworkPolicy; an egress class may reach only its proxy Pod, on the proxy port', () => {
    const { objects } = renderSession(specs(), target);
    const policies = objects.filter((o) => o.kind === 'NetworkPolicy' && !o.metadata.name.endsWith('-egress'));
    assert.equal(policies.length, pods(objects).filter((p) => !p.metadata.name.endsWith('-egress')).length);
    for (const policy of policies) {
      const spec = policy.spec as {
        policyTypes: string[];
        ingress: unknown[];
        egress: { to: unknown[]; ports: unknown[] }[];
      };
      assert.deepEqual(spec.policyTypes, ['Ingress', 'Egress']);
      assert.deepEqual(spec.ingress, []);
      if (policy.metadata.labels!['hintbox.class'] === 'ro-egress') {
        assert.deepEqual(spec.egress, [
          {
            to: [{ podSelector: { matchLabels: { 'hintbox.session': 'sess42ab', 'hintbox.egress-proxy': '1' } } }],
            ports: [{ protocol: 'TCP', port: 3128 }],
          },
        ]);
      } else assert.deepEqual(spec.egress, []);
    }
  });

  it('fails closed on what it cannot render: a database grant, an open network, a name Kubernetes refuses', () => {
    const [spec] = specs() as [SandboxSpec];
    assert.throws(
      () => renderSession([{ ...spec, database: { socketDir: '/tmp/x', env: {} } }], target),
      /a database grant is not rendered for Kubernetes yet/,
    );
    assert.throws(
      () => renderSession([{ ...spec, grant: { ...spec.grant, network: 'bridge' } }], target),
      /an open network \(network: open\) is not rendered/,
    );
    assert.throws(
      () => renderSession([{ ...spec, profile: { ...spec.profile, name: 'File_System' } }], target),
      /cannot label a Kubernetes object|cannot name a Kubernetes object/,
    );
  });

  it('with hostPath volumes (podman kube play, one node): the restricted check names exactly those volumes', () => {
    const render = renderSession(specs(), { ...target, volumes: { kind: 'hostPath' } });
    assert.ok(render.restricted.length > 0);
    for (const line of render.restricted) assert.match(line, /: volumes\[mount-0\]: type hostPath is not allowed$/);
  });
});
