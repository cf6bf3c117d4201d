import { ConfigMap, Pod, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';

/**
 * Checks Kubernetes objects against the API's schemas (kubernetes-models' validators), and
 * walks them for fields the schema does not know. The validators alone accept any unknown
 * field (a misspelt `readOnlyRootFileSystem` passes, and the API server would drop it
 * silently): so every field present is replaced, one at a time, by a value no schema type
 * accepts (a function); a field the schema knows then fails at its own path, an unknown one
 * does not, and is reported.
 */

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each model takes its own kind's shape
type Model = new (data: any) => { validate(): void };
const MODELS: Record<string, Model> = {
  'v1/Pod': Pod,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'apps/v1/Deployment': Deployment,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
};

interface SchemaError {
  instancePath: string;
  message?: string;
}

function errorsOf(model: Model, data: object): SchemaError[] {
  try {
    new model(data).validate();
    return [];
  } catch (error) {
    const errors = (error as { errors?: SchemaError[] }).errors;
    if (!errors) throw error;
    return errors;
  }
}

/** Every problem of `object`, one line each (`Pod x: /spec/foo: unknown field`); empty when it is valid. */
export function schemaProblems(object: {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string };
  [field: string]: unknown;
}): string[] {
  const key = `${object.apiVersion}/${object.kind}`;
  const model = MODELS[key];
  const what = `${object.kind} ${object.metadata?.name ?? '?'}`;
  if (!model) return [`${what}: no schema for ${key}`];
  const problems = errorsOf(model, object).map((e) => `${what}: ${e.instancePath}: ${e.message ?? 'invalid'}`);
  if (problems.length) return problems;
  const clone = structuredClone(object) as Record<string, unknown>;
  for (const path of fieldPaths(clone, '')) {
    const { parent, key: field } = locate(clone, path);
    const saved = parent[field];
    parent[field] = () => undefined;
    const known = errorsOf(model, clone).some((e) => e.instancePath === path);
    parent[field] = saved;
    if (!known) problems.push(`${what}: ${path}: unknown field`);
  }
  return problems;
}

/** JSON-pointer paths of every object field (array items are walked, not replaced). */
function fieldPaths(value: unknown, path: string): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => fieldPaths(item, `${path}/${i}`));
  if (!value || typeof value !== 'object') return [];
  // Free-form maps: their keys are data, not fields.
  if (/\/(labels|annotations|matchLabels|selector|data|stringData|nodeSelector)$/.test(path)) return [];
  return Object.entries(value).flatMap(([k, v]) => [`${path}/${k}`, ...fieldPaths(v, `${path}/${k}`)]);
}

function locate(root: Record<string, unknown>, path: string): { parent: Record<string, unknown>; key: string } {
  const parts = path.split('/').slice(1);
  const key = parts.pop() as string;
  let parent: Record<string, unknown> = root;
  for (const part of parts) parent = parent[part] as Record<string, unknown>;
  return { parent, key };
}
