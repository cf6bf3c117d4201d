import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { ElicitResultSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { Gateway, SharedSandboxes } from '../../src/gateway/gateway.js';
import {
  MAX_REQUESTS_PER_CALL,
  REFUSAL_LINE_INTERVAL_MS,
  type ServerRequestBroker,
} from '../../src/gateway/server-request-broker.js';
import type { RequestAuditEvent } from '../../src/gateway/server-requests.js';
import { META_KEY, MODERN_PROTOCOL_VERSION } from '../../src/protocol/protocol-era.js';
import { processParkedCalls } from '../../src/gateway/server-input-rounds.js';
import type { Caller } from '../../src/util/caller-identity.js';
import { silentLogger } from '../../src/util/logger.js';
import { factory, type Behaviour } from './support/fake-upstream.js';

/**
 * The limits on a 2025 server's questions to a 2026 client, attacked through a whole gateway: a
 * server that asks on and on in one call (one question per `input_required` round), and a
 * question nobody answers.
 */

const ASK_DEF = { name: 'ask', inputSchema: { type: 'object' } } as unknown as Tool;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!().catch(() => undefined);
});

const envelope = {
  [META_KEY.protocolVersion]: MODERN_PROTOCOL_VERSION,
  [META_KEY.clientInfo]: { name: 'c', version: '1' },
  [META_KEY.clientCapabilities]: { elicitation: {} },
};

/** A server whose `ask` asks `count` questions one after another, and says how far it got. */
const askMany =
  (count: number): Behaviour =>
  async (_request, extra) => {
    for (let i = 1; i <= count; i++) {
      try {
        await extra.sendRequest(
          {
            method: 'elicitation/create',
            params: { message: `question ${i}`, requestedSchema: { type: 'object', properties: {} } },
          },
          ElicitResultSchema,
        );
      } catch (error) {
        return { content: [{ type: 'text', text: `question ${i} refused: ${(error as Error).message}` }] };
      }
    }
    return { content: [{ type: 'text', text: `all ${count} questions answered` }] };
  };

