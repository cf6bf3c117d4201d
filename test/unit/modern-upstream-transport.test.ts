import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { META_KEY, MODERN_PROTOCOL_VERSION } from '../../src/protocol/protocol-era.js';
import { MAX_INPUT_ROUNDS, ModernUpstreamTransport } from '../../src/protocol/modern-upstream-transport.js';
import { PROBE_ID } from '../../src/protocol/upstream-era.js';

type Raw = Record<string, unknown> & { id?: unknown; method?: string; params?: Record<string, unknown> };

const IDENTITY = { clientInfo: { name: 'hintbox', version: '0.0.0' }, capabilities: { elicitation: { form: {} } } };
const DISCOVERED = {
  supportedVersions: [MODERN_PROTOCOL_VERSION],
  capabilities: { tools: {} },
  resultType: 'complete',
  _meta: { [META_KEY.serverInfo]: { name: 'modern', version: '2.0.0' } },
};
const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

/**
 * A scripted server on the far side of an in-memory pair: `answer` says what it writes back to
 * each message (nothing when undefined); everything it got is in `got`.
 */
async function serverSide(answer: (message: Raw) => Raw[] | undefined) {
  const [hintboxSide, server] = InMemoryTransport.createLinkedPair();
  const got: Raw[] = [];
  server.onmessage = (message) => {
    got.push(message);
    for (const reply of answer(message) ?? []) void server.send(reply as JSONRPCMessage);
  };
  await server.start();
  return { hintboxSide, got, send: (m: Raw) => server.send(m as JSONRPCMessage) };
}

/** The transport above `base`, opened, with what it passes up collected in `up`. */
async function opened(base: InMemoryTransport, startTimeoutMs = 1_000) {
  const { transport, era } = await ModernUpstreamTransport.open(base, IDENTITY, startTimeoutMs);
  const up: Raw[] = [];
  transport.onmessage = (message) => void up.push(message);
  return { transport, era, up };
}

/** A 2026 server: discover answered; every other request by `onRequest`. */
function modernServer(onRequest: (m: Raw) => Raw[] | undefined) {
  return serverSide((m) =>
    m.method === 'server/discover' ? [{ jsonrpc: '2.0', id: m.id, result: DISCOVERED }] : onRequest(m),
  );
}

