import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { stringify } from 'yaml';
import { LABEL_SESSION } from '../../src/engine/sandbox-labels.js';
import { oauthSettingsFile, startTestIssuer, type TestIssuer } from '../support/oauth-issuer.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { ensureTestImages, LIAR_IMAGE } from './support/docker.js';
import { auditOf, hintboxCommand, outcomeOf } from './support/hintbox-process.js';
import { connect, containersOfServer, leave, serve, type Serving } from './support/serve-process.js';

/**
 * Who a caller of `hintbox serve --oauth` is: the pair (subject, client), kept apart, never one
 * string two callers can spell alike; and how many sessions — members of a `/mcp` session
 * included — one caller may hold.
 */

const SHARED = `liar-id-${process.pid}`;
/** Two servers whose clients each get a session (and a sandbox) of their own. */
const OWN_A = `liar-own-a-${process.pid}`;
const OWN_B = `liar-own-b-${process.pid}`;
const AUDIENCE = 'hintbox-identity-test';
const MAX_SESSIONS = 4;

function profilesFolder(): string {
  const folder = scratchFolder('hintbox-identity-profiles-');
  const liar = (name: string, clients: 'shared' | 'separate') => ({
    name,
    server: { image: LIAR_IMAGE },
    trust: 'trusted',
    split: false,
    clients,
    network: 'none',
    limits: { pids: 64, memory: '128m' },
    // Its unannotated tools ask; an unanswered confirmation is denied soon.
    approval: { timeout: 5 },
  });
  writeFileSync(path.join(folder, 'shared.yaml'), stringify(liar(SHARED, 'shared')));
  writeFileSync(path.join(folder, 'own-a.yaml'), stringify(liar(OWN_A, 'separate')));
  writeFileSync(path.join(folder, 'own-b.yaml'), stringify(liar(OWN_B, 'separate')));
  return folder;
}

/** A raw JSON-RPC POST, as a client that forges its `Mcp-Session-Id` would send it. */
function post(url: string, token: string, body: unknown, sessionId?: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      Authorization: `Bearer ${token}`,
      'Mcp-Protocol-Version': '2025-06-18',
      ...(sessionId ? { 'Mcp-Session-Id': sessionId } : {}),
    },
    body: JSON.stringify(body),
  });
}

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};
const CALL_IDENTITY = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'identity', arguments: {} } };

/** The `identity` calls of the shared server recorded so far. */
async function identityCalls(): Promise<{ tool: string; caller: string | null; client?: string | null }[]> {
  return (await auditOf<{ tool: string; caller: string | null; client?: string | null }>(SHARED, { all: true })).filter(
    (c) => c.tool === 'identity',
  );
}

/** The sessions that hold a sandbox of a server (its containers counted by their session label). */
async function sandboxSessions(pid: number | undefined, server: string): Promise<number> {
  const containers = await containersOfServer(pid, server);
  return new Set(containers.filter((c) => c.State === 'running').map((c) => c.Labels[LABEL_SESSION])).size;
}

