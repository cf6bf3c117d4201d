import assert from 'node:assert/strict';
import { callerText } from '../../src/util/caller-identity.js';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { AuditEvent } from '../../src/audit/audit-record.js';
import type { Access } from '../../src/serve/authenticator.js';
import { BearerTokens, hashToken } from '../../src/serve/bearer-tokens.js';
import { McpHttpServer, type ClientSession } from '../../src/serve/mcp-http-server.js';
import { createLogger, silentLogger } from '../../src/util/logger.js';
import { connect } from 'node:net';
import { sdkClientSession } from './support/sdk-client-session.js';

/**
 * The HTTP endpoint of `hintbox serve` with a fake session per client (an SDK server with a
 * slow tool) in place of a gateway over sandboxes: routing, tokens, sessions and drain, in
 * seconds and without Docker.
 */
describe('the HTTP endpoint of hintbox serve', () => {
  const events: AuditEvent[] = [];
  const closed: string[] = [];
  let http: McpHttpServer;
  let base: string;
  let ready = false;

  function fakeSession(server: string, access: Access | null): Promise<ClientSession> {
    const caller = access ? callerText(access.caller) : undefined;
    const mcp = new McpServer({ name: server, version: '1' });
    mcp.registerTool('whoami', { inputSchema: { wait: z.number().optional() } }, async ({ wait }) => {
      await new Promise((r) => setTimeout(r, wait ?? 0));
      return { content: [{ type: 'text', text: `${server}:${caller ?? '-'}` }] };
    });
    // What a handler behind the endpoint could see of the client's credentials: nothing.
    mcp.registerTool('credentials', {}, (extra) => ({
      content: [
        {
          type: 'text',
          text: `${String(extra.requestInfo?.headers.authorization ?? 'none')}|${access?.tags?.join(',') ?? 'all'}`,
        },
      ],
    }));
    return sdkClientSession(mcp, () => closed.push(`${server}:${caller ?? '-'}`));
  }

  before(async () => {
    http = new McpHttpServer({
      servers: ['alpha', 'beta'],
      auth: BearerTokens.parse(
        JSON.stringify([
          { name: 'alice', sha256: hashToken('a-token') },
          { name: 'bob', sha256: hashToken('b-token'), servers: ['beta'] },
          { name: 'reader', sha256: hashToken('r-token'), tags: ['Read'] },
        ]),
        'tokens.json',
      ),
      openSession: fakeSession,
      denials: { deny: (denied) => void (denied.event && events.push(denied.event)) },
      ready: () => ({ ready, servers: { alpha: ready ? 'ready' : 'starting', beta: 'ready' } }),
      log: silentLogger,
    });
    base = `http://127.0.0.1:${await http.listen(0, '127.0.0.1')}`;
  });
  after(() => http.drain(0));

  const connect = async (server: string, token: string): Promise<Client> => {
    const client = new Client({ name: 't', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp/${server}`), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    return client;
  };
  const text = (result: unknown): string => (result as { content: { text: string }[] }).content[0]?.text ?? '';

  it('answers /healthz always and /readyz once ready, naming only servers', async () => {
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    const notYet = await fetch(`${base}/readyz`);
    assert.equal(notYet.status, 503);
    assert.deepEqual(await notYet.json(), { ready: false, servers: { alpha: 'starting', beta: 'ready' } });
    ready = true;
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    assert.equal((await fetch(`${base}/mcp/gamma`)).status, 404);
    assert.equal((await fetch(`${base}/mcp/%E0`)).status, 404, 'not percent-encoding: no such server, not a failure');
  });

  // proves: SERVE-AUTH
  it('serves each token its own sessions, and audits 401 and 403 without the token', async () => {
    const alice = await connect('alpha', 'a-token');
    const bob = await connect('beta', 'b-token');
    assert.equal(text(await alice.callTool({ name: 'whoami', arguments: {} })), 'alpha:alice');
    assert.equal(text(await bob.callTool({ name: 'whoami', arguments: {} })), 'beta:bob');
    await assert.rejects(connect('alpha', 'b-token'), /403|forbidden/i);
    await assert.rejects(connect('alpha', 'nope'), /401|unauthorized/i);
    assert.deepEqual(
      events.map((e) => e.type === 'auth.denied' && [e.server, e.status, e.caller]),
      [
        ['alpha', 403, 'bob'],
        ['alpha', 401, null],
      ],
    );
    assert.ok(!JSON.stringify(events).includes('b-token'));
    // Alice's token may use beta, but not ride on Bob's session of it.
    const sessionId = (bob.transport as StreamableHTTPClientTransport).sessionId as string;
    const hijack = await fetch(`${base}/mcp/beta`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        Authorization: 'Bearer a-token',
        'Mcp-Session-Id': sessionId,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' }),
    });
    assert.equal(hijack.status, 403);
    assert.deepEqual(events.at(-1), {
      type: 'auth.denied',
      session: null,
      server: 'beta',
      status: 403,
      reason: "another caller's session",
      caller: 'alice',
      remoteAddress: '127.0.0.1',
    });
    await (alice.transport as StreamableHTTPClientTransport).terminateSession();
    assert.ok(closed.includes('alpha:alice'), 'DELETE closed the session');
    await alice.close();
    await bob.close();
  });

  it("opens a session with the token's tags, and hands nothing of the credentials on", async () => {
    const reader = await connect('alpha', 'r-token');
    assert.equal(text(await reader.callTool({ name: 'credentials', arguments: {} })), 'none|read');
    assert.equal(text(await reader.callTool({ name: 'whoami', arguments: {} })), 'alpha:reader');
    await reader.close();
  });

  it('drains: a call in flight finishes, a new one and a new session get 503, then every session closes', async () => {
    const carol = await connect('beta', 'a-token');
    const slow = carol.callTool({ name: 'whoami', arguments: { wait: 500 } });
    await new Promise((r) => setTimeout(r, 100));
    const draining = http.drain(5_000);
    await assert.rejects(carol.callTool({ name: 'whoami', arguments: {} }), /503|stopping/i);
    await assert.rejects(connect('alpha', 'a-token'), /503|stopping/i);
    assert.equal(text(await slow), 'beta:alice');
    await draining;
    assert.ok(closed.includes('beta:alice') && closed.includes('beta:bob'), closed.join(', '));
    await carol.close();
  });
});

describe('sessions per caller', () => {
  // proves: SESSION-CAP
  it('refuses a caller more sessions than its limit (429) until one ends', async () => {
    const http = new McpHttpServer({
      servers: ['alpha'],
      maxSessionsPerCaller: 2,
      openSession: () => sdkClientSession(new McpServer({ name: 'alpha', version: '1' })),
      denials: { deny: () => undefined },
      ready: () => ({ ready: true, servers: { alpha: 'ready' } }),
      log: silentLogger,
    });
    const url = new URL(`http://127.0.0.1:${await http.listen(0, '127.0.0.1')}/mcp/alpha`);
    try {
      const open = async (): Promise<Client> => {
        const client = new Client({ name: 't', version: '1' });
        await client.connect(new StreamableHTTPClientTransport(url));
        return client;
      };
      const first = await open();
      await open();
      await assert.rejects(open(), /429|too many sessions/);
      assert.equal(http.sessions, 2);
      await (first.transport as StreamableHTTPClientTransport).terminateSession();
      await first.close();
      await open();
      assert.equal(http.sessions, 2);
    } finally {
      await http.drain(0);
    }
  });
});

describe('a client that sends part of a body and leaves', () => {
  // proves: DENIAL-BUDGET
  it('is the client’s affair: no log line per request (any client could cause them at will)', async () => {
    const lines: string[] = [];
    const http = new McpHttpServer({
      servers: ['alpha'],
      openSession: () => Promise.reject(new Error('no session is opened for a body that never arrived')),
      denials: { deny: () => undefined },
      ready: () => ({ ready: true, servers: { alpha: 'ready' } }),
      log: createLogger('debug', (line) => lines.push(line)),
    });
    const port = await http.listen(0, '127.0.0.1');
    try {
      for (let i = 0; i < 20; i++) {
        await new Promise<void>((resolve) => {
          const socket = connect(port, '127.0.0.1', () => {
            socket.write(
              `POST /mcp/alpha HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
                `Content-Length: 1000\r\n\r\n{"jsonrpc":`,
              () => setTimeout(() => socket.destroy(), 20),
            );
          });
          socket.on('close', () => resolve());
          socket.on('error', () => undefined);
        });
      }
      await new Promise((r) => setTimeout(r, 100));
      assert.deepEqual(
        lines.filter((line) => /error|aborted/i.test(line)),
        [],
      );
    } finally {
      await http.drain(0);
    }
  });
});
