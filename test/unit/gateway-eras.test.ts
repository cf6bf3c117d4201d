import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { JSONRPCMessage, Tool } from '@modelcontextprotocol/sdk/types.js';
import { Gateway, SharedSandboxes } from '../../src/gateway/gateway.js';
import { META_KEY, MODERN_PROTOCOL_VERSION } from '../../src/protocol/protocol-era.js';
import { silentLogger } from '../../src/util/logger.js';
import { factory } from './support/fake-upstream.js';

const WRITE_DEF = { name: 'write', inputSchema: { type: 'object' } } as unknown as Tool;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!().catch(() => undefined);
});

/** A gateway over one upstream sandbox, spoken to as raw JSON-RPC (the client's messages exactly as written). */
async function rawGateway() {
  const upstreams = factory();
  const shared = new SharedSandboxes({ upstreams, log: silentLogger });
  const gateway = new Gateway({
    serverName: 'files',
    tools: new Map([['write', { definition: WRITE_DEF, sandbox: 'rw-offline' }]]),
    shared,
    log: silentLogger,
    callTimeoutMs: 10_000,
    readSandbox: 'rw-offline',
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const answers = new Map<unknown, Record<string, unknown>>();
  clientSide.onmessage = (m) => void answers.set((m as { id?: unknown }).id, m);
  await gateway.connect(serverSide);
  await clientSide.start();
  cleanups.push(
    () => shared.close(),
    () => gateway.close(),
  );
  const ask = async (message: JSONRPCMessage): Promise<Record<string, unknown>> => {
    const id = (message as { id: unknown }).id;
    await clientSide.send(message);
    for (let i = 0; i < 200 && !answers.has(id); i++) await new Promise((r) => setTimeout(r, 5));
    return answers.get(id) ?? {};
  };
  return { ask, upstreams };
}

const envelope = {
  [META_KEY.protocolVersion]: MODERN_PROTOCOL_VERSION,
  [META_KEY.clientInfo]: { name: 'c', version: '1' },
  [META_KEY.clientCapabilities]: { elicitation: {} },
};

describe('Gateway: a 2026 client to a 2025 server', () => {
  // proves: MRTR-UPSTREAM
  it("gives the server neither the retry's requestState and answers nor the 2026 envelope", async () => {
    const { ask, upstreams } = await rawGateway();
    const discovered = await ask({ jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: envelope } });
    assert.deepEqual((discovered.result as { supportedVersions?: unknown }).supportedVersions, ['2026-07-28']);
    const called = await ask({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: {
        name: 'write',
        arguments: { path: '/a' },
        requestState: 'hbx1.secret-state.mac',
        inputResponses: { 'hintbox.confirm': { action: 'accept', content: { approve: true } } },
        _meta: { ...envelope, progressToken: 'p1' },
      },
    });
    assert.equal((called.result as { resultType?: unknown }).resultType, 'complete');
    const upstream = upstreams.started[0];
    const forwarded = JSON.stringify(
      upstream?.received.filter((m) => (m as { method?: string }).method === 'tools/call'),
    );
    assert.doesNotMatch(
      forwarded,
      /requestState|inputResponses|secret-state|hintbox\.confirm|io\.modelcontextprotocol/,
    );
    assert.match(forwarded, /"progressToken"/, 'progress still passes');
    assert.deepEqual(
      upstream?.calls.map((c) => [c.name, c.arguments]),
      [['write', { path: '/a' }]],
    );
  });
});
