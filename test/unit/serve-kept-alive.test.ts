import assert from 'node:assert/strict';
import http from 'node:http';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { BearerTokens, hashToken } from '../../src/serve/bearer-tokens.js';
import { MAX_BODY_BYTES } from '../../src/serve/http-messages.js';
import { McpHttpServer } from '../../src/serve/mcp-http-server.js';
import { silentLogger } from '../../src/util/logger.js';
import { sdkClientSession } from './support/sdk-client-session.js';

/**
 * serve's checks on a connection the client keeps alive: a call answered as plain JSON (the fast
 * path) leaves nothing behind that a later request of the same connection could ride on. Each
 * request is checked as a first one would be: its token, its Origin and Host, whose session it
 * names, its Mcp-Method. `write_file` records each run, so "refused" is also "did not run".
 */
async function serveAlpha() {
  const ran: string[] = [];
  const server = new McpHttpServer({
    servers: ['alpha'],
    auth: BearerTokens.parse(
      JSON.stringify([
        { name: 'alice', sha256: hashToken('a-token') },
        { name: 'mallory', sha256: hashToken('m-token') },
      ]),
      'tokens.json',
    ),
    openSession: () => {
      const mcp = new McpServer({ name: 'alpha', version: '1' });
      mcp.registerTool('write_file', {}, () => {
        ran.push('write_file');
        return { content: [{ type: 'text', text: 'written' }] };
      });
      return sdkClientSession(mcp);
    },
    denials: { deny: () => undefined },
    ready: () => ({ ready: true, servers: { alpha: 'ready' } }),
    log: silentLogger,
  });
  const port = await server.listen(0, '127.0.0.1');
  return { server, port, ran };
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The client's end of the connection it came on. */
  localPort: number | undefined;
}

/** POSTs `body` to /mcp/alpha through `agent` (one kept-alive connection). */
function post(agent: http.Agent, port: number, headers: Record<string, string>, body: unknown): Promise<Answer> {
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        agent,
        host: '127.0.0.1',
        port,
        path: '/mcp/alpha',
        method: 'POST',
        headers: {
          Host: `127.0.0.1:${port}`,
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          'Content-Length': String(Buffer.byteLength(data)),
          ...headers,
        },
      },
      (res) => {
        let text = '';
        // Read as it begins: a connection the answer closes is gone from it at its end.
        const localPort = res.socket?.localPort;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, localPort }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const callOf = (id: number, meta?: Record<string, unknown>) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name: 'write_file', arguments: {}, ...(meta ? { _meta: meta } : {}) },
});