describe('ModernUpstreamTransport: the era of a sandboxed server', () => {
  it('takes a server that answers server/discover with method-not-found for a 2025 server and passes everything unchanged', async () => {
    const server = await serverSide((m) =>
      m.method === 'server/discover'
        ? [{ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'no' } }]
        : undefined,
    );
    const { transport, era } = await opened(server.hintboxSide);
    assert.equal(era, '2025');
    const initialize = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25' } };
    await transport.send(initialize as JSONRPCMessage);
    await tick();
    assert.deepEqual(server.got.at(-1), initialize, 'a 2025 server gets the very message');
  });

  // proves: UPSTREAM-PROBE-BOUND
  it('does not let a server that never answers server/discover hold the start: the probe ends at half the start bound', async () => {
    const server = await serverSide(() => undefined);
    const started = Date.now();
    const { era, up } = await opened(server.hintboxSide, 200);
    const took = Date.now() - started;
    assert.equal(era, '2025');
    assert.ok(took >= 90 && took < 1_000, `the probe took ${took} ms`);
    // A late answer to the probe is not passed up (the SDK client would take it for its own).
    await server.send({ jsonrpc: '2.0', id: PROBE_ID, result: DISCOVERED });
    await tick();
    assert.deepEqual(up, []);
  });

  it('speaks 2026 to a 2026 server: initialize answered here, the envelope on each request, resultType taken off', async () => {
    const server = await modernServer((m) =>
      m.id === undefined
        ? undefined
        : [{ jsonrpc: '2.0', id: m.id, result: { tools: [], resultType: 'complete', ttlMs: 5, cacheScope: 'shared' } }],
    );
    const { transport, era, up } = await opened(server.hintboxSide);
    assert.equal(era, '2026');
    await transport.send({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25' },
    });
    await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    await transport.send({
      jsonrpc: '2.0',
      id: 1,
      method: 'logging/setLevel',
      params: { level: 'debug' },
    });
    await transport.send({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/list',
      params: { _meta: { progressToken: 7 } },
    });
    await tick();
    assert.deepEqual(
      server.got.map((m) => m.method),
      ['server/discover', 'tools/list'],
      'initialize, initialized and setLevel never reach a 2026 server',
    );
    assert.deepEqual(server.got[1]?.params?._meta, {
      progressToken: 7,
      [META_KEY.protocolVersion]: MODERN_PROTOCOL_VERSION,
      [META_KEY.clientInfo]: IDENTITY.clientInfo,
      [META_KEY.clientCapabilities]: IDENTITY.capabilities,
      [META_KEY.logLevel]: 'debug',
    });
    const init = up.find((m) => m.id === 0)?.result as Record<string, unknown>;
    assert.deepEqual(init, {
      protocolVersion: '2025-11-25',
      capabilities: { tools: {} },
      serverInfo: { name: 'modern', version: '2.0.0' },
    });
    assert.deepEqual(up.find((m) => m.id === 2)?.result, { tools: [] });
  });

  // proves: UPSTREAM-2026-INPUT-STATE
  it('passes an input_required up as the server’s own question and retries with the answer and the state untouched', async () => {
    const state = 'opaque-\u2028state-{"x":1}';
    const server = await modernServer((m) => {
      if (m.id === undefined) return undefined;
      if (m.params?.inputResponses === undefined) {
        const ask = {
          method: 'elicitation/create',
          params: { message: 'Name?', requestedSchema: { type: 'object', properties: {} } },
        };
        return [
          {
            jsonrpc: '2.0',
            id: m.id,
            result: { resultType: 'input_required', inputRequests: { who: ask }, requestState: state },
          },
        ];
      }
      return [{ jsonrpc: '2.0', id: m.id, result: { content: [], resultType: 'complete' } }];
    });
    const { transport, up } = await opened(server.hintboxSide);
    await transport.send({
      jsonrpc: '2.0',
      id: 9,
      method: 'tools/call',
      params: { name: 'ask', arguments: { a: 1 } },
    });
    await tick();
    const question = up.find((m) => m.method === 'elicitation/create');
    assert.ok(question, 'the question reaches hintbox as the server’s request');
    assert.equal(
      up.some((m) => m.id === 9),
      false,
      'the call is not answered yet',
    );
    await transport.send({
      jsonrpc: '2.0',
      id: question.id,
      result: { action: 'accept', content: { name: 'Ada' } },
    } as JSONRPCMessage);
    await tick();
    const retry = server.got.at(-1)!;
    assert.equal(retry.id, 9);
    assert.equal(retry.params?.requestState, state, 'byte for byte');
    assert.deepEqual(retry.params?.inputResponses, { who: { action: 'accept', content: { name: 'Ada' } } });
    assert.deepEqual(retry.params?.arguments, { a: 1 });
    assert.deepEqual(up.find((m) => m.id === 9)?.result, { content: [] });
  });

  it('fails the request, saying why, when the question cannot be asked; a second answer is ignored', async () => {
    const server = await modernServer((m) =>
      m.id === undefined
        ? undefined
        : [
            {
              jsonrpc: '2.0',
              id: m.id,
              result: {
                resultType: 'input_required',
                inputRequests: { q: { method: 'elicitation/create', params: {} } },
              },
            },
          ],
    );
    const { transport, up } = await opened(server.hintboxSide);
    await transport.send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'ask' } });
    await tick();
    const question = up.find((m) => m.method === 'elicitation/create')!;
    await transport.send({
      jsonrpc: '2.0',
      id: question.id,
      error: { code: -32600, message: 'the client does not support elicitation' },
    } as JSONRPCMessage);
    await transport.send({ jsonrpc: '2.0', id: question.id, result: { action: 'accept' } } as JSONRPCMessage);
    await tick();
    const answer = up.find((m) => m.id === 3) as { error?: { message: string } };
    assert.match(answer.error?.message ?? '', /input_required.*the client does not support elicitation/);
    assert.equal(server.got.filter((m) => m.method === 'tools/call').length, 1, 'no retry');
  });

  // proves: UPSTREAM-2026-INPUT-STATE
  it('refuses a server that asks more than MAX_INPUT_ROUNDS times in one request, and a request of its own under a question’s id', async () => {
    const server = await modernServer((m) =>
      m.id === undefined
        ? undefined
        : [{ jsonrpc: '2.0', id: m.id, result: { resultType: 'input_required', requestState: 's' } }],
    );
    const { transport, up } = await opened(server.hintboxSide);
    await transport.send({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'loop' } });
    for (let i = 0; i < 50 && !up.some((m) => m.id === 4); i++) await tick();
    assert.match(
      (up.find((m) => m.id === 4) as { error?: { message: string } }).error?.message ?? '',
      /more than 16 times/,
    );
    assert.equal(
      server.got.filter((m) => m.method === 'tools/call').length,
      MAX_INPUT_ROUNDS + 1,
      'the first try and 16 retries',
    );
    await server.send({ jsonrpc: '2.0', id: 'hintbox-input-1', method: 'elicitation/create', params: {} });
    await tick();
    assert.equal(
      up.some((m) => m.method === 'elicitation/create'),
      false,
    );
  });

  /** A 2026 server that answers every request input_required (one question), and `got` what it was sent. */
  const askingServer = () =>
    modernServer((m) =>
      m.id === undefined
        ? undefined
        : [
            {
              jsonrpc: '2.0',
              id: m.id,
              result: {
                resultType: 'input_required',
                inputRequests: { who: { method: 'elicitation/create', params: { message: 'Name?' } } },
                requestState: 'server-state',
              },
            },
          ],
    );

  // proves: UPSTREAM-2026-INPUT-STATE
  it('passes no question that could reach another call: a read’s, or one of several tool calls at the server (attack)', async () => {
    // Before: a read's question went up as the server's request, bound by the gateway to the oldest
    // call in the sandbox (another client's, with shared sandboxes), whose person answered it.
    const server = await askingServer();
    const { transport, up } = await opened(server.hintboxSide);
    await transport.send({ jsonrpc: '2.0', id: 1, method: 'resources/read', params: { uri: 'note://x' } });
    await tick();
    assert.equal(up.filter((m) => m.method === 'elicitation/create').length, 0, 'no question from a read');
    assert.match(String((up.find((m) => m.id === 1)?.error as { message?: string })?.message), /only a tool call/);
    // Two calls at the server: the second one's question could be bound to the first.
    const slow = await modernServer(() => undefined);
    const both = await opened(slow.hintboxSide);
    await both.transport.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'a', arguments: {} } });
    await both.transport.send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'b', arguments: {} } });
    await slow.send({
      jsonrpc: '2.0',
      id: 3,
      result: { resultType: 'input_required', inputRequests: { q: { method: 'elicitation/create', params: {} } } },
    });
    await tick();
    assert.equal(
      both.up.filter((m) => m.method === 'elicitation/create').length,
      0,
      'no question while another call runs',
    );
    assert.match(String((both.up.find((m) => m.id === 3)?.error as { message?: string })?.message), /other tool calls/);
  });

  // proves: UPSTREAM-2026-INPUT-STATE
  it('never passes a client’s own requestState or inputResponses to a 2026 server: only hintbox’s retry carries them (attack)', async () => {
    // Before: a 2025 client's request carried them through, answering the server's questions
    // unasked, outside the server-request rules, unmarked and unaudited.
    const server = await askingServer();
    const { transport } = await opened(server.hintboxSide);
    await transport.send({
      jsonrpc: '2.0',
      id: 4,
      method: 'tools/call',
      params: {
        name: 'ask',
        arguments: {},
        requestState: 'server-state',
        inputResponses: { who: { action: 'accept' } },
      },
    });
    await tick();
    const sent = server.got.find((m) => m.id === 4)!;
    assert.equal(sent.params?.requestState, undefined);
    assert.equal(sent.params?.inputResponses, undefined);
    assert.deepEqual(sent.params?.arguments, {});
  });
});
