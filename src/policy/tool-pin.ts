import { createHash } from 'node:crypto';
import { claimedHints, effectiveHints, HINT_NAMES, type ToolHints } from './hints.js';

/**
 * Tool pins: a SHA-256 over a canonical form of what a person approved about a tool, so that a
 * server that later changes a description (a prompt injection), a schema or a hint is caught.
 * Pure: no I/O.
 */

/** A value of the JSON data model. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** The fields of a listed tool that are pinned: every field of the spec's `Tool`. */
export interface PinnableTool {
  name: string;
  title?: unknown;
  description?: unknown;
  inputSchema?: unknown;
  outputSchema?: unknown;
  annotations?: unknown;
  execution?: unknown;
  icons?: unknown;
  _meta?: unknown;
}

/** The pinned fields, in the order a diff reports them. */
export const PINNED_FIELDS = [
  'name',
  'title',
  'description',
  'inputSchema',
  'outputSchema',
  'annotations',
  'execution',
  'icons',
  '_meta',
] as const;
export type PinnedField = (typeof PINNED_FIELDS)[number];

/** Annotations as pinned: the four hints always present (spec defaults filled in), other keys as sent. */
export type PinnedAnnotations = ToolHints & { [key: string]: JsonValue };

/**
 * The canonical form of a tool definition, the input of the hash. A field the server left out
 * is `null`; annotations carry all four hints with the spec's defaults filled in, so `{}`, a
 * missing `annotations` and `{ "readOnlyHint": false }` all pin the same. A hint that is not a
 * boolean counts as missing, as everywhere else in hintbox. Store it next to the hash: the
 * diff that `hintbox approve` shows needs the approved form, not only its hash.
 */
export interface PinnedDefinition {
  name: string;
  title: JsonValue;
  description: JsonValue;
  inputSchema: JsonValue;
  outputSchema: JsonValue;
  annotations: PinnedAnnotations;
  execution: JsonValue;
  icons: JsonValue;
  _meta: JsonValue;
}

/** A pinned definition and its hash. */
export interface ToolPin {
  /** Lower-case hex SHA-256 of {@link canonicalJson} of `definition`. */
  hash: string;
  definition: PinnedDefinition;
}

/**
 * Brings a value into the JSON data model exactly as it would travel on the wire
 * (`JSON.stringify` semantics: `undefined` members dropped, `NaN` → `null`, `toJSON` applied),
 * so that a definition and its stored copy hash the same.
 */
