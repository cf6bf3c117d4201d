import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { BearerTokens, hashToken } from '../../src/serve/bearer-tokens.js';
import { McpHttpServer } from '../../src/serve/mcp-http-server.js';
import { silentLogger } from '../../src/util/logger.js';
import { sdkClientSession } from './support/sdk-client-session.js';

/** serve over one server whose `write_file` records each run; `open()`: a 2025 session of alice, initialized. */
async function serveOne() {
  const ran: string[] = [];
  let gateways = 0;
  const http = new McpHttpServer({
    servers: ['alpha'],
    auth: BearerTokens.parse(JSON.stringify([{ name: 'alice', sha256: hashToken('a-token') }]), 'tokens.json'),
    openSession: () => {
      gateways++;
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
  const base = `http://127.0.0.1:${await http.listen(0, '127.0.0.1')}/mcp/alpha`;
  const headers = {
    Authorization: 'Bearer a-token',
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
  };
  const open = async (): Promise<Record<string, string>> => {
    const initialize = {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    };
    const opened = await fetch(base, { method: 'POST', headers, body: JSON.stringify(initialize) });
    const session = opened.headers.get('mcp-session-id');
    assert.ok(session, 'a 2025 session');
    await opened.text();
    const on = { ...headers, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' };
    await fetch(base, {
      method: 'POST',
      headers: on,
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    }).then((r) => r.text());
    return on;
  };
  return { http, base, ran, open, gateways: () => gateways };
}

const CALL = {
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: {
    name: 'write_file',
    arguments: {},
    _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' },
  },
};

describe('serve: a 2026 request that carries an Mcp-Session-Id', () => {
  // proves: SERVE-STANDARD-HEADERS
  it('is refused (400, -32020) when its Mcp-Method says another method than its body, and nothing runs (attack)', async () => {
    // Before: the check ran only on the stateless path; the same request with an Mcp-Session-Id
    // of the caller's own 2025 session ran the write (200).
    const { http, base, ran, open } = await serveOne();
    try {
      const on = await open();
      const lied = await fetch(base, {
        method: 'POST',
        headers: { ...on, 'mcp-method': 'tools/list', 'mcp-name': 'read_file' },
        body: JSON.stringify(CALL),
      });
      const answer = (await lied.json()) as { error?: { code?: number } };
      assert.equal(lied.status, 400);
      assert.equal(answer.error?.code, -32020);
      assert.deepEqual(ran, [], 'the write never ran');
    } finally {
      await http.drain(0);
    }
  });

  // proves: SERVE-STATELESS-ERA
  it('is served statelessly, the id ignored: without the 2026 headers it is refused and nothing runs; with them it runs on the caller gateway, no id echoed (attack)', async () => {
    // Before: the id took it to the 2025 session, where its headers were checked only when
    // present: with the session's 2025-11-25 version header and no Mcp-Method, the write ran.
    const { http, base, ran, open, gateways } = await serveOne();
    try {
      const on = await open();
      const bare = await fetch(base, { method: 'POST', headers: on, body: JSON.stringify(CALL) });
      const refused = (await bare.json()) as { error?: { code?: number; message?: string } };
      assert.equal(bare.status, 400, JSON.stringify(refused));
      assert.equal(refused.error?.code, -32020);
      assert.deepEqual(ran, [], 'the write never ran');
      // Its own session's id, or one that does not exist, changes nothing: it is not read.
      for (const id of [on['mcp-session-id'], 'no-such-session']) {
        const honest = await fetch(base, {
          method: 'POST',
          headers: {
            ...on,
            'mcp-session-id': id!,
            'mcp-protocol-version': '2026-07-28',
            'mcp-method': 'tools/call',
            'mcp-name': 'write_file',
          },
          body: JSON.stringify(CALL),
        });
        assert.equal(honest.status, 200, await honest.text());
        assert.equal(honest.headers.get('mcp-session-id'), null, 'no session id echoed');
      }
      assert.deepEqual(ran, ['write_file', 'write_file']);
      assert.equal(gateways(), 2, "the session's gateway, and the caller's stateless one");
    } finally {
      await http.drain(0);
    }
  });
});

describe('serve: a 2025 session and the Mcp-Method / Mcp-Name headers it carries', () => {
  const CALL_2025 = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'write_file', arguments: {} } };

  // proves: SERVE-STANDARD-HEADERS
  it('refuses a batch holding a 2026 request, or carrying the headers, and runs nothing (attack)', async () => {
    // Before: a batch was never checked; the SDK transport split it and the write ran (200).
    const { http, base, ran, open } = await serveOne();
    try {
      const on = await open();
      for (const [headers, batch] of [
        [{ ...on, 'mcp-method': 'tools/list', 'mcp-name': 'read_file' }, [{ ...CALL, id: 7 }]],
        [on, [{ ...CALL, id: 8 }]],
        [{ ...on, 'mcp-method': 'tools/list' }, [CALL_2025]],
      ] as const) {
        const sent = await fetch(base, { method: 'POST', headers, body: JSON.stringify(batch) });
        const answer = (await sent.json()) as { error?: { code?: number } };
        assert.equal(sent.status, 400, JSON.stringify(answer));
        assert.equal(answer.error?.code, -32020);
      }
      assert.deepEqual(ran, [], 'the write never ran');
    } finally {
      await http.drain(0);
    }
  });

  // proves: SERVE-STANDARD-HEADERS
  it('refuses a 2025 request whose Mcp-Method or Mcp-Name says another request than its body, and runs nothing (attack)', async () => {
    // Before: only 2026 requests were checked; a 2025 write under `Mcp-Method: tools/list` ran.
    const { http, base, ran, open } = await serveOne();
    try {
      const on = await open();
      const lies: Record<string, string>[] = [
        { 'mcp-method': 'tools/list' },
        { 'mcp-method': 'tools/call', 'mcp-name': 'read_file' },
      ];
      for (const lie of lies) {
        const sent = await fetch(base, { method: 'POST', headers: { ...on, ...lie }, body: JSON.stringify(CALL_2025) });
        const answer = (await sent.json()) as { error?: { code?: number } };
        assert.equal(sent.status, 400, JSON.stringify(answer));
        assert.equal(answer.error?.code, -32020);
      }
      assert.deepEqual(ran, [], 'the write never ran');
      // The same request with true headers, or none, runs: a 2025 client need not send them.
      const honest = await fetch(base, {
        method: 'POST',
        headers: { ...on, 'mcp-method': 'tools/call', 'mcp-name': 'write_file' },
        body: JSON.stringify(CALL_2025),
      });
      assert.equal(honest.status, 200, await honest.text());
      assert.deepEqual(ran, ['write_file']);
    } finally {
      await http.drain(0);
    }
  });
});
