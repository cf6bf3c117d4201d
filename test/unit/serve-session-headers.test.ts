import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { BearerTokens, hashToken } from '../../src/serve/bearer-tokens.js';
import { McpHttpServer } from '../../src/serve/mcp-http-server.js';
import { silentLogger } from '../../src/util/logger.js';
import { sdkClientSession } from './support/sdk-client-session.js';

describe('serve: a 2026 request on a 2025 session', () => {
  // proves: SERVE-STANDARD-HEADERS
  it('is refused (400, -32020) when its Mcp-Method says another method than its body, and nothing runs (attack)', async () => {
    // Before: the check ran only on the stateless path; the same request with an Mcp-Session-Id
    // of the caller's own 2025 session ran the write (200).
    const ran: string[] = [];
    const http = new McpHttpServer({
      servers: ['alpha'],
      auth: BearerTokens.parse(JSON.stringify([{ name: 'alice', sha256: hashToken('a-token') }]), 'tokens.json'),
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
    const base = `http://127.0.0.1:${await http.listen(0, '127.0.0.1')}/mcp/alpha`;
    const headers = {
      Authorization: 'Bearer a-token',
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
    };
    try {
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
      const call = {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'write_file',
          arguments: {},
          _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' },
        },
      };
      const lied = await fetch(base, {
        method: 'POST',
        headers: { ...on, 'mcp-method': 'tools/list', 'mcp-name': 'read_file' },
        body: JSON.stringify(call),
      });
      const answer = (await lied.json()) as { error?: { code?: number } };
      assert.equal(lied.status, 400);
      assert.equal(answer.error?.code, -32020);
      assert.deepEqual(ran, [], 'the write never ran');
    } finally {
      await http.drain(0);
    }
  });
});
