import { Duplex } from 'node:stream';
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { ErrorCode, McpError, type CallToolResult, type Progress, type Tool } from '@modelcontextprotocol/sdk/types.js';
import {
  Gateway,
  SharedSandboxes,
  type RelayGuard,
  type RoutedTool,
  type Upstream,
  type UpstreamFactory,
} from '../../src/gateway/gateway.js';
import { createLogger, silentLogger, type Logger } from '../../src/util/logger.js';
import type { ApprovalDecision } from '../../src/policy/approval-decision.js';
import type { AuditOutcomeReport } from '../../src/audit/audit-record.js';
import { factory, fakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { GateControl } from '../../src/engine/gate-control.js';

const READ_DEF = {
  name: 'read',
  title: 'Read',
  description: 'reads',
  inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  annotations: { readOnlyHint: true, openWorldHint: false, 'x-annotation-extra': 1 },
  execution: { taskSupport: 'forbidden' },
  'x-vendor': { nested: [1, 'two', { three: true }] },
} as unknown as Tool;
const WRITE_DEF = {
  name: 'write',
  inputSchema: { type: 'object' },
  annotations: { readOnlyHint: false, openWorldHint: false },
} as unknown as Tool;
const SLOW_DEF = { name: 'slow', inputSchema: { type: 'object' } } as unknown as Tool;

function routes(entries: Array<[Tool, string]>): Map<string, RoutedTool> {
  return new Map(entries.map(([definition, sandbox]) => [definition.name, { definition, sandbox }]));
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!().catch(() => undefined);
});

async function connect(
  tools: Map<string, RoutedTool>,
  upstreams: UpstreamFactory,
  extra: {
    started?: Map<string, Upstream>;
    log?: Logger;
    callTimeoutMs?: number;
    guard?: RelayGuard;
    onDeadline?: (sandbox: string, tool: string) => void;
    onSandboxIdle?: (sandbox: string) => void;
    onToolsListChanged?: (from: Upstream) => Promise<void>;
  } = {},
): Promise<{ gateway: Gateway; client: Client; shared: SharedSandboxes }> {
  // The sandboxes, as the session makes them (the gateway only joins them).
  const shared = new SharedSandboxes({
    upstreams,
    log: extra.log ?? silentLogger,
    ...(extra.onSandboxIdle ? { onSandboxIdle: extra.onSandboxIdle } : {}),
    ...(extra.onToolsListChanged ? { onToolsListChanged: extra.onToolsListChanged } : {}),
  });
  for (const [id, upstream] of extra.started ?? []) shared.adopt(id, upstream);
  const gateway = new Gateway({
    serverName: 'files',
    tools,
    shared,
    log: extra.log ?? silentLogger,
    callTimeoutMs: extra.callTimeoutMs ?? 10_000,
    readSandbox: 'ro-offline',
    ...(extra.guard ? { guard: extra.guard } : {}),
    ...(extra.onDeadline ? { onDeadline: extra.onDeadline } : {}),
  });
  const client = new Client({ name: 'test-client', version: '1.0.0' });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await gateway.connect(serverSide);
  await client.connect(clientSide);
  cleanups.push(
    () => shared.close(),
    () => client.close(),
    () => gateway.close(),
  );
  return { gateway, client, shared };
}

function text(result: unknown): string {
  const content = (result as CallToolResult).content;
  return content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
}

