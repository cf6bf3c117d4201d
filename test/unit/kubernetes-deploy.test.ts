import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { restrictedViolations } from '../../src/engine/kubernetes/pod-security.js';
import { schemaProblems } from './support/kubernetes-schema.js';

const BASE = new URL('../../deploy/base/', import.meta.url);
const files = readdirSync(BASE).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
type Manifest = { apiVersion: string; kind: string; metadata: { name: string }; [k: string]: unknown };
const manifests = files.map((f) => parse(readFileSync(new URL(f, BASE), 'utf8')) as Manifest);
const byKind = (kind: string): Manifest => manifests.find((m) => m.kind === kind)!;

describe('the kustomize base (deploy/base)', () => {
  // proves: K8S-SCHEMA
  it('lists every manifest, and each passes the API schemas with no unknown field', () => {
    const kustomization = parse(readFileSync(new URL('kustomization.yaml', BASE), 'utf8')) as { resources: string[] };
    assert.deepEqual([...kustomization.resources].sort(), [...files].sort());
    assert.deepEqual(manifests.map((m) => m.kind).sort(), [
      'ConfigMap',
      'Deployment',
      'PodDisruptionBudget',
      'Role',
      'RoleBinding',
      'Secret',
      'Service',
      'ServiceAccount',
    ]);
    for (const m of manifests) assert.deepEqual(schemaProblems(m), [], `${m.kind} ${m.metadata.name}`);
  });

  // proves: K8S-RESTRICTED
  it('runs hintbox serve under the restricted Pod Security level, probed on /healthz and /readyz', () => {
    const template = (byKind('Deployment').spec as { template: { spec: Record<string, unknown> } }).template.spec;
    assert.deepEqual(restrictedViolations(template), []);
    const [container] = template.containers as { livenessProbe: unknown; readinessProbe: unknown }[];
    assert.deepEqual(container!.livenessProbe, { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 10 });
    // Every server verified, not only served from its lock file: a rollout waits for the new Pods' verification.
    assert.deepEqual(container!.readinessProbe, {
      httpGet: { path: '/readyz?verified', port: 'http' },
      periodSeconds: 5,
    });
  });

  // proves: K8S-RBAC
  it('grants hintbox only pods, pods/attach, pods/log, services and networkpolicies in its namespace', () => {
    const role = byKind('Role') as Manifest & {
      rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[];
    };
    const resources = role.rules.flatMap((r) => r.resources).sort();
    assert.deepEqual(resources, ['networkpolicies', 'pods', 'pods/attach', 'pods/log', 'services']);
    const verbs = new Set(role.rules.flatMap((r) => r.verbs));
    for (const verb of ['*', 'escalate', 'bind', 'impersonate', 'patch', 'update'])
      assert.equal(verbs.has(verb), false, verb);
    assert.equal(
      manifests.some((m) => m.kind === 'ClusterRole' || m.kind === 'ClusterRoleBinding'),
      false,
    );
  });
});