describe('serve: every request of a kept-alive connection is checked', () => {
  // proves: SERVE-AUTH
  it('refuses, on the connection a JSON answer kept open, a request without a token, of another caller, with a lying Mcp-Method, of another site or Host; nothing runs (attack)', async () => {
    const { server, port, ran } = await serveAlpha();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const alice = { Authorization: 'Bearer a-token' };
      const init = await post(agent, port, alice, {
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
      });
      const session = init.headers['mcp-session-id'] as string;
      assert.ok(session, 'a 2025 session');
      const on = { ...alice, 'Mcp-Session-Id': session, 'MCP-Protocol-Version': '2025-11-25' };
      await post(agent, port, on, { jsonrpc: '2.0', method: 'notifications/initialized' });

      // The fast path: one JSON body, with its length (no chunked framing).
      const first = await post(agent, port, on, callOf(1));
      assert.equal(first.status, 200);
      assert.equal(first.headers['content-type'], 'application/json');
      assert.equal(first.headers['content-length'], String(Buffer.byteLength(first.body)));
      assert.equal(first.headers['transfer-encoding'], undefined);
      assert.match(first.body, /written/);
      assert.deepEqual(ran, ['write_file']);

      const noToken: Record<string, string> = { ...on };
      delete noToken.Authorization;
      const refused = [
        ['no token', await post(agent, port, noToken, callOf(2)), 401],
        [
          "another caller's token on alice's session",
          await post(agent, port, { ...on, Authorization: 'Bearer m-token' }, callOf(3)),
          403,
        ],
        [
          'a 2025 call under Mcp-Method: tools/list',
          await post(agent, port, { ...on, 'Mcp-Method': 'tools/list' }, callOf(5)),
          400,
        ],
        [
          'a 2026 call under Mcp-Method: tools/list',
          await post(
            agent,
            port,
            { ...alice, 'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/list', 'Mcp-Name': 'write_file' },
            callOf(6, { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' }),
          ),
          400,
        ],
      ] as const;
      for (const [what, answer, status] of refused) assert.equal(answer.status, status, what);
      assert.deepEqual(ran, ['write_file'], 'none of them ran');
      // All on the one connection the first call's JSON answer left open.
      const ports = new Set([first, ...refused.map(([, answer]) => answer)].map((a) => a.localPort));
      assert.equal(ports.size, 1, 'one kept-alive connection');

      // Then a request naming another Host (DNS rebinding: 421), a page of another site (403) and
      // a browser's cross-site request (403), each on a connection whose earlier requests were
      // admitted (serve keeps the last admitted Host, Origin and Sec-Fetch-Site per connection):
      // each decided again, refused, and its connection closed.
      const hostile = [
        [{ Host: 'evil.example' }, 421],
        [{ Origin: 'http://evil.example' }, 403],
        [{ 'Sec-Fetch-Site': 'cross-site' }, 403],
      ] as const;
      for (const [i, [headers, status]] of hostile.entries()) {
        const admitted = await post(agent, port, on, callOf(10 + i));
        assert.equal(admitted.status, 200);
        const answer = await post(agent, port, { ...on, ...headers }, callOf(20 + i));
        assert.equal(answer.localPort, admitted.localPort, 'on the connection of an admitted request');
        assert.deepEqual([answer.status, answer.headers.connection], [status, 'close'], JSON.stringify(headers));
      }
      assert.deepEqual(ran, ['write_file', 'write_file', 'write_file', 'write_file'], 'only the admitted calls ran');
      // The session itself still serves its caller.
      assert.equal((await post(agent, port, on, callOf(8))).status, 200);
      assert.equal(ran.length, 5);
    } finally {
      agent.destroy();
      await server.drain(0);
    }
  });

  it('refuses a body over the limit (413), one cut short and a target that is no URL, and runs nothing', async () => {
    const { server, port, ran } = await serveAlpha();
    try {
      const raw = (head: string, body: string | Buffer, end: boolean): Promise<string> =>
        new Promise((resolve) => {
          const socket = connect(port, '127.0.0.1');
          let text = '';
          socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
          socket.on('error', () => undefined);
          socket.on('close', () => resolve(text));
          socket.write(head);
          socket.write(body);
          if (end) socket.end();
          else setTimeout(() => socket.destroy(), 200);
        });
      const head = (length: number) =>
        `POST /mcp/alpha HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer a-token\r\n` +
        `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${length}\r\n\r\n`;
      const huge = Buffer.alloc(MAX_BODY_BYTES + 1024, 0x20);
      const tooLarge = await raw(head(huge.length), huge, true);
      assert.match(tooLarge, /^HTTP\/1\.1 413/);
      // Half a body, then the client goes: nothing runs, serve stays up.
      await raw(head(200), JSON.stringify(callOf(1)).slice(0, 30), false);
      const notJson = await raw(head(5), 'nope!', false);
      assert.match(notJson, /^HTTP\/1\.1 400/);
      // A request target that is no URL: 400, parsed once (src/serve/mcp-http-server.ts, parsedTarget).
      const noUrl = await raw(
        `GET http://[ HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`,
        '',
        true,
      );
      assert.match(noUrl, /^HTTP\/1\.1 400[^]*bad request target/);
      assert.deepEqual(ran, []);
      assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
    } finally {
      await server.drain(0);
    }
  });
});
