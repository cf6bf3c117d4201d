import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { answerOf, notificationOf, type JsonRpcObject } from '../../src/mcp/json-rpc.js';
import { readRefusal, subjectOf } from '../../src/gateway/read-requests.js';
import { Relisting, MIN_RELISTING_INTERVAL_MS } from '../../src/gateway/relisting.js';
import type { Upstream } from '../../src/gateway/sandbox-pool.js';
import { createLogger } from '../../src/util/logger.js';

describe('what a server sends on reaches the client rebuilt', () => {
  it('a notification keeps its method and params only; one with an id (a request in disguise) is dropped', () => {
    const params = { level: 'error', data: 'x' };
    assert.deepEqual(notificationOf({ jsonrpc: '2.0', method: 'notifications/message', params, result: { x: 1 } }), {
      jsonrpc: '2.0',
      method: 'notifications/message',
      params,
    });
    for (const id of [0, 1, 'a', null]) {
      const forged = { jsonrpc: '2.0', id, method: 'notifications/message', params } as unknown as JsonRpcObject;
      assert.equal(notificationOf(forged), undefined, `id ${JSON.stringify(id)}`);
    }
    assert.equal(
      notificationOf({ method: 'notifications/message', params: ['x'] } as unknown as JsonRpcObject),
      undefined,
    );
    assert.deepEqual(notificationOf({ method: 'notifications/x' }), { jsonrpc: '2.0', method: 'notifications/x' });
  });

  it('an answer keeps its result or its error only, under the client id', () => {
    assert.deepEqual(answerOf({ id: 'hintbox:1', result: { ok: 1 }, method: 'x', params: {} }, 7), {
      jsonrpc: '2.0',
      id: 7,
      result: { ok: 1 },
    });
    assert.deepEqual(answerOf({ id: 'h', error: { code: -1, message: 'no', data: { d: 1 }, extra: 2 } }, 7), {
      jsonrpc: '2.0',
      id: 7,
      error: { code: -1, message: 'no', data: { d: 1 } },
    });
    // Not an integer code, not a string message: JSON-RPC's own shapes instead.
    const odd = answerOf({ id: 'h', error: { code: 1.5, message: { x: 1 } } }, 7) as {
      error: { code: number; message: string };
    };
    assert.deepEqual([odd.error.code, odd.error.message], [-32603, 'error']);
    // An integer beyond 2^53 is no integer to a client's schema either (found by fuzz-gateway).
    const huge = answerOf({ id: 'h', error: { code: 2 ** 53, message: 'm' } }, 7) as { error: { code: number } };
    assert.equal(huge.error.code, -32603);
    const neither = answerOf({ id: 'h' }, 7) as { error: { message: string } };
    assert.match(neither.error.message, /neither a result nor an error/);
    assert.match((answerOf({ id: 'h', result: [1] }, 7) as { error: { message: string } }).error.message, /neither/);
  });
});

describe('the checks of a read', () => {
  const shown = { showsPrompt: (n: string) => n === 'shown', showsResourceRef: (u: string) => u === 'note://{id}' };

  it('refuses what is not shown, and any completion reference MCP does not have', () => {
    assert.equal(readRefusal('prompts/get', { name: 'shown' }, shown), undefined);
    assert.match(readRefusal('prompts/get', { name: 'hidden' }, shown) ?? '', /not approved/);
    assert.match(readRefusal('prompts/get', {}, shown) ?? '', /expected params.name/);
    const complete = (ref: unknown) =>
      readRefusal('completion/complete', { ref, argument: { name: 'a', value: '' } }, shown);
    assert.equal(complete({ type: 'ref/prompt', name: 'shown' }), undefined);
    assert.equal(complete({ type: 'ref/resource', uri: 'note://{id}' }), undefined);
    assert.match(complete({ type: 'ref/prompt', name: 'hidden' }) ?? '', /not approved/);
    assert.match(complete({ type: 'ref/resource', uri: 'note://other/{id}' }) ?? '', /not approved/);
    assert.match(complete({ type: 'ref/whatever', name: 'hidden' }) ?? '', /neither ref\/prompt nor ref\/resource/);
    assert.match(complete(undefined) ?? '', /expected params.ref/);
    assert.match(readRefusal('resources/read', { uri: 7 }, shown) ?? '', /expected params.uri/);
    assert.equal(readRefusal('resources/read', { uri: 'note://1' }, shown), undefined, 'contents are data: any URI');
  });

  it('names what a read is about', () => {
    assert.equal(subjectOf('resources/read', { uri: 'note://1' }), 'note://1');
    assert.equal(subjectOf('prompts/get', { name: 'p' }), 'p');
    assert.equal(subjectOf('completion/complete', { ref: { type: 'ref/prompt', name: 'p' } }), 'ref/prompt p');
    assert.equal(subjectOf('completion/complete', {}), null);
  });
});

describe('Relisting', () => {
  const upstream = (name: string) => ({ name }) as unknown as Upstream;

  it('lists one at a time, from the latest announcer, spaced by the interval; a failure is logged', async () => {
    const listed: { from: string; at: number }[] = [];
    const lines: string[] = [];
    const log = createLogger('error', (line) => lines.push(line));
    let release!: () => void;
    const first = new Promise<void>((r) => (release = r));
    const relisting = new Relisting(
      'tools',
      async (from) => {
        listed.push({ from: (from as unknown as { name: string }).name, at: Date.now() });
        if (listed.length === 1) await first;
        if (listed.length === 2) throw new Error('the server answered badly');
      },
      log,
      () => false,
    );
    relisting.announced(upstream('a'));
    relisting.announced(upstream('b'));
    relisting.announced(upstream('c'));
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(
      listed.map((l) => l.from),
      ['a'],
      'one at a time',
    );
    release();
    await new Promise((r) => setTimeout(r, MIN_RELISTING_INTERVAL_MS + 100));
    assert.deepEqual(
      listed.map((l) => l.from),
      ['a', 'c'],
      'the announcements meanwhile: one listing, from the latest',
    );
    assert.ok(listed[1]!.at - listed[0]!.at >= MIN_RELISTING_INTERVAL_MS - 5, 'spaced');
    assert.match(lines.join('\n'), /listing the tools again failed: the server answered badly/);
  });

  it('lists nothing once stopped', async () => {
    let stopped = false;
    let count = 0;
    const relisting = new Relisting(
      'tools',
      async () => void count++,
      createLogger('error', () => {}),
      () => stopped,
    );
    relisting.announced(upstream('a'));
    await new Promise((r) => setTimeout(r, 10));
    stopped = true;
    relisting.announced(upstream('b'));
    await new Promise((r) => setTimeout(r, MIN_RELISTING_INTERVAL_MS + 50));
    assert.equal(count, 1);
  });
});
