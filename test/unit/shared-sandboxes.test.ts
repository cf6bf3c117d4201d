import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JsonRpcObject } from '../../src/mcp/json-rpc.js';
import type { ForwardedRequest } from '../../src/gateway/forwarded-request.js';
import type { Upstream } from '../../src/gateway/sandbox-pool.js';
import { SharedSandboxes, type ForwardedRequests, type SandboxClient } from '../../src/gateway/shared-sandboxes.js';
import { silentLogger } from '../../src/util/logger.js';

/**
 * Who gets an upstream's message when several gateways (clients) share its sandbox: pure
 * routing, with fake gateways and a fake upstream (no server, no Docker).
 */

interface FakeListener extends SandboxClient {
  got: JsonRpcObject[];
  /** Set when it has a call / request in flight there (the number is only a marker). */
  oldestCall?: number;
  oldestRequest?: number;
}

function listener(prefix: string, inFlight: { call?: number; request?: number } = {}): FakeListener {
  /** Its calls or reads: a request of every id of its prefix is pending (what it got is recorded). */
  const requests = (busy: () => boolean): ForwardedRequests => ({
    get: (id) => (id.startsWith(prefix) ? ({ upstreamId: id } as ForwardedRequest) : undefined),
    answer: (_request, _upstream, m) => void l.got.push(m),
    progress: (_upstream, m) => {
      const token = m.params?.progressToken;
      return typeof token === 'string' && token.startsWith(prefix) && l.got.push(m) > 0;
    },
    busyIn: busy,
    upstreamClosed: () => undefined,
  });
  const l: FakeListener = {
    got: [],
    ...(inFlight.call !== undefined ? { oldestCall: inFlight.call } : {}),
    ...(inFlight.request !== undefined ? { oldestRequest: inFlight.request } : {}),
    calls: requests(() => l.oldestCall !== undefined),
    reads: requests(() => l.oldestRequest !== undefined),
    fromServer: (_id, _upstream, m) => (l.got.push(m), true),
  };
  return l;
}

function fakeUpstream(held = false): Upstream & { deliver(m: JsonRpcObject): boolean; sent: object[] } {
  const sent: object[] = [];
  const forwarded = {
    connected: true,
    take: undefined as ((m: object) => boolean) | undefined,
    send: async (m: object) => void sent.push(m),
  };
  return {
    client: { getServerCapabilities: () => ({ logging: {} }) } as unknown as Upstream['client'],
    forwarded: forwarded as unknown as Upstream['forwarded'],
    closed: new Promise<void>(() => undefined),
    diagnostics: () => '',
    close: async () => {},
    ...(held ? { freezer: { freeze: async () => {}, thaw: async () => {} } } : {}),
    deliver: (m) => forwarded.take?.(m) ?? false,
    sent,
  };
}

function shared(listChanged: string[] = [], unbound: string[] = []): SharedSandboxes {
  return new SharedSandboxes({
    onUnboundRequest: (sandbox, method, more) => void unbound.push(`${sandbox} ${method} +${more}`),
    upstreams: () => Promise.reject(new Error('not in this test')),
    log: silentLogger,
    onToolsListChanged: async () => void listChanged.push('tools'),
    onPromptsOrResourcesChanged: async () => void listChanged.push('offers'),
  });
}

/** Two gateways (clients) over one running sandbox. */
function twoClients() {
  const sandboxes = shared();
  const [a, b] = [listener('hintbox:g1:'), listener('hintbox:g2:')];
  sandboxes.join(a);
  const leaveB = sandboxes.join(b);
  const upstream = fakeUpstream();
  sandboxes.adopt('ro', upstream);
  return { sandboxes, a, b, leaveB, upstream };
}

