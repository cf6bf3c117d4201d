/**
 * The few Kubernetes object shapes hintbox renders, typed as plain JSON (no client library:
 * the renderer is pure and the CLI's bundle stays small). Field names follow the API exactly;
 * the tests check every object against the API's schemas with a walk that refuses unknown fields.
 */

/** Any Kubernetes object: kind, version, metadata, and the rest as the kind has it. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  /** Set by the API server (read back, never rendered). */
  uid?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** A Kubernetes label value or DNS-1123 name part: what `kubeName` accepts. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/**
 * `parts` joined with `-` as an object name (a DNS-1123 label: at most 63 lower-case letters,
 * digits and `-`), or a one-line error naming the part that cannot be one. Never rewritten: two
 * names that differ must not be folded into one object.
 */
export function kubeName(...parts: string[]): string {
  const name = parts.join('-');
  if (name.length > 63 || !DNS_LABEL.test(name)) {
    throw new Error(
      `cannot name a Kubernetes object "${name}": expected at most 63 lower-case letters, digits and - (a DNS-1123 label)`,
    );
  }
  return name;
}

/** `value` if Kubernetes takes it as a label value, else a one-line error naming `key`. */
export function labelValue(key: string, value: string): string {
  if (value.length > 63 || !LABEL_VALUE.test(value)) {
    throw new Error(
      `cannot label a Kubernetes object ${key}=${value}: not a label value (at most 63 of A-Z a-z 0-9 - _ .)`,
    );
  }
  return value;
}
