import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { EraTransport } from '../../src/protocol/era-transport.js';
import {
  forUpstream,
  META_KEY,
  MODERN_PROTOCOL_VERSION,
  ownResult,
  roundTripOf,
  stampResult,
} from '../../src/protocol/protocol-era.js';

/** A 2026 request's `_meta` envelope. */
const envelope = (capabilities: Record<string, unknown> = { elicitation: {} }) => ({
  [META_KEY.protocolVersion]: MODERN_PROTOCOL_VERSION,
  [META_KEY.clientInfo]: { name: 'c', version: '1' },
  [META_KEY.clientCapabilities]: capabilities,
});

describe('protocol eras (pure)', () => {
  it("reads a 2026 request's round trip; a 2025 request has none", () => {
    assert.equal(roundTripOf({ name: 't', arguments: {} }), undefined);
    assert.equal(roundTripOf({ name: 't', _meta: { [META_KEY.protocolVersion]: '2025-11-25' } }), undefined);
    assert.deepEqual(roundTripOf({ name: 't', _meta: envelope() }), { canElicit: true });
    assert.deepEqual(roundTripOf({ name: 't', _meta: envelope({}), requestState: 's', inputResponses: { a: 1 } }), {
      canElicit: false,
      requestState: 's',
      inputResponses: { a: 1 },
    });
    assert.equal(roundTripOf({ _meta: envelope({ elicitation: { url: {} } }) })?.canElicit, false, 'URL mode only');
    assert.equal(roundTripOf({ _meta: envelope({ elicitation: { form: {} } }) })?.canElicit, true);
  });

  it('gives a 2025 server neither the round trip nor the envelope of a 2026 request', () => {
    const legacy = { name: 't', arguments: { a: 1 }, requestState: 'kept as it was', _meta: { progressToken: 1 } };
    assert.equal(forUpstream(legacy), legacy, 'a 2025 request is passed as it is');
    const modern = {
      name: 't',
      arguments: { a: 1 },
      requestState: 'hbx1.x.y',
      inputResponses: { 'hintbox.confirm': { action: 'accept' } },
      _meta: { ...envelope(), progressToken: 7, traceparent: '00-abc-def-01' },
    };
    assert.deepEqual(forUpstream(modern), {
      name: 't',
      arguments: { a: 1 },
      _meta: { progressToken: 7, traceparent: '00-abc-def-01' },
    });
    assert.deepEqual(forUpstream({ name: 't', _meta: envelope() }), { name: 't' });
  });

  // proves: MRTR-OWN-RESULT, MRTR-ADVERTISED
  it("stamps every result complete but hintbox's own: a server cannot answer input_required past hintbox", () => {
    assert.deepEqual(stampResult('tools/call', { content: [] }), { content: [], resultType: 'complete' });
    const phishing = { resultType: 'input_required', inputRequests: { x: { method: 'elicitation/create' } } };
    assert.equal((stampResult('tools/call', phishing) as { resultType: string }).resultType, 'complete');
    const own = ownResult({ resultType: 'input_required', requestState: 's' });
    assert.equal(stampResult('tools/call', own), own);
    assert.deepEqual(
      stampResult('tools/list', { tools: [], ttlMs: 86_400_000, cacheScope: 'public' }),
      { tools: [], ttlMs: 0, cacheScope: 'private', resultType: 'complete' },
      'a list filtered per caller is never cached, nor shared',
    );
    assert.equal(
      JSON.stringify(own),
      '{"resultType":"input_required","requestState":"s"}',
      'the mark is not on the wire',
    );
  });
});

describe('EraTransport', () => {
  /** An EraTransport over one end of a linked pair; what reaches the inner side and the client side. */
  async function linked() {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const era = new EraTransport(serverSide, () => ({
      capabilities: { tools: { listChanged: true } },
      serverInfo: { name: 'hintbox', version: '0' },
      instructions: 'be careful',
    }));
    const inner: JSONRPCMessage[] = [];
    const atClient: JSONRPCMessage[] = [];
    era.onmessage = (m) => void inner.push(m);
    clientSide.onmessage = (m) => void atClient.push(m);
    await era.start();
    await clientSide.start();
    return { era, clientSide, inner, atClient };
  }

  it('answers server/discover itself and stamps the answers of 2026 requests only', async () => {
    const { era, clientSide, inner, atClient } = await linked();
    await clientSide.send({ jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: envelope() } });
    await new Promise((r) => setImmediate(r));
    assert.equal(inner.length, 0, 'discovery never reaches the 2025 server inside');
    const discovered = atClient[0] as { result: Record<string, unknown> };
    assert.deepEqual(discovered.result.supportedVersions, [MODERN_PROTOCOL_VERSION]);
    assert.equal(discovered.result.resultType, 'complete');
    assert.equal(discovered.result.instructions, 'be careful');

    await clientSide.send({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: { _meta: envelope() } });
    await clientSide.send({ jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} });
    await new Promise((r) => setImmediate(r));
    assert.equal(inner.length, 2);
    await era.send({ jsonrpc: '2.0', id: 2, result: { tools: [] } });
    await era.send({ jsonrpc: '2.0', id: 3, result: { tools: [] } });
    await era.send({ jsonrpc: '2.0', id: 2, result: { tools: [] } });
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(
      atClient.slice(1).map((m) => JSON.stringify(m)),
      [
        '{"jsonrpc":"2.0","id":2,"result":{"tools":[],"ttlMs":0,"cacheScope":"private","resultType":"complete"}}',
        '{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}',
        '{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}',
      ],
      'a 2025 answer is passed byte for byte; a 2026 one is stamped once',
    );
  });

  it('forgets a 2026 request the client cancelled (it is never answered)', async () => {
    const { era, clientSide, atClient } = await linked();
    await clientSide.send({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 't', _meta: envelope() } });
    await clientSide.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 9 } });
    await new Promise((r) => setImmediate(r));
    await era.send({ jsonrpc: '2.0', id: 9, result: { content: [] } });
    await new Promise((r) => setImmediate(r));
    assert.equal(JSON.stringify(atClient[0]), '{"jsonrpc":"2.0","id":9,"result":{"content":[]}}');
  });
});