describe('shared sandboxes: whose is an upstream message', () => {
  it('gives an answer to the gateway whose id it carries, drops one of a gateway gone, leaves numeric ids to the SDK client', () => {
    const { a, b, leaveB, upstream } = twoClients();
    assert.equal(upstream.deliver({ jsonrpc: '2.0', id: 'hintbox:g2:7', result: {} }), true);
    assert.deepEqual([a.got.length, b.got.length], [0, 1]);
    leaveB();
    assert.equal(upstream.deliver({ jsonrpc: '2.0', id: 'hintbox:g2:8', result: {} }), true, 'dropped');
    assert.deepEqual([a.got.length, b.got.length], [0, 1]);
    assert.equal(upstream.deliver({ jsonrpc: '2.0', id: 3, result: {} }), false, "the SDK client's own");
  });

  it("gives progress by hintbox's token only; a client's own token reaches nobody", () => {
    const sandboxes = shared();
    const [a, b] = [listener('hintbox:g1:'), listener('hintbox:g2:')];
    sandboxes.join(a);
    sandboxes.join(b);
    const upstream = fakeUpstream();
    sandboxes.adopt('ro', upstream);
    const progress = (token: unknown) => ({
      jsonrpc: '2.0',
      method: 'notifications/progress',
      params: { progressToken: token },
    });
    upstream.deliver(progress('hintbox:g1:4'));
    upstream.deliver(progress(1));
    assert.deepEqual([a.got.length, b.got.length], [1, 0]);
  });

  it("binds a server's request (and log) to the one client with calls in flight there, refuses it when several have", () => {
    const unbound: string[] = [];
    const sandboxes = shared([], unbound);
    const a = listener('hintbox:g1:');
    const b = listener('hintbox:g2:', { call: 4 });
    const c = listener('hintbox:g3:', { request: 1 }); // a read, not a call: requests bind to calls
    for (const l of [a, b, c]) sandboxes.join(l);
    const upstream = fakeUpstream();
    sandboxes.adopt('rw', upstream);
    upstream.deliver({ jsonrpc: '2.0', id: 1, method: 'elicitation/create', params: {} });
    assert.deepEqual([a.got.length, b.got.length, c.got.length], [0, 1, 0]);
    // A log message: b and c have requests in flight there, so it could be about either's: dropped.
    upstream.deliver({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x' } });
    assert.deepEqual([a.got.length, b.got.length, c.got.length], [0, 1, 0]);

    // Two clients' calls in flight: the server's request could be either's, so it is refused.
    a.oldestCall = 9;
    upstream.deliver({ jsonrpc: '2.0', id: 2, method: 'sampling/createMessage', params: {} });
    assert.deepEqual([a.got.length, b.got.length, c.got.length], [0, 1, 0]);
    assert.deepEqual(upstream.sent.at(-1), {
      jsonrpc: '2.0',
      id: 2,
      error: {
        code: -32600,
        message: 'hintbox: calls of several clients are in flight in this sandbox; a request cannot be bound to one',
      },
    });
    upstream.deliver({ jsonrpc: '2.0', id: 3, method: 'sampling/createMessage', params: {} });
    assert.deepEqual(unbound, ['rw sampling/createMessage +0'], 'audited at most once a second; the next counted');

    // No call in flight: a gateway refuses it (or answers roots); a log goes to no one of several.
    const idle = shared();
    const [d, e] = [listener('hintbox:g4:'), listener('hintbox:g5:')];
    idle.join(d);
    idle.join(e);
    const other = fakeUpstream();
    idle.adopt('rw', other);
    other.deliver({ jsonrpc: '2.0', id: 4, method: 'sampling/createMessage', params: {} });
    assert.deepEqual([d.got.length, e.got.length], [1, 0], 'one gateway refuses it');
    other.deliver({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'y' } });
    assert.deepEqual([d.got.length, e.got.length], [1, 0]);
  });

  it('hands a list change to the session once, whatever the number of gateways; none from a held sandbox outside any call', async () => {
    const changed: string[] = [];
    const sandboxes = shared(changed);
    for (const prefix of ['hintbox:g1:', 'hintbox:g2:', 'hintbox:g3:']) sandboxes.join(listener(prefix));
    const held = fakeUpstream(true);
    sandboxes.adopt('rw', held);
    held.deliver({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    const free = fakeUpstream();
    sandboxes.adopt('ro', free);
    free.deliver({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    free.deliver({ jsonrpc: '2.0', id: 5, method: 'notifications/prompts/list_changed' }); // a request in disguise
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(changed, ['tools']);
  });

  it('tells each sandbox the most verbose logging level of its clients, and again when that client leaves', () => {
    const { sandboxes, a, b, leaveB, upstream } = twoClients();
    const levels = () =>
      upstream.sent.flatMap((m) =>
        (m as { method?: string }).method === 'logging/setLevel'
          ? [(m as { params: { level: string } }).params.level]
          : [],
      );
    sandboxes.setLevel(a, 'error');
    sandboxes.setLevel(b, 'debug');
    sandboxes.setLevel(a, 'warning'); // still less verbose than b's: nothing new to tell
    assert.deepEqual(levels(), ['error', 'debug']);
    leaveB();
    assert.deepEqual(levels(), ['error', 'debug', 'warning']);
    const later = fakeUpstream();
    sandboxes.adopt('rw', later);
    assert.deepEqual(
      (later.sent[0] as { params?: unknown }).params,
      { level: 'warning' },
      'a sandbox started later is told too',
    );
  });
});
