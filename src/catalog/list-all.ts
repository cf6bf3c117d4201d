import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { z } from 'zod';

/**
 * Reading a list from a server, one way for all four kinds (tools, prompts, resources, resource
 * templates): every page (`nextCursor` followed), each item as received, and one cap for all.
 */

/** The lists of a server hintbox reads: each kind's method and the field of its answer. */
export const SERVER_LISTS = Object.freeze({
  tool: { method: 'tools/list', field: 'tools' },
  prompt: { method: 'prompts/list', field: 'prompts' },
  resource: { method: 'resources/list', field: 'resources' },
  resourceTemplate: { method: 'resources/templates/list', field: 'resourceTemplates' },
} as const);

/** A kind of catalog item: a tool, a prompt, a resource or a resource template. */
export type CatalogKind = keyof typeof SERVER_LISTS;

/** At most this many pages of one list are read from a server. */
export const MAX_LIST_PAGES = 100;
/** At most this many items of one kind: each is validated, pinned and compared at every listing. */
export const MAX_LISTED_ITEMS = 10_000;

/**
 * A server's list of one kind, followed through its pages, each item as received. A list longer
 * than {@link MAX_LISTED_ITEMS} items, or than {@link MAX_LIST_PAGES} pages (a server that pages
 * without end, or repeats a cursor), is an error naming the list: the page that passes the cap
 * is not kept, and no further page is asked for.
 */
export async function listAll(client: Client, kind: CatalogKind, timeoutMs: number): Promise<unknown[]> {
  const { method, field } = SERVER_LISTS[kind];
  const answer = z.looseObject({ [field]: z.array(z.unknown()), nextCursor: z.string().optional() });
  const all: unknown[] = [];
  let cursor: string | undefined;
  for (let n = 0; n < MAX_LIST_PAGES; n++) {
    const result = (await client.request({ method, params: cursor ? { cursor } : {} }, answer, {
      timeout: timeoutMs,
    })) as Record<string, unknown> & { nextCursor?: string };
    const page = result[field] as unknown[];
    if (all.length + page.length > MAX_LISTED_ITEMS)
      throw new Error(`${method} listed more than ${MAX_LISTED_ITEMS} items`);
    // One by one: spreading a page of a million items into push overflows the stack.
    for (const item of page) all.push(item);
    cursor = result.nextCursor;
    if (!cursor) return all;
  }
  throw new Error(`${method} returned more than ${MAX_LIST_PAGES} pages`);
}
