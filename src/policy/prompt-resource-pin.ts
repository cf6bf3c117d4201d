import { createHash } from 'node:crypto';
import { canonicalJson, jsonDifferences, toJsonValue, type JsonValue } from './tool-pin.js';

/**
 * Pins of what a server offers besides tools — prompts, resources, resource templates — as
 * tools' pins are (`tool-pin.ts`): a SHA-256 over the canonical JSON of the whole definition as
 * listed, so that a prompt whose text (description, arguments) changed is a changed definition
 * and is hidden until approved again. What a resource holds, or the messages a prompt returns,
 * is data and is not pinned. Pure: no I/O.
 */

/** The kinds: a prompt is known by its `name`, a resource by its `uri`, a template by its `uriTemplate`. */
export type PromptOrResourceKind = 'prompt' | 'resource' | 'resourceTemplate';

export const PROMPT_RESOURCE_KINDS: readonly PromptOrResourceKind[] = ['prompt', 'resource', 'resourceTemplate'];

/** The field each kind is known by. */
export const KEY_FIELD: Readonly<Record<PromptOrResourceKind, string>> = Object.freeze({
  prompt: 'name',
  resource: 'uri',
  resourceTemplate: 'uriTemplate',
});

/**
 * The field of each kind: in a server's list answer (`prompts/list` → `prompts`), in hintbox's
 * listing of them, and the lock file's section.
 */
export const LIST_FIELD = Object.freeze({
  prompt: 'prompts',
  resource: 'resources',
  resourceTemplate: 'resourceTemplates',
} as const);

/** How people and the lock file name each kind. */
export const KIND_LABEL: Readonly<Record<PromptOrResourceKind, string>> = Object.freeze({
  prompt: 'prompt',
  resource: 'resource',
  resourceTemplate: 'resource template',
});

/** The key an item is known by. */
export function keyOf(kind: PromptOrResourceKind, item: object): string {
  return String((item as Record<string, unknown>)[KEY_FIELD[kind]]);
}

/** A pinned item: its definition in the JSON data model, and its hash. */
export interface PromptOrResourcePin {
  /** Lower-case hex SHA-256 of the canonical JSON of `definition`. */
  hash: string;
  definition: { [key: string]: JsonValue };
}

/** The pin of an item's whole definition as listed. */
export function pinPromptOrResource(item: object): PromptOrResourcePin {
  const definition = toJsonValue(item) as { [key: string]: JsonValue };
  return { hash: promptOrResourceHash(definition), definition };
}

/** SHA-256 (hex) of a definition's canonical JSON. */
export function promptOrResourceHash(definition: JsonValue): string {
  return createHash('sha256').update(canonicalJson(definition), 'utf8').digest('hex');
}

/**
 * Lines for `hintbox approve`: where an item's approved and current definitions differ, with
 * values as JSON (control characters a server put in show as escapes).
 */
export function promptOrResourceChanges(approved: JsonValue, current: JsonValue): string[] {
  const show = (value: JsonValue | undefined): string => (value === undefined ? '(absent)' : JSON.stringify(value));
  return jsonDifferences(approved, current).map(
    (d) => `${d.pointer.slice(1) || '(definition)'}: ${show(d.before)} → ${show(d.after)}`,
  );
}
