import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  ErrorCode,
  McpError,
  PromptSchema,
  ResourceSchema,
  ResourceTemplateSchema,
  type Prompt,
  type Resource,
  type ResourceTemplate,
} from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import {
  LIST_FIELD,
  KEY_FIELD,
  PROMPT_RESOURCE_KINDS,
  pinPromptOrResource,
  type PromptOrResourceKind,
} from '../policy/prompt-resource-pin.js';
import { renderServerText } from '../util/render-server-text.js';
import { listAll } from './list-all.js';

/**
 * What a server offers besides tools: prompts, resources and resource templates, listed at
 * discovery (and again when the server says they changed), each validated on its own and kept
 * exactly as received, like tools (`discover-tools.ts`). Their definitions are pinned like
 * tools' (`policy/prompt-resource-pin.ts`); what a resource holds is data and is not.
 */

export type { PromptOrResourceKind } from '../policy/prompt-resource-pin.js';

export interface PromptsAndResources {
  prompts: Prompt[];
  resources: Resource[];
  resourceTemplates: ResourceTemplate[];
}

export const NO_PROMPTS_OR_RESOURCES: PromptsAndResources = Object.freeze({
  prompts: [],
  resources: [],
  resourceTemplates: [],
});

/** How each kind is validated (listed by `listAll`; its answer's field: `LIST_FIELD`; its key: `KEY_FIELD`). */
const SCHEMAS = {
  prompt: PromptSchema,
  resource: ResourceSchema,
  resourceTemplate: ResourceTemplateSchema,
} as const satisfies Record<PromptOrResourceKind, z.ZodType>;

/** An item the server listed that cannot be used, and why. */
export interface RejectedItem {
  kind: PromptOrResourceKind;
  index: number;
  key?: string;
  reason: string;
}

/** A key longer than this is refused: it is shown to people and written to the lock file. */
const MAX_KEY_LENGTH = 2048;

/**
 * Validates each listed item of a kind on its own (the SDK's schema would strip keys it does
 * not know): a malformed one, one with an empty or overlong key, or a duplicate key is
 * reported and left out; the others pass untouched. Pure.
 */
export function validatePromptsOrResources<K extends PromptOrResourceKind>(
  kind: K,
  raw: readonly unknown[],
): { valid: object[]; rejected: RejectedItem[] } {
  const schema = SCHEMAS[kind];
  const keyField = KEY_FIELD[kind];
  const valid: object[] = [];
  const rejected: RejectedItem[] = [];
  const seen = new Set<string>();
  raw.forEach((candidate, index) => {
    const parsed = (schema as z.ZodType).safeParse(candidate);
    const key =
      candidate && typeof candidate === 'object' ? (candidate as Record<string, unknown>)[keyField] : undefined;
    const named = typeof key === 'string' ? { key } : {};
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue?.path.length ? `${issue.path.join('.')}: ` : '';
      rejected.push({ kind, index, ...named, reason: `${where}${issue?.message ?? 'invalid'}` });
    } else if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) {
      rejected.push({ kind, index, ...named, reason: `${keyField}: empty or longer than ${MAX_KEY_LENGTH}` });
    } else if (seen.has(key)) {
      rejected.push({ kind, index, key, reason: `duplicate ${keyField}` });
    } else if (!pinnable(candidate as object)) {
      // Nested too deep to pin (or to write again): it could be neither approved nor served.
      rejected.push({ kind, index, key, reason: 'its definition cannot be pinned (nested too deep)' });
    } else {
      seen.add(key);
      valid.push(candidate as object);
    }
  });
  return { valid, rejected };
}

function pinnable(item: object): boolean {
  try {
    pinPromptOrResource(item);
    return true;
  } catch {
    return false;
  }
}

/** `prompt #3 (name) left out: reason`, for the log: the server's text rendered for a person. */
export function describeRejectedItem(r: RejectedItem): string {
  const key = r.key !== undefined ? ` (${renderServerText(r.key)})` : '';
  return `${r.kind} #${r.index}${key} left out: ${renderServerText(r.reason)}`;
}

/**
 * Lists every kind the server declared in `initialize` (`prompts`, `resources`), validated; a
 * kind it did not declare is empty. A kind whose listing fails is an error: the server said it
 * lists it.
 */
export async function listPromptsAndResources(
  client: Client,
  timeoutMs: number,
): Promise<{ listed: PromptsAndResources; rejected: RejectedItem[] }> {
  const capabilities = client.getServerCapabilities() ?? {};
  const listed: PromptsAndResources = { prompts: [], resources: [], resourceTemplates: [] };
  const rejected: RejectedItem[] = [];
  for (const kind of PROMPT_RESOURCE_KINDS) {
    const declared = kind === 'prompt' ? capabilities.prompts : capabilities.resources;
    if (!declared) continue;
    let raw: unknown[];
    try {
      raw = await listAll(client, kind, timeoutMs);
    } catch (error) {
      // Templates are optional even for a server with resources (a server may not know the method).
      if (kind === 'resourceTemplate' && error instanceof McpError && error.code === ErrorCode.MethodNotFound) continue;
      throw error;
    }
    const valid = validatePromptsOrResources(kind, raw);
    (listed[LIST_FIELD[kind]] as object[]) = valid.valid;
    rejected.push(...valid.rejected);
  }
  return { listed, rejected };
}
