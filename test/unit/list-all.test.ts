import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { listAll, MAX_LISTED_ITEMS, SERVER_LISTS, type CatalogKind } from '../../src/catalog/list-all.js';

/** The n-th item of each kind, valid or not: `listAll` keeps items as received. */
const itemOf: Record<CatalogKind, (n: number) => object> = {
  tool: (n) => ({ name: `t${n}`, inputSchema: { type: 'object' } }),
  prompt: (n) => ({ name: `p${n}` }),
  resource: (n) => ({ uri: `file:///${n}`, name: `r${n}` }),
  resourceTemplate: (n) => ({ uriTemplate: `file:///${n}/{x}`, name: `t${n}` }),
};

/** A server whose list of `kind` holds `total` items, `pageSize` a page, made from the cursor; counts the pages asked. */
async function flooding(kind: CatalogKind, total: number, pageSize: number) {
  const { method, field } = SERVER_LISTS[kind];
  const server = new Server(
    { name: 'flood', version: '1.0.0' },
    { capabilities: { tools: {}, prompts: {}, resources: {} } },
  );
  const asked = { pages: 0 };
  server.fallbackRequestHandler = async (request) => {
    assert.equal(request.method, method);
    asked.pages++;
    const start = Number((request.params as { cursor?: string } | undefined)?.cursor ?? '0');
    const end = Math.min(start + pageSize, total);
    const page = Array.from({ length: end - start }, (_, i) => itemOf[kind](start + i));
    return { [field]: page, ...(end < total ? { nextCursor: String(end) } : {}) };
  };
  const client = new Client({ name: 'test', version: '1.0.0' });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  await client.connect(clientSide);
  return { client, asked, close: () => client.close() };
}

describe('listAll: one cap for tools, prompts, resources and templates', () => {
  for (const kind of Object.keys(SERVER_LISTS) as CatalogKind[]) {
    const { method } = SERVER_LISTS[kind];
    it(`${method}: 10,000 items are read; more fail naming the list, and no page after the one past the cap is asked for`, async () => {
      const full = await flooding(kind, MAX_LISTED_ITEMS, 2_500);
      try {
        assert.equal((await listAll(full.client, kind, 5000)).length, MAX_LISTED_ITEMS);
      } finally {
        await full.close();
      }
      // A million items, 5,000 a page: the third page passes the cap, and is the last asked for.
      const flood = await flooding(kind, 1_000_000, 5_000);
      try {
        await assert.rejects(listAll(flood.client, kind, 5000), {
          message: `${method} listed more than ${MAX_LISTED_ITEMS} items`,
        });
        assert.equal(flood.asked.pages, 3);
      } finally {
        await flood.close();
      }
    });
  }

  // proves: CATALOG-LIST-CAP
  it('one page of a million items fails too (and does not overflow the stack on the way)', async () => {
    const flood = await flooding('tool', 1_000_000, 1_000_000);
    try {
      await assert.rejects(listAll(flood.client, 'tool', 30_000), {
        message: `tools/list listed more than ${MAX_LISTED_ITEMS} items`,
      });
    } finally {
      await flood.close();
    }
  });
});
