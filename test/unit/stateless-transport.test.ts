import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import type { JSONRPCMessage, JSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import { readJson } from '../../src/serve/http-messages.js';
import { StatelessTransport } from '../../src/serve/stateless-transport.js';

/** A loopback HTTP server whose every POST is handed to `transport`, as serve hands a 2026 request. */
async function served(transport: StatelessTransport) {
  const server = createServer((req, res) => {
    void readJson(req).then((read) => 'json' in read && transport.answer(req, res, read.json as JSONRPCRequest));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const post = (n: number, signal?: AbortSignal) =>
    fetch(url, {
      method: 'POST',
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { n } }),
      ...(signal ? { signal } : {}),
    });
  return { post, close: () => new Promise((resolve) => server.close(resolve)) };
}

describe('StatelessTransport', () => {
  it("gives each request an id of its own, so two clients' id 1 get their own answers, each with its id back", async () => {
    const transport = new StatelessTransport();
    const seen: JSONRPCMessage[] = [];
    transport.onmessage = (message) => {
      seen.push(message);
      if (seen.length < 2) return;
      // Answered in the reverse order of arrival.
      for (const m of [...seen].reverse()) {
        const { id, params } = m as JSONRPCRequest;
        void transport.send({ jsonrpc: '2.0', id, result: { n: (params as { n: number }).n } });
      }
    };
    const http = await served(transport);
    try {
      const [a, b] = await Promise.all([http.post(1).then((r) => r.json()), http.post(2).then((r) => r.json())]);
      assert.deepEqual(
        [a, b],
        [
          { jsonrpc: '2.0', id: 1, result: { n: 1 } },
          { jsonrpc: '2.0', id: 1, result: { n: 2 } },
        ],
      );
      const ids = seen.map((m) => (m as JSONRPCRequest).id);
      assert.equal(new Set(ids).size, 2, 'the gateway saw two ids');
      assert.ok(!ids.includes(1));
      assert.equal(transport.size, 0);
    } finally {
      await http.close();
    }
  });

  it('cancels a request whose response closed before its answer; a late answer goes nowhere', async () => {
    const transport = new StatelessTransport();
    const seen: JSONRPCMessage[] = [];
    transport.onmessage = (message) => seen.push(message);
    const http = await served(transport);
    try {
      const abort = new AbortController();
      const posted = http.post(3, abort.signal).catch(() => undefined);
      while (seen.length === 0) await new Promise((r) => setTimeout(r, 5));
      abort.abort();
      await posted;
      while (seen.length < 2) await new Promise((r) => setTimeout(r, 5));
      const id = (seen[0] as JSONRPCRequest).id;
      assert.deepEqual(seen[1], {
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: id, reason: 'the client went away' },
      });
      await transport.send({ jsonrpc: '2.0', id, result: {} });
      assert.equal(transport.size, 0);
    } finally {
      await http.close();
    }
  });
});