integrationSuite(
  'serve: caller identity and the session cap',
  { timeout: 600_000, images: [ensureTestImages] },
  (suite) => {
    let serving: Serving;
    let issuer: TestIssuer;
    before(async () => {
      issuer = suite.use(await startTestIssuer());
      const oauth = oauthSettingsFile(issuer, {
        resource: 'http://127.0.0.1:8931',
        audience: [AUDIENCE],
        scopes: { 'mcp:all': {} },
      });
      serving = suite.use(
        await serve([profilesFolder(), '--oauth', oauth, '--one-endpoint', '--max-sessions', String(MAX_SESSIONS)]),
      );
    });

    const token = (claims: Record<string, unknown>) =>
      issuer.sign({ aud: AUDIENCE, scope: 'mcp:all', ...claims }, { expiresIn: '10m' });

    // proves: CALLER-IDENTITY
    it("a subject spelled as another caller's subject and client does not ride that caller's session", async () => {
      const url = `${serving.url}/mcp/${SHARED}`;
      const alice = await connect(url, await token({ sub: 'alice', client_id: 'ide' }));
      try {
        assert.ok((await alice.listTools()).tools.some((t) => t.name === 'identity'));
        const sessionId = (alice.transport as StreamableHTTPClientTransport).sessionId as string;
        const before = (await identityCalls()).length;
        const forged = await post(url, await token({ sub: 'alice (client ide)' }), CALL_IDENTITY, sessionId);
        await forged.body?.cancel();
        assert.equal(forged.status, 403, 'the look-alike subject is refused on her session');
        assert.equal((await identityCalls()).length, before, 'nothing was called');
        // Her own call is recorded with the subject and the client as two fields.
        await alice.callTool({ name: 'identity', arguments: {} });
        const [own] = (await identityCalls()).slice(-1);
        assert.deepEqual({ caller: own?.caller, client: own?.client }, { caller: 'alice', client: 'ide' });
      } finally {
        await leave(alice);
      }
    });

    // proves: CALLER-IDENTITY
    it('a client id too long to record is refused (401), never recorded as its subject alone', async () => {
      const url = `${serving.url}/mcp/${SHARED}`;
      const alice = await connect(url, await token({ sub: 'alice' }));
      try {
        await alice.listTools();
        const sessionId = (alice.transport as StreamableHTTPClientTransport).sessionId as string;
        const before = (await identityCalls()).length;
        const long = await token({ sub: 'alice', client_id: `https://client.example.com/${'x'.repeat(300)}` });
        const riding = await post(url, long, CALL_IDENTITY, sessionId);
        await riding.body?.cancel();
        assert.equal(riding.status, 401, 'the long client does not ride her session');
        const opening = await post(url, long, INITIALIZE);
        await opening.body?.cancel();
        assert.equal(opening.status, 401, 'nor opens one counted as hers');
        assert.equal((await identityCalls()).length, before, 'nothing was called');
        const { stdout } = await hintboxCommand(['audit', '--server', SHARED, '--events', '--all', '--json']);
        const denials = stdout
          .split('\n')
          .filter(
            (l) => l.includes('auth.denied') && l.includes("the token's client id is longer than 256 characters"),
          );
        assert.equal(denials.length, 2, stdout);
      } finally {
        await leave(alice);
      }
    });

    it('refuses a --max-sessions that is not a whole number from 1 (exit 2, nothing started)', async () => {
      for (const bad of ['0', '100001', '2.5', 'many']) {
        const { code, stderr } = await hintboxCommand(['serve', profilesFolder(), '--max-sessions', bad]);
        assert.equal(code, 2, stderr);
        assert.match(stderr, /^serve: --max-sessions must be a whole number from 1 to 100000 \(got "[^"]+"\)\n$/);
      }
    });

    // proves: SESSION-CAP
    it("a caller's sessions at /mcp count each of their member sessions against the cap", async () => {
      const bob = await token({ sub: 'bob' });
      const opened: Response[] = [];
      // Each /mcp session is a session of each of the three servers: two with a sandbox each.
      for (let i = 0; i < 3; i++) {
        const response = await post(`${serving.url}/mcp`, bob, INITIALIZE);
        await response.body?.cancel();
        opened.push(response);
      }
      const statuses = opened.map((r) => r.status);
      const sessions = [
        await sandboxSessions(serving.child.pid, OWN_A),
        await sandboxSessions(serving.child.pid, OWN_B),
      ];
      assert.deepEqual(
        statuses,
        [200, 429, 429],
        `statuses ${statuses.join(', ')}; sandbox sessions ${sessions.join(', ')}`,
      );
      assert.deepEqual(sessions, [1, 1], 'no sandbox beyond the cap');
      // What is left of the cap (4 - 3) still opens one session of one server.
      const one = await post(`${serving.url}/mcp/${OWN_A}`, bob, INITIALIZE);
      await one.body?.cancel();
      assert.equal(one.status, 200);
      const more = await post(`${serving.url}/mcp/${OWN_A}`, bob, INITIALIZE);
      await more.body?.cancel();
      assert.equal(more.status, 429);
      assert.equal(await sandboxSessions(serving.child.pid, OWN_A), 2);
    });

    it('with two calls of one server in flight at /mcp and no GET stream, each confirmation reaches the client on its call', async () => {
      // A client that never opens the GET stream: the server's messages can only ride a call's POST stream.
      const noStream: FetchLike = (url, init) =>
        init?.method === 'GET' ? Promise.resolve(new Response(null, { status: 405 })) : fetch(url, init);
      const client = await connect(`${serving.url}/mcp`, await token({ sub: 'carol' }), undefined, { fetch: noStream });
      try {
        const write = (file: string) =>
          client.callTool({ name: `${SHARED}__unannotated_write`, arguments: { path: `/tmp/${file}`, content: 'x' } });
        const results = await Promise.all([write('first'), write('second')]);
        assert.equal(client.asked, 2, 'both confirmations reached the client');
        assert.deepEqual(
          results.map((r) => outcomeOf(r)),
          [
            { ok: true, value: 'written' },
            { ok: true, value: 'written' },
          ],
        );
      } finally {
        await leave(client);
      }
    });
  },
);