export function toJsonValue(value: unknown): JsonValue {
  if (value === undefined) return null;
  const text = JSON.stringify(value);
  return text === undefined ? null : (JSON.parse(text) as JsonValue);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * JSON with object keys sorted (by UTF-16 code units) and no whitespace; array order kept.
 * For JSON input this is the JSON Canonicalization Scheme (RFC 8785): the same number and
 * string serialization as ECMAScript's `JSON.stringify`.
 */
export function canonicalJson(value: unknown): string {
  return writeCanonical(toJsonValue(value));
}

function writeCanonical(value: JsonValue): string {
  if (Array.isArray(value)) return `[${value.map(writeCanonical).join(',')}]`;
  if (isObject(value)) {
    const members = Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${writeCanonical(value[key] as JsonValue)}`);
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value);
}

/** The canonical form of a listed tool (see {@link PinnedDefinition}). */
export function pinnedDefinition(tool: PinnableTool): PinnedDefinition {
  const raw = toJsonValue(tool.annotations);
  // Object.fromEntries defines keys as own data properties, so even a `__proto__` key is
  // kept as data rather than changing the object's prototype.
  const others = isObject(raw)
    ? Object.fromEntries(Object.entries(raw).filter(([key]) => !(HINT_NAMES as readonly string[]).includes(key)))
    : {};
  return {
    name: tool.name,
    title: toJsonValue(tool.title),
    description: toJsonValue(tool.description),
    inputSchema: toJsonValue(tool.inputSchema),
    outputSchema: toJsonValue(tool.outputSchema),
    annotations: { ...others, ...effectiveHints(claimedHints(raw)) },
    execution: toJsonValue(tool.execution),
    icons: toJsonValue(tool.icons),
    _meta: toJsonValue(tool._meta),
  };
}

/** SHA-256 (hex) of the canonical JSON of a pinned definition. */
export function pinHash(definition: PinnedDefinition): string {
  return createHash('sha256').update(canonicalJson(definition), 'utf8').digest('hex');
}

/** Pins a listed tool: its canonical definition and the hash of it. */
export function pinTool(tool: PinnableTool): ToolPin {
  const definition = pinnedDefinition(tool);
  return { hash: pinHash(definition), definition };
}

/** One place where two JSON values differ, as an RFC 6901 JSON Pointer ('' is the whole value). */
export interface JsonDifference {
  pointer: string;
  /** Absent when the location is new. */
  before?: JsonValue;
  /** Absent when the location was removed. */
  after?: JsonValue;
}

/** What changed between an approved pin and the current definition. */
export type PinChange =
  | {
      kind: 'field';
      field: Exclude<PinnedField, 'annotations'>;
      before: JsonValue;
      after: JsonValue;
      /** The differing locations inside the field (one, pointer '', for a changed string). */
      differences: JsonDifference[];
    }
  | { kind: 'hint'; hint: keyof ToolHints; before: boolean; after: boolean }
  | { kind: 'annotation'; key: string; before?: JsonValue; after?: JsonValue };

/**
 * Names what changed, field by field, in {@link PINNED_FIELDS} order; hints one by one (in
 * `HINT_NAMES` order), other annotation keys (e.g. `title`) by key. Empty when the hashes
 * would be equal.
 */
export function diffPins(approved: PinnedDefinition, current: PinnedDefinition): PinChange[] {
  const changes: PinChange[] = [];
  for (const field of PINNED_FIELDS) {
    if (field === 'annotations') continue;
    const before = approved[field];
    const after = current[field];
    if (canonicalJson(before) !== canonicalJson(after)) {
      changes.push({ kind: 'field', field, before, after, differences: jsonDifferences(before, after) });
    }
  }
  for (const hint of HINT_NAMES) {
    const before = approved.annotations[hint];
    const after = current.annotations[hint];
    if (before !== after) changes.push({ kind: 'hint', hint, before, after });
  }
  const keys = new Set([...Object.keys(approved.annotations), ...Object.keys(current.annotations)]);
  for (const key of [...keys].sort()) {
    if ((HINT_NAMES as readonly string[]).includes(key)) continue;
    const before = Object.hasOwn(approved.annotations, key) ? approved.annotations[key] : undefined;
    const after = Object.hasOwn(current.annotations, key) ? current.annotations[key] : undefined;
    const same =
      before === undefined || after === undefined ? before === after : canonicalJson(before) === canonicalJson(after);
    if (same) continue;
    changes.push({
      kind: 'annotation',
      key,
      ...(before !== undefined ? { before } : {}),
      ...(after !== undefined ? { after } : {}),
    });
  }
  return changes;
}

/** The locations where two JSON values differ, depth first, object keys sorted. */
export function jsonDifferences(
  before: JsonValue | undefined,
  after: JsonValue | undefined,
  pointer = '',
): JsonDifference[] {
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    return keys.flatMap((key) =>
      jsonDifferences(
        Object.hasOwn(before, key) ? before[key] : undefined,
        Object.hasOwn(after, key) ? after[key] : undefined,
        `${pointer}/${escapePointer(key)}`,
      ),
    );
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    const length = Math.max(before.length, after.length);
    return Array.from({ length }, (_, i) => jsonDifferences(before[i], after[i], `${pointer}/${i}`)).flat();
  }
  if (before !== undefined && after !== undefined && canonicalJson(before) === canonicalJson(after)) return [];
  if (before === undefined && after === undefined) return [];
  return [{ pointer, ...(before !== undefined ? { before } : {}), ...(after !== undefined ? { after } : {}) }];
}

function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

/**
 * Lines for `hintbox approve`: what changed, with values as JSON so that control characters
 * and escape sequences a server put into a description are shown, not interpreted.
 */
export function formatPinChanges(changes: readonly PinChange[]): string[] {
  const show = (value: JsonValue | undefined): string => (value === undefined ? '(absent)' : JSON.stringify(value));
  return changes.flatMap((change) => {
    switch (change.kind) {
      case 'hint':
        return [`annotations.${change.hint}: ${change.before} → ${change.after}`];
      case 'annotation':
        return [`annotations.${change.key}: ${show(change.before)} → ${show(change.after)}`];
      case 'field':
        return change.differences.map((d) => `${change.field}${d.pointer}: ${show(d.before)} → ${show(d.after)}`);
    }
  });
}

/**
 * What changed, named by hintbox's words only — the fields, and the hints with their values —
 * never the server's new text (a changed description may be a prompt injection): for the
 * refusal a client reads. The whole change is for the log and `hintbox approve`.
 */
export function changedFields(changes: readonly PinChange[]): string[] {
  const named = changes.map((change) =>
    change.kind === 'hint'
      ? `annotations.${change.hint}: ${change.before} → ${change.after}`
      : change.kind === 'annotation'
        ? 'annotations (other than the four hints)'
        : change.field,
  );
  return [...new Set(named)];
}

/** The hint changes that narrow what a tool is granted (stricter hints): to read-only, to only-adds, to a closed world. */
const NARROWING: Readonly<Record<string, { before: boolean; after: boolean }>> = {
  readOnlyHint: { before: false, after: true },
  destructiveHint: { before: true, after: false },
  openWorldHint: { before: true, after: false },
};

/**
 * True when a definition changed only in hints, each of them stricter: its sandbox can only get
 * narrower, so the change needs no person (it is recorded, not approved). Any other change —
 * a description, a schema, `idempotentHint` (which allows retries), a wider hint — is false.
 */
export function onlyNarrows(changes: readonly PinChange[]): boolean {
  return (
    changes.length > 0 &&
    changes.every((change) => {
      if (change.kind !== 'hint') return false;
      const narrowing = NARROWING[change.hint];
      return narrowing !== undefined && change.before === narrowing.before && change.after === narrowing.after;
    })
  );
}