function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe('Gateway', () => {
  // proves: STDIO
  it('lists the tool definitions exactly as received, unknown keys included', async () => {
    const f = factory();
    const { client } = await connect(
      routes([
        [READ_DEF, 'ro-offline'],
        [WRITE_DEF, 'rw-offline'],
      ]),
      f,
    );
    const raw = await client.request(
      { method: 'tools/list', params: {} },
      z.looseObject({ tools: z.array(z.unknown()) }),
    );
    assert.deepEqual(raw.tools, [READ_DEF, WRITE_DEF]);
    const first = raw.tools[0] as Record<string, unknown>;
    assert.deepEqual(first['x-vendor'], { nested: [1, 'two', { three: true }] });
    assert.deepEqual(first.execution, { taskSupport: 'forbidden' });
    assert.equal(f.started.length, 0, 'listing tools starts no sandbox');
  });

  it('routes each call to the upstream of its sandbox', async () => {
    const f = factory();
    const { client } = await connect(
      routes([
        [READ_DEF, 'ro-offline'],
        [WRITE_DEF, 'rw-offline'],
      ]),
      f,
    );

    const r1 = await client.callTool({ name: 'read', arguments: { path: '/projects/a' } });
    assert.equal(text(r1), 'ro-offline:read:{"path":"/projects/a"}');
    const r2 = await client.callTool({ name: 'write', arguments: { path: '/projects/b' } });
    assert.equal(text(r2), 'rw-offline:write:{"path":"/projects/b"}');
    await client.callTool({ name: 'read', arguments: { path: '/projects/c' } });

    assert.deepEqual(
      f.started.map((u) => u.id),
      ['ro-offline', 'rw-offline'],
      'one upstream per sandbox, started lazily and reused',
    );
    const [ro, rw] = f.started;
    assert.deepEqual(
      ro!.calls.map((c) => [c.name, c.arguments]),
      [
        ['read', { path: '/projects/a' }],
        ['read', { path: '/projects/c' }],
      ],
    );
    assert.deepEqual(
      rw!.calls.map((c) => [c.name, c.arguments]),
      [['write', { path: '/projects/b' }]],
    );
  });

  it('uses an already started upstream without calling the factory', async () => {
    const f = factory();
    const discovery = await fakeUpstream('ro-offline');
    const { client } = await connect(routes([[READ_DEF, 'ro-offline']]), f, {
      started: new Map([['ro-offline', discovery]]),
    });
    await client.callTool({ name: 'read', arguments: { path: 'x' } });
    assert.equal(f.started.length, 0);
    assert.equal(discovery.calls.length, 1);
  });

  it('starts one upstream for concurrent first calls to the same sandbox', async () => {
    const f = factory();
    const { client } = await connect(routes([[READ_DEF, 'ro-offline']]), f);
    const results = await Promise.all(
      [1, 2, 3].map((i) => client.callTool({ name: 'read', arguments: { path: String(i) } })),
    );
    assert.equal(results.length, 3);
    assert.equal(f.started.length, 1);
    assert.equal(f.started[0]!.calls.length, 3);
  });

  it('answers an unknown tool with InvalidParams and starts nothing', async () => {
    const f = factory();
    const { client } = await connect(routes([[READ_DEF, 'ro-offline']]), f);
    await assert.rejects(
      client.callTool({ name: 'rm_rf', arguments: {} }),
      (error: unknown) =>
        error instanceof McpError && error.code === ErrorCode.InvalidParams && /rm_rf/.test(error.message),
    );
    assert.equal(f.started.length, 0);
  });

  it('passes upstream error results and errors on as they are', async () => {
    const f = factory({
      'ro-offline': () => ({ isError: true, content: [{ type: 'text', text: 'ENOENT: no such file' }] }),
      'rw-offline': () => {
        throw new McpError(ErrorCode.InvalidParams, 'path is required');
      },
    });
    const { client } = await connect(
      routes([
        [READ_DEF, 'ro-offline'],
        [WRITE_DEF, 'rw-offline'],
      ]),
      f,
    );
    const r = (await client.callTool({ name: 'read', arguments: { path: 'x' } })) as CallToolResult;
    assert.equal(r.isError, true);
    assert.equal(text(r), 'ENOENT: no such file');
    await assert.rejects(
      client.callTool({ name: 'write', arguments: {} }),
      (error: unknown) =>
        error instanceof McpError && error.code === ErrorCode.InvalidParams && /path is required/.test(error.message),
    );
  });

  it('passes progress notifications through to the client', async () => {
    const received: Progress[] = [];
    const gotTwo = deferred();
    let upstreamToken: unknown;
    const f = factory({
      'ro-offline': async (request, extra) => {
        upstreamToken = request.params._meta?.progressToken;
        assert.notEqual(upstreamToken, undefined, 'the gateway asks the upstream for progress');
        for (const progress of [1, 2]) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: {
              progressToken: upstreamToken as string | number,
              progress,
              total: 3,
              message: `step ${progress}`,
            },
          });
        }
        await gotTwo.promise;
        return { content: [{ type: 'text', text: 'done' }] };
      },
    });
    const { client } = await connect(routes([[READ_DEF, 'ro-offline']]), f);
    const result = await client.callTool({ name: 'read', arguments: { path: 'x' } }, undefined, {
      onprogress: (p) => {
        received.push(p);
        if (received.length === 2) gotTwo.resolve();
      },
      timeout: 5000,
    });
    assert.equal(text(result), 'done');
    assert.deepEqual(
      received.map((p) => [p.progress, p.total, p.message]),
      [
        [1, 3, 'step 1'],
        [2, 3, 'step 2'],
      ],
    );
  });

  it('passes cancellation through to the upstream', async () => {
    const started = deferred();
    const sawAbort = deferred<unknown>();
    const f = factory({
      'ro-offline': (_request, extra) =>
        new Promise<CallToolResult>((resolve) => {
          extra.signal.addEventListener('abort', () => {
            sawAbort.resolve(extra.signal.reason);
            resolve({ content: [{ type: 'text', text: 'too late' }] });
          });
          started.resolve();
        }),
    });
    const { client } = await connect(routes([[READ_DEF, 'ro-offline']]), f);
    const controller = new AbortController();
    const call = client.callTool({ name: 'read', arguments: { path: 'x' } }, undefined, { signal: controller.signal });
    await started.promise;
    controller.abort('user pressed stop');
    await assert.rejects(call);
    const reason = await withTimeout(sawAbort.promise, 2000, 'the upstream handler saw its signal aborted');
    assert.ok(reason !== undefined, 'reason !== undefined');
    assert.equal(f.started[0]!.calls.length, 1);
  });

  // proves: CALL-CEILING
  it('answers a call past its deadline with RequestTimeout and cancels it upstream; progress does not extend the deadline', async () => {
    const sawAbort = deferred<unknown>();
    const progressingAborted = deferred<unknown>();
    const f = factory({
      'ro-offline': async (request, extra) => {
        if ((request.params.arguments as { path?: string } | undefined)?.path === 'progressing') {
          // A progress step every 60 ms for as long as the call lasts: each would have reset a deadline.
          for (let step = 1; !extra.signal.aborted; step++) {
            await new Promise((r) => setTimeout(r, 60));
            await extra
              .sendNotification({
                method: 'notifications/progress',
                params: { progressToken: extra._meta?.progressToken ?? 'none', progress: step },
              })
              .catch(() => undefined);
          }
          progressingAborted.resolve(extra.signal.reason);
          return { content: [{ type: 'text', text: 'done' }] };
        }
        return new Promise<CallToolResult>(() => {
          extra.signal.addEventListener('abort', () => sawAbort.resolve(extra.signal.reason));
        });
      },
    });
    const { client } = await connect(routes([[READ_DEF, 'ro-offline']]), f, { callTimeoutMs: 300 });
    await assert.rejects(
      client.callTool({ name: 'read', arguments: { path: 'hangs' } }, undefined, { timeout: 5000 }),
      (error: unknown) => error instanceof McpError && error.code === ErrorCode.RequestTimeout,
    );
    await withTimeout(sawAbort.promise, 2000, 'the upstream saw the call cancelled');
    const steps: number[] = [];
    const started = Date.now();
    await assert.rejects(
      client.callTool({ name: 'read', arguments: { path: 'progressing' } }, undefined, {
        timeout: 5000,
        resetTimeoutOnProgress: true,
        onprogress: (p) => steps.push(p.progress),
      }),
      (error: unknown) =>
        error instanceof McpError &&
        error.code === ErrorCode.RequestTimeout &&
        /which progress does not extend/.test(error.message),
    );
    const elapsed = Date.now() - started;
    assert.ok(elapsed < 300 + 250, `ended at its ceiling, not later (${elapsed} ms)`);
    assert.ok(steps.length >= 2, `progress passed through until then (${steps.length} steps)`);
    await withTimeout(progressingAborted.promise, 2000, 'the progressing call cancelled upstream');
  });

  it('answers malformed tools/call params with InvalidParams', async () => {
    const f = factory();
    const { client } = await connect(routes([[READ_DEF, 'ro-offline']]), f);
    await assert.rejects(
      client.request({ method: 'tools/call', params: { name: 'read', arguments: 'not an object' } }, z.object({})),
      (error: unknown) => error instanceof McpError && error.code === ErrorCode.InvalidParams,
    );
    assert.equal(f.started.length, 0, 'nothing was started');
  });

  it('cancels upstream calls when the client goes away', async () => {
    const started = deferred();
    const sawAbort = deferred();
    const f = factory({
      'ro-offline': (_request, extra) =>
        new Promise<CallToolResult>(() => {
          extra.signal.addEventListener('abort', () => sawAbort.resolve());
          started.resolve();
        }),
    });
    const { client } = await connect(routes([[READ_DEF, 'ro-offline']]), f);
    const call = client.callTool({ name: 'read', arguments: { path: 'x' } });
    call.catch(() => undefined);
    await started.promise;
    await client.close();
    await withTimeout(sawAbort.promise, 2000, 'the upstream call is cancelled');
  });

  it('answers a call whose upstream dies with an error result, and restarts the upstream on the next call', async () => {
    const logLines: string[] = [];
    const log = createLogger('debug', (line) => logLines.push(line));
    const hanging = deferred();
    let starts = 0;
    const f = factory({
      'ro-offline': (request, _extra, upstream) => {
        if (request.params.name === 'slow') {
          hanging.resolve();
          return new Promise<CallToolResult>(() => {});
        }
        return { content: [{ type: 'text', text: `ok from start ${upstream.id}#${starts}` }] };
      },
    });
    const counting: UpstreamFactory = async (id) => {
      starts++;
      return f(id);
    };
    const { client } = await connect(
      routes([
        [READ_DEF, 'ro-offline'],
        [SLOW_DEF, 'ro-offline'],
      ]),
      counting,
      { log },
    );

    const pending = client.callTool({ name: 'slow', arguments: {} });
    await hanging.promise;
    assert.equal(starts, 1);
    const first = f.started[0]!;
    await first.serverTransport.close(); // the sandbox dies

    const died = (await withTimeout(pending, 2000, 'the pending call is answered')) as CallToolResult;
    assert.equal(died.isError, true);
    assert.match(text(died), /died/);
    assert.match(text(died), /slow/);
    assert.match(text(died), /out of memory/, 'the diagnostics are included');

    const next = await client.callTool({ name: 'read', arguments: { path: 'x' } });
    assert.equal(starts, 2, 'the next call starts a new upstream');
    assert.equal(text(next), 'ok from start ro-offline#2');
    assert.equal(f.started[1]!.calls.length, 1);
    assert.equal(first.calls.length, 1);
    assert.ok(
      logLines.some((l) => /ro-offline died/.test(l)),
      logLines.join('\n'),
    );
  });

  it('starts a new upstream when the current one lost its connection before the gateway heard it closed', async () => {
    const f = factory();
    const { client } = await connect(routes([[WRITE_DEF, 'rw-offline']]), f);
    await client.callTool({ name: 'write', arguments: {} });
    const [first] = f.started;
    first!.client.onclose = undefined; // its `closed` will not be told: the window between the two
    await first!.client.close();
    const result = await client.callTool({ name: 'write', arguments: {} });
    assert.equal(result.isError, undefined, text(result));
    assert.equal(f.started.length, 2, 'a new upstream served the call');
  });

  it('answers with an error result when a sandbox cannot be started, and tries again next time', async () => {
    let attempts = 0;
    const flaky: UpstreamFactory = async (id) => {
      attempts++;
      if (attempts === 1) throw new Error('image hintbox/files:1 not found');
      return fakeUpstream(id);
    };
    const { client } = await connect(routes([[READ_DEF, 'ro-offline']]), flaky);
    const failed = (await client.callTool({ name: 'read', arguments: { path: 'x' } })) as CallToolResult;
    assert.equal(failed.isError, true);
    assert.match(text(failed), /could not start sandbox ro-offline/);
    assert.match(text(failed), /image hintbox\/files:1 not found/);
    const ok = await client.callTool({ name: 'read', arguments: { path: 'x' } });
    assert.equal(text(ok), 'ro-offline:read:{"path":"x"}');
    assert.equal(attempts, 2);
  });

  it('close() leaves the shared sandboxes to their owner, whose close() closes every upstream', async () => {
    const f = factory();
    const { gateway, client, shared } = await connect(
      routes([
        [READ_DEF, 'ro-offline'],
        [WRITE_DEF, 'rw-offline'],
      ]),
      f,
    );
    await client.callTool({ name: 'read', arguments: { path: 'x' } });
    await client.callTool({ name: 'write', arguments: {} });
    await gateway.close();
    assert.equal(f.started.length, 2);
    assert.deepEqual(
      f.started.map((u) => u.closedByGateway),
      [false, false],
      'other clients may still use them',
    );
    await shared.close();
    for (const u of f.started) {
      assert.equal(u.closedByGateway, true, u.id);
      await withTimeout(u.closed, 1000, `${u.id} closed`);
    }
  });
  // proves: DB-VIOLATION
  it('records a hint violation on the audit outcome of the calls running in that sandbox, and only those', async () => {
    const reading = deferred();
    const release = deferred();
    const f = factory({
      'ro-offline-dbread': async (request) => {
        reading.resolve();
        await release.promise;
        return { content: [{ type: 'text', text: `read ${String(request.params.name)}` }] };
      },
    });
    const outcomes = new Map<string, AuditOutcomeReport>();
    let next = 0;
    const guard: RelayGuard = {
      visible: () => true,
      admit: (tool) =>
        Promise.resolve({
          allowed: true,
          auditId: `${tool}-${++next}`,
          decision: { retryOnTimeout: false } as ApprovalDecision,
        }),
      finish: (id, report) => outcomes.set(id, report),
    };
    const { gateway, client } = await connect(
      routes([
        [READ_DEF, 'ro-offline-dbread'],
        [WRITE_DEF, 'rw-offline-dbwrite'],
      ]),
      f,
      { guard },
    );
    assert.equal(text(await client.callTool({ name: 'write', arguments: {} })), 'rw-offline-dbwrite:write:{}');
    const read = client.callTool({ name: 'read', arguments: { path: 'x' } });
    await withTimeout(reading.promise, 2000, 'the read call reached its sandbox');
    assert.deepEqual(gateway.noteHintViolation('ro-offline-dbread', 'readOnlyHint: refused (25006)'), ['read']);
    assert.deepEqual(gateway.noteHintViolation('rw-offline-dbwrite', 'nothing runs there'), []);
    release.resolve();
    await read;
    assert.deepEqual(outcomes.get('write-1'), { outcome: 'ok', attempts: 1 });
    assert.deepEqual(outcomes.get('read-2'), {
      outcome: 'ok',
      attempts: 1,
      hintViolation: 'readOnlyHint: refused (25006)',
    });
  });

  it('never forwards a call that the client cancelled while a person was being asked', async () => {
    const f = factory();
    const asked = deferred();
    const answer = deferred();
    const outcomes = new Map<string, AuditOutcomeReport>();
    const guard: RelayGuard = {
      visible: () => true,
      admit: async (tool) => {
        asked.resolve();
        await answer.promise; // the person takes their time, then approves
        return { allowed: true, auditId: `${tool}-1`, decision: { retryOnTimeout: false } as ApprovalDecision };
      },
      finish: (id, report) => outcomes.set(id, report),
    };
    const { client } = await connect(routes([[WRITE_DEF, 'rw-offline']]), f, { guard });
    const controller = new AbortController();
    const call = client.callTool({ name: 'write', arguments: {} }, undefined, { signal: controller.signal });
    await withTimeout(asked.promise, 2000, 'the guard was asked');
    controller.abort('changed my mind');
    await assert.rejects(call);
    answer.resolve();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(f.started.length, 0, 'no sandbox was started for it, nothing was forwarded');
    assert.equal(outcomes.get('write-1')?.outcome, 'cancelled');
  });

  // proves: HELD-UNTIL-CALLED
  it('thaws a held sandbox before each call reaches it and freezes it when its last call ends', async () => {
    const events: string[] = [];
    let frozen = false;
    const release = deferred();
    const held = async (sandboxId: string): Promise<Upstream> => {
      const upstream = await fakeUpstream(sandboxId, async (request) => {
        events.push(`call ${request.params.name} (${frozen ? 'frozen!' : 'running'})`);
        if (request.params.name === 'slow') await release.promise;
        return { content: [] };
      });
      const freezer = {
        freeze: async () => {
          frozen = true;
          events.push('freeze');
        },
        thaw: async () => {
          frozen = false;
          events.push('thaw');
        },
      };
      return Object.assign(upstream, { freezer });
    };
    const idle: string[] = [];
    const { client } = await connect(
      routes([
        [WRITE_DEF, 'rw-offline'],
        [SLOW_DEF, 'rw-offline'],
      ]),
      held,
      { onSandboxIdle: (sandbox) => void idle.push(sandbox) },
    );
    const settled = () => new Promise((r) => setTimeout(r, 20));

    await client.callTool({ name: 'write', arguments: {} });
    await settled();
    const slow = client.callTool({ name: 'slow', arguments: {} });
    await settled();
    await client.callTool({ name: 'write', arguments: {} }); // while slow is in flight: no freeze after it
    await settled();
    assert.equal(frozen, false, 'a call is still in flight');
    release.resolve();
    await slow;
    await settled();
    assert.deepEqual(events.filter(Boolean), [
      'call write (running)',
      'freeze',
      'thaw',
      'call slow (running)',
      'call write (running)',
      'freeze',
    ]);
    assert.deepEqual(idle, ['rw-offline', 'rw-offline'], 'idle each time its last call ended');
  });

  // proves: HELD-UNTIL-CALLED
  it('ignores a tool change a held sandbox announces outside a call, and never thaws it to list its tools', async () => {
    let frozen = false;
    let upstream!: FakeUpstream;
    const start = async (sandboxId: string): Promise<Upstream> => {
      upstream = await fakeUpstream(sandboxId, async (_request, extra) => {
        await extra.sendNotification({ method: 'notifications/tools/list_changed' });
        return { content: [] };
      });
      const freezer = {
        freeze: async () => void (frozen = true),
        thaw: async () => void (frozen = false),
      };
      return Object.assign(upstream, { freezer });
    };
    const listings: boolean[] = [];
    const listingAnswered = deferred();
    const { client } = await connect(routes([[WRITE_DEF, 'rw-offline']]), start, {
      // The server stalls its answer to the listing: that must not keep it thawed.
      onToolsListChanged: async () => {
        listings.push(frozen);
        await listingAnswered.promise;
      },
    });
    const settled = () => new Promise((r) => setTimeout(r, 30));

    await client.callTool({ name: 'write', arguments: {} });
    await settled();
    assert.deepEqual(listings, [false], 'announced in a call: listed while that call ran');
    assert.equal(frozen, true, 'frozen when the call ended, the listing still unanswered');
    listingAnswered.resolve();
    // The server speaks with no call in flight (as it could in the moment before its freeze).
    await upstream.serverTransport.send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    await settled();
    assert.deepEqual(listings, [false], 'outside a call: ignored, no thaw');
    assert.equal(frozen, true);
  });

  // proves: HELD-UNTIL-CALLED
  it('freezes a held sandbox that a call released even when the call is cancelled while the server starts', async () => {
    let frozen = false;
    const initialized = deferred();
    let upstream!: FakeUpstream;
    const start = async (sandboxId: string): Promise<Upstream> => {
      upstream = await fakeUpstream(sandboxId); // released: the server runs from here
      await initialized.promise; // and takes its time to answer initialize
      const freezer = {
        freeze: async () => void (frozen = true),
        thaw: async () => void (frozen = false),
      };
      return Object.assign(upstream, { freezer });
    };
    const { client } = await connect(routes([[WRITE_DEF, 'rw-offline']]), start);
    const stop = new AbortController();
    const call = client.callTool({ name: 'write', arguments: {} }, undefined, { signal: stop.signal }).then(
      () => 'answered',
      (e: Error) => e.message,
    );
    await new Promise((r) => setTimeout(r, 20));
    stop.abort('the person gave up waiting');
    await new Promise((r) => setTimeout(r, 20));
    initialized.resolve();
    assert.match(await call, /gave up/);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(upstream.calls.length, 0, 'the cancelled call was never sent');
    assert.equal(frozen, true, "the server it started does not run on with nobody's call in flight");
  });

  // proves: HELD-UNTIL-CALLED
  it('sends neither the thaw nor a call that comes in while the freeze is unanswered, and never either when the gate answers F', async () => {
    // The gate's end of the control connection: what hintbox wrote to it, and its answers.
    const toGate: string[] = [];
    const gate = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, done) {
        toGate.push(chunk.toString('latin1'));
        done();
      },
    });
    let upstream!: FakeUpstream;
    const start = async (sandboxId: string): Promise<Upstream> => {
      upstream = await fakeUpstream(sandboxId);
      const control = new GateControl(gate);
      return Object.assign(upstream, { freezer: { freeze: () => control.freeze(), thaw: () => control.thaw() } });
    };
    const { client } = await connect(routes([[WRITE_DEF, 'rw-offline']]), start);
    const settled = () => new Promise((r) => setTimeout(r, 20));
    await client.callTool({ name: 'write', arguments: {} });
    await settled();
    assert.deepEqual(toGate, ['S'], 'the freeze is asked as the first call ends');
    const second = client.callTool({ name: 'write', arguments: {} }); // while the gate has not answered
    await settled();
    assert.deepEqual(toGate, ['S'], 'no thaw behind an unanswered freeze');
    assert.equal(upstream.calls.length, 1, 'and no call');
    gate.push('F'); // the gate could not make sure every process stopped
    const answer = await second;
    assert.equal(answer.isError, true, 'refused: the sandbox is removed (its calls end with it)');
    await settled();
    assert.deepEqual(toGate, ['S'], 'never thawed');
    assert.equal(upstream.calls.length, 1, 'the call that came in meanwhile never reached the server');
  });

  it('tells its owner when a call passes its deadline (onDeadline), with the sandbox and the tool', async () => {
    const f = factory({ 'ro-offline-dbread': () => new Promise<CallToolResult>(() => {}) });
    const deadlines: Array<[string, string]> = [];
    const { client } = await connect(routes([[READ_DEF, 'ro-offline-dbread']]), f, {
      callTimeoutMs: 100,
      onDeadline: (sandbox, tool) => deadlines.push([sandbox, tool]),
    });
    await assert.rejects(
      client.callTool({ name: 'read', arguments: { path: 'hangs' } }, undefined, { timeout: 5000 }),
      (error: unknown) => error instanceof McpError && error.code === ErrorCode.RequestTimeout,
    );
    assert.deepEqual(deadlines, [['ro-offline-dbread', 'read']]);
  });
});

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