/** A gateway over one sandbox whose server runs `behaviour`, spoken to by a raw 2026 client (of `caller`). */
async function gatewayOver(behaviour: Behaviour, options: { serverName?: string; caller?: Caller } = {}) {
  const upstreams = factory({ asker: behaviour });
  const shared = new SharedSandboxes({ upstreams, log: silentLogger });
  const recorded: RequestAuditEvent[] = [];
  const gateway = new Gateway({
    serverName: options.serverName ?? 'asker',
    ...(options.caller ? { caller: options.caller } : {}),
    tools: new Map([['ask', { definition: ASK_DEF, sandbox: 'asker' }]]),
    shared,
    log: silentLogger,
    callTimeoutMs: 10_000,
    readSandbox: 'asker',
    serverRequests: () => ({ sampling: false, elicitation: true, urlElicitation: false, roots: false }),
    recordRequest: (event) => void recorded.push(event),
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
  let nextId = 1;
  const call = async (extra: Record<string, unknown> = {}, waitMs = 2000): Promise<Record<string, unknown>> => {
    const id = nextId++;
    const params = { name: 'ask', arguments: {}, ...extra, _meta: envelope };
    await clientSide.send({ jsonrpc: '2.0', id, method: 'tools/call', params });
    for (let i = 0; i < waitMs / 5 && !answers.has(id); i++) await new Promise((r) => setTimeout(r, 5));
    return (answers.get(id)?.result ?? answers.get(id)?.error ?? {}) as Record<string, unknown>;
  };
  return { call, gateway, recorded, upstreams };
}

/** Answers every question of one call until it completes: the number of questions, and its text. */
async function answerAll(call: (extra?: Record<string, unknown>) => Promise<Record<string, unknown>>) {
  let result = await call();
  let questions = 0;
  while (result.resultType === 'input_required') {
    questions++;
    const key = Object.keys(result.inputRequests as object)[0]!;
    result = await call({
      requestState: result.requestState,
      inputResponses: { [key]: { action: 'accept', content: {} } },
    });
  }
  const text = (result.content as { text: string }[] | undefined)?.[0]?.text ?? JSON.stringify(result);
  return { questions, text };
}

describe("a 2025 server's questions to a 2026 client: limits", () => {
  // proves: MRTR-SERVER-INPUT-LIMITS
  it('refuses a server the 17th question of one call across input_required rounds, and keeps no count after the call (attack)', async () => {
    const { call, gateway } = await gatewayOver(askMany(MAX_REQUESTS_PER_CALL + 4));
    const { questions, text } = await answerAll(call);
    // Before: the count was kept per client request, and each round is a new one: all 20 were asked.
    assert.equal(questions, MAX_REQUESTS_PER_CALL, 'the client was asked 16 questions, no more');
    assert.match(
      text,
      new RegExp(`^question ${MAX_REQUESTS_PER_CALL + 1} refused: .*may ask the client ${MAX_REQUESTS_PER_CALL} times`),
    );
    // Before: one count per round was left behind when the call ended (17 entries here).
    const broker = (gateway as unknown as { serverRequests: ServerRequestBroker }).serverRequests;
    assert.equal(broker.countedCalls, 0, 'nothing of the call is kept once it ended');
  });

  // proves: MRTR-SERVER-INPUT-LIMITS
  it("refuses a caller's 9th call parked on a server's question, over all its gateways, audited; another caller still parks (attack)", async () => {
    // Three servers (a sandbox holds at most 4 questions waiting), four calls each, all of alice.
    const alice = { subject: 'alice' };
    const gateways = await Promise.all(
      ['a', 'b', 'c'].map((name) => gatewayOver(askMany(1), { serverName: name, caller: alice })),
    );
    const answers = await Promise.all(gateways.flatMap(({ call }) => [1, 2, 3, 4].map(() => call())));
    const parked = answers.filter((a) => a.resultType === 'input_required');
    const texts = answers.map((a) => (a.content as { text: string }[] | undefined)?.[0]?.text).filter(Boolean);
    // Before: all 12 were parked, each holding a call open in its sandbox.
    assert.equal(parked.length, 8, 'alice has 8 calls parked, no more');
    assert.equal(processParkedCalls.count('["alice",null]'), 8);
    assert.equal(texts.length, 4);
    for (const text of texts) assert.match(text!, /^question 1 refused: .*this caller already has 8 calls waiting/);
    // Audited, every one: a sandbox's refusals at most one line a second, the others counted into
    // the next line, or into one of their own at the end of that second (before, a count no later
    // refusal carried was never written: 4 refused, 1 recorded).
    await new Promise((resolve) => setTimeout(resolve, REFUSAL_LINE_INTERVAL_MS + 300));
    const reasons = gateways
      .flatMap((g) => g.recorded)
      .flatMap((e) => (e.type === 'server.request' && e.decision === 'refused' ? [e.reason ?? ''] : []));
    const counted = (reason: string): number =>
      Number(/^(\d+) more refused since the last line/.exec(reason)?.[1] ?? 0) ||
      1 + Number(/\(and (\d+) more refused since the last line\)/.exec(reason)?.[1] ?? 0);
    assert.equal(
      reasons.map(counted).reduce((a, b) => a + b, 0),
      4,
      JSON.stringify(reasons),
    );
    for (const reason of reasons) assert.match(reason, /already has 8 calls/);
    // Another caller is not held by alice's cap.
    const bob = await gatewayOver(askMany(1), { serverName: 'd', caller: { subject: 'bob' } });
    assert.equal((await bob.call()).resultType, 'input_required');
    // Their calls end with their gateways: nothing is left parked.
    for (const { gateway } of [...gateways, bob]) await gateway.close();
    assert.equal(processParkedCalls.count(), 0);
  });
});
