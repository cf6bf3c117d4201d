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
import { z } from 'zod';
import { OFFER_FIELD, OFFER_KEY_FIELD, OFFER_KINDS, pinOffer, type OfferKind } from '../policy/offer-pin.js';
import { renderServerText } from '../util/render-server-text.js';

/**
 * What a server offers besides tools: prompts, resources and resource templates, listed at
 * discovery (and again when the server says they changed), each validated on its own and kept
 * exactly as received, like tools (`discover-tools.ts`). Their definitions are pinned like
 * tools' (`policy/offer-pin.ts`); what a resource holds is data and is not.
 */

export type { OfferKind } from '../policy/offer-pin.js';

export interface ServerOffers {
  prompts: Prompt[];
  resources: Resource[];
  resourceTemplates: ResourceTemplate[];
}

export const NO_OFFERS: ServerOffers = Object.freeze({ prompts: [], resources: [], resourceTemplates: [] });

/** How each kind is listed and validated (its answer's field: `OFFER_FIELD`; its key: `OFFER_KEY_FIELD`). */
export const OFFER_LISTS = {
  prompt: { method: 'prompts/list', schema: PromptSchema },
  resource: { method: 'resources/list', schema: ResourceSchema },
  resourceTemplate: { method: 'resources/templates/list', schema: ResourceTemplateSchema },
} as const satisfies Record<OfferKind, { method: string; schema: z.ZodType }>;

/** An offer the server listed that cannot be used, and why. */
export interface RejectedOffer {
  kind: OfferKind;
  index: number;
  key?: string;
  reason: string;
}

/** A key longer than this is refused: it is shown to people and written to the lock file. */
const MAX_KEY_LENGTH = 2048;

/**
 * Validates each listed offer of a kind on its own (the SDK's schema would strip keys it does
 * not know): a malformed one, one with an empty or overlong key, or a duplicate key is
 * reported and left out; the others pass untouched. Pure.
 */
export function validateOffers<K extends OfferKind>(
  kind: K,
  raw: readonly unknown[],
): { offers: object[]; rejected: RejectedOffer[] } {
  const { schema } = OFFER_LISTS[kind];
  const keyField = OFFER_KEY_FIELD[kind];
  const offers: object[] = [];
  const rejected: RejectedOffer[] = [];
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
      offers.push(candidate as object);
    }
  });
  return { offers, rejected };
}

function pinnable(offer: object): boolean {
  try {
    pinOffer(offer);
    return true;
  } catch {
    return false;
  }
}

/** `prompt #3 (name) left out: reason`, for the log: the server's text rendered for a person. */
export function describeRejectedOffer(r: RejectedOffer): string {
  const key = r.key !== undefined ? ` (${renderServerText(r.key)})` : '';
  return `${r.kind} #${r.index}${key} left out: ${renderServerText(r.reason)}`;
}

/** At most this many pages of one list are read from a server. */
export const MAX_LIST_PAGES = 100;
/** At most this many items of one kind: each is pinned and compared at every listing. */
export const MAX_LISTED_ITEMS = 10_000;

/**
 * A list request followed through its pages (`nextCursor`), each item as received. A server
 * that pages without end (or repeats a cursor) is stopped at {@link MAX_LIST_PAGES}.
 */
export async function listAllRaw(client: Client, method: string, field: string, timeoutMs: number): Promise<unknown[]> {
  const page = z.looseObject({ [field]: z.array(z.unknown()), nextCursor: z.string().optional() });
  const all: unknown[] = [];
  let cursor: string | undefined;
  for (let n = 0; n < MAX_LIST_PAGES; n++) {
    const result = (await client.request({ method, params: cursor ? { cursor } : {} }, page, {
      timeout: timeoutMs,
    })) as Record<string, unknown> & { nextCursor?: string };
    all.push(...(result[field] as unknown[]));
    if (all.length > MAX_LISTED_ITEMS) throw new Error(`${method} listed more than ${MAX_LISTED_ITEMS} items`);
    cursor = result.nextCursor;
    if (!cursor) return all;
  }
  throw new Error(`${method} returned more than ${MAX_LIST_PAGES} pages`);
}

/**
 * Lists every kind the server declared in `initialize` (`prompts`, `resources`), validated; a
 * kind it did not declare is empty. A kind whose listing fails is an error: the server said it
 * offers it.
 */
export async function listOffers(
  client: Client,
  timeoutMs: number,
): Promise<{ offers: ServerOffers; rejected: RejectedOffer[] }> {
  const capabilities = client.getServerCapabilities() ?? {};
  const offers: ServerOffers = { prompts: [], resources: [], resourceTemplates: [] };
  const rejected: RejectedOffer[] = [];
  for (const kind of OFFER_KINDS) {
    const declared = kind === 'prompt' ? capabilities.prompts : capabilities.resources;
    if (!declared) continue;
    const list = OFFER_LISTS[kind];
    let raw: unknown[];
    try {
      raw = await listAllRaw(client, list.method, OFFER_FIELD[kind], timeoutMs);
    } catch (error) {
      // Templates are optional even for a server with resources (a server may not know the method).
      if (kind === 'resourceTemplate' && error instanceof McpError && error.code === ErrorCode.MethodNotFound) continue;
      throw error;
    }
    const valid = validateOffers(kind, raw);
    (offers[OFFER_FIELD[kind]] as object[]) = valid.offers;
    rejected.push(...valid.rejected);
  }
  return { offers, rejected };
}
