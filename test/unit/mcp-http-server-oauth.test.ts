import assert from 'node:assert/strict';
import { callerText } from '../../src/util/caller-identity.js';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SignJWT } from 'jose';
import type { AuditEvent } from '../../src/audit/audit-record.js';
import type { Access } from '../../src/serve/authenticator.js';
import { combinedAuthenticator } from '../../src/serve/combined-endpoint.js';
import { McpHttpServer, type ClientSession, type McpHttpServerOptions } from '../../src/serve/mcp-http-server.js';
import { parseOAuthConfig } from '../../src/serve/oauth-config.js';
import { OAuthResourceServer } from '../../src/serve/oauth-resource-server.js';
import { silentLogger } from '../../src/util/logger.js';
import { startTestIssuer, type TestIssuer } from '../support/oauth-issuer.js';
import { sdkClientSession } from './support/sdk-client-session.js';

/**
 * The HTTP endpoint of `hintbox serve --oauth` with fake sessions, against a stand-in
 * authorization server whose JWKS is fetched over HTTP as a real one's: the metadata, every
 * way a token is refused (each audited, none with its text), scopes to servers and tags.
 */
const RESOURCE = 'http://127.0.0.1:8931';

describe('the HTTP endpoint of hintbox serve with OAuth', () => {
  const events: AuditEvent[] = [];
  let issuer: TestIssuer;
  let http: McpHttpServer;
  let base: string;

  function fakeSession(server: string, access: Access | null): Promise<ClientSession> {
    const mcp = new McpServer({ name: server, version: '1' });
    mcp.registerTool('whoami', {}, (extra) => ({
      content: [
        {
          type: 'text',
          text: `${access ? callerText(access.caller) : '-'}|${access?.tags?.join(',') ?? 'all'}|${String(extra.requestInfo?.headers.authorization ?? 'none')}`,
        },
      ],
    }));
    return sdkClientSession(mcp);
  }

  before(async () => {
    issuer = await startTestIssuer();
    const config = configOf(issuer, {
      'mcp:alpha': { servers: ['alpha'] },
      'mcp:beta': { servers: ['beta'] },
      'mcp:beta-read': { servers: ['beta'], tags: ['read'] },
    });
    ({ http, base } = await listening({
      auth: new OAuthResourceServer({ config, servers: () => ['alpha', 'beta'] }),
      openSession: fakeSession,
      denials: { deny: (denied) => void (denied.event && events.push(denied.event)) },
    }));
  });
  after(async () => {
    await http.drain(0);
    await issuer.close();
  });

  const connect = async (server: string, token: string): Promise<Client> => {
    const client = new Client({ name: 't', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp/${server}`), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    return client;
  };
  const post = (server: string, headers: Record<string, string>) =>
    fetch(`${base}/mcp/${server}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
  const whoami = async (client: Client): Promise<string> =>
    ((await client.callTool({ name: 'whoami', arguments: {} })) as { content: { text: string }[] }).content[0]?.text ??
    '';
  const alphaToken = (claims: Record<string, unknown> = {}) =>
    issuer.sign({ aud: `${RESOURCE}/mcp/alpha`, scope: 'mcp:alpha', ...claims });

  it('serves protected resource metadata naming the issuer, per server and for the whole', async () => {
    const alpha = await fetch(`${base}/.well-known/oauth-protected-resource/mcp/alpha`);
    assert.equal(alpha.status, 200);
    const document = (await alpha.json()) as Record<string, unknown>;
    assert.equal(document.resource, `${RESOURCE}/mcp/alpha`);
    assert.deepEqual(document.authorization_servers, [issuer.issuer]);
    assert.deepEqual(document.scopes_supported, ['mcp:alpha']);
    assert.deepEqual(document.bearer_methods_supported, ['header']);
    const whole = (await (await fetch(`${base}/.well-known/oauth-protected-resource`)).json()) as Record<
      string,
      unknown
    >;
    assert.equal(whole.resource, RESOURCE);
    assert.deepEqual(whole.scopes_supported, ['mcp:alpha', 'mcp:beta', 'mcp:beta-read']);
    assert.equal((await fetch(`${base}/.well-known/oauth-protected-resource/mcp/gamma`)).status, 404);
  });

  // proves: SERVE-AUTH
  it('serves a valid token, names its subject (and client) as the caller, and hands the token on to nothing', async () => {
    const client = await connect('alpha', await alphaToken({ client_id: 'ide' }));
    assert.equal(await whoami(client), 'alice (client ide)|all|none');
    await client.close();
    // The resource's base URL is an audience too (one audience for the whole of serve).
    const wide = await connect('alpha', await alphaToken({ aud: RESOURCE }));
    assert.equal(await whoami(wide), 'alice|all|none');
    await wide.close();
    // Within the clock tolerance (30 s), a token just expired still passes.
    const late = await connect(
      'alpha',
      await issuer.sign({ aud: RESOURCE, scope: 'mcp:alpha' }, { expiresIn: now() - 10 }),
    );
    await late.close();
  });

  // proves: SERVE-AUTH
  it('answers 401 to every token it cannot trust, names the metadata, and audits each without its text', async () => {
    const hmac = await new SignJWT({
      iss: issuer.issuer,
      sub: 'alice',
      aud: `${RESOURCE}/mcp/alpha`,
      scope: 'mcp:alpha',
    })
      .setProtectedHeader({ alg: 'HS256', kid: 'test-key' })
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode('a shared secret that is long enough'));
    const cases: [string, string | undefined, string][] = [
      ['none', undefined, 'no token'],
      ['basic', 'Basic YWxpY2U6cHc=', 'not a bearer token'],
      ['garbage', 'Bearer not.a.jwt', 'not a well-formed signed JWT'],
      [
        'issuer',
        `Bearer ${await alphaToken({ iss: 'https://evil.example.com' })}`,
        'the token was issued by another issuer',
      ],
      [
        'audience',
        `Bearer ${await alphaToken({ aud: `${RESOURCE}/mcp/beta` })}`,
        'the token was issued for another audience',
      ],
      [
        'expired',
        `Bearer ${await issuer.sign({ aud: RESOURCE }, { expiresIn: now() - 120 })}`,
        'the token has expired',
      ],
      ['not yet', `Bearer ${await alphaToken({ nbf: now() + 600 })}`, 'the token is not valid yet'],
      [
        'stranger',
        `Bearer ${await issuer.sign({ aud: RESOURCE }, { key: 'stranger' })}`,
        'the token has a bad signature',
      ],
      [
        'alg none',
        `Bearer ${issuer.unsigned({ aud: RESOURCE, scope: 'mcp:alpha' })}`,
        'the token is signed with an algorithm not accepted',
      ],
      ['hmac', `Bearer ${hmac}`, 'the token is signed with an algorithm not accepted'],
      ['no subject', `Bearer ${await alphaToken({ sub: undefined })}`, 'the token names no subject'],
    ];
    const before = events.length;
    for (const [label, authorization, reason] of cases) {
      const res = await post('alpha', authorization ? { Authorization: authorization } : {});
      assert.equal(res.status, 401, label);
      const challenge = res.headers.get('www-authenticate') ?? '';
      assert.match(
        challenge,
        /^Bearer resource_metadata="http:\/\/127\.0\.0\.1:8931\/\.well-known\/oauth-protected-resource\/mcp\/alpha"/,
        label,
      );
      assert.match(challenge, /scope="mcp:alpha"/, label);
      if (authorization?.startsWith('Bearer')) assert.match(challenge, /error="invalid_token"/, label);
      else assert.doesNotMatch(challenge, /error=/, label);
      assert.deepEqual(
        events.at(-1),
        {
          type: 'auth.denied',
          session: null,
          server: 'alpha',
          status: 401,
          reason,
          caller: null,
          remoteAddress: '127.0.0.1',
        },
        label,
      );
    }
    assert.equal(events.length - before, cases.length);
    const recorded = JSON.stringify(events);
    for (const [, authorization] of cases) {
      const token = authorization?.split(' ')[1];
      if (token && token.length > 20)
        assert.ok(!recorded.includes(token) && !recorded.includes(token.split('.')[1] as string));
    }
  });

  // proves: SERVE-AUTH
  it('answers 401 to a token issued in the future (iat beyond the clock tolerance), and serves one within it', async () => {
    const tenYears = 10 * 365 * 86_400;
    const cases: [string, number, number][] = [
      ['ten years ahead', now() + tenYears, 401],
      ['an hour ahead', now() + 3600, 401],
      ['past the tolerance (30 s)', now() + 90, 401],
      // Let in: the request (a ping without a session) then gets the endpoint's 400, not a 401.
      ['within the tolerance', now() + 10, 400],
      ['now', now(), 400],
    ];
    for (const [label, iat, status] of cases) {
      const token = await issuer.sign(
        { aud: `${RESOURCE}/mcp/alpha`, scope: 'mcp:alpha' },
        { issuedAt: iat, expiresIn: iat + tenYears },
      );
      const before = events.length;
      const res = await post('alpha', { Authorization: `Bearer ${token}` });
      assert.equal(res.status, status, label);
      if (status === 401) {
        assert.match(res.headers.get('www-authenticate') ?? '', /error="invalid_token"/, label);
        const denied = events.at(-1);
        assert.deepEqual(denied?.type === 'auth.denied' && [denied.status, denied.reason], [
          401,
          'the token was issued in the future',
        ]);
      } else assert.equal(events.length, before, label);
    }
  });

  // proves: SERVE-AUTH
  it('answers 403 insufficient_scope to a token whose scopes do not give the server, naming the caller', async () => {
    const res = await post('alpha', { Authorization: `Bearer ${await alphaToken({ scope: 'mcp:beta other' })}` });
    assert.equal(res.status, 403);
    const challenge = res.headers.get('www-authenticate') ?? '';
    assert.match(challenge, /error="insufficient_scope"/);
    assert.match(challenge, /scope="mcp:alpha"/);
    assert.match(challenge, /resource_metadata="[^"]+\/mcp\/alpha"/);
    assert.deepEqual(events.at(-1), {
      type: 'auth.denied',
      session: null,
      server: 'alpha',
      status: 403,
      reason: 'no scope of the token gives alpha',
      caller: 'alice',
      remoteAddress: '127.0.0.1',
    });
  });

  // proves: SERVE-TAGS
  it("limits a session to its scopes' tags, and a token allowing fewer tags may not ride on a wider session", async () => {
    const betaToken = (scope: string) => issuer.sign({ aud: `${RESOURCE}/mcp/beta`, scope });
    const reader = await connect('beta', await betaToken('mcp:beta-read'));
    assert.equal(await whoami(reader), 'alice|read|none');
    await reader.close();
    const full = await connect('beta', await betaToken('mcp:beta mcp:beta-read'));
    assert.equal(await whoami(full), 'alice|all|none');
    const narrower = await post('beta', {
      Authorization: `Bearer ${await betaToken('mcp:beta-read')}`,
      'Mcp-Session-Id': (full.transport as StreamableHTTPClientTransport).sessionId as string,
    });
    assert.equal(narrower.status, 403);
    assert.match(narrower.headers.get('www-authenticate') ?? '', /error="insufficient_scope"/);
    const denied = events.at(-1);
    assert.deepEqual(denied?.type === 'auth.denied' && [denied.caller, denied.reason], [
      'alice',
      'the token no longer allows the tags its session was opened with',
    ]);
    await full.close();
  });

  it('fetches the JWKS once and keeps it', () => {
    assert.equal(issuer.fetches(), 1);
  });
});

describe('the OAuth resource server when the issuer cannot be reached', () => {
  it('refuses every token (401, fail closed) and says why', async () => {
    const issuer = await startTestIssuer();
    const token = await issuer.sign({ aud: RESOURCE, scope: 's' });
    await issuer.close();
    const config = parseOAuthConfig(
      JSON.stringify({ issuer: issuer.issuer, jwksUri: issuer.jwksUri, resource: RESOURCE, scopes: { s: {} } }),
      'oauth.json',
    );
    const oauth = new OAuthResourceServer({ config, servers: () => ['alpha'] });
    assert.deepEqual(await oauth.authenticate({ authorization: `Bearer ${token}` }, 'alpha'), {
      allowed: false,
      status: 401,
      reason: "the issuer's keys could not be fetched (fetch failed)",
      caller: null,
      error: 'invalid_token',
    });
  });
});

/** The OAuth settings of the test issuer for RESOURCE, with these scopes. */
function configOf(issuer: TestIssuer, scopes: Record<string, unknown>) {
  return parseOAuthConfig(
    JSON.stringify({ issuer: issuer.issuer, jwksUri: issuer.jwksUri, resource: RESOURCE, scopes }),
    'oauth.json',
  );
}

/** serve's endpoint for the servers alpha and beta (both ready) on a free port of 127.0.0.1. */
async function listening(
  options: Pick<McpHttpServerOptions, 'auth' | 'openSession' | 'denials' | 'combined'>,
): Promise<{ http: McpHttpServer; base: string }> {
  const http = new McpHttpServer({
    servers: ['alpha', 'beta'],
    ...options,
    ready: () => ({ ready: true, servers: { alpha: 'ready', beta: 'ready' } }),
    log: silentLogger,
  });
  return { http, base: `http://127.0.0.1:${await http.listen(0, '127.0.0.1')}` };
}

function now(): number {
  return Math.floor(Date.now() / 1000);
}

describe('the combined endpoint (/mcp) of hintbox serve --oauth', () => {
  let issuer: TestIssuer;
  let http: McpHttpServer;
  let base: string;
  before(async () => {
    issuer = await startTestIssuer();
    const config = configOf(issuer, { 'mcp:alpha': { servers: ['alpha'] }, 'mcp:beta': { servers: ['beta'] } });
    const servers = () => ['alpha', 'beta'];
    ({ http, base } = await listening({
      combined: true,
      auth: combinedAuthenticator(new OAuthResourceServer({ config, servers, combined: true }), servers),
      openSession: (_server, access) => {
        const mcp = new McpServer({ name: 'combined', version: '1' });
        mcp.registerTool('servers', {}, () => ({
          content: [{ type: 'text', text: [...(access?.servers?.keys() ?? [])].join(',') }],
        }));
        return sdkClientSession(mcp);
      },
      denials: { deny: () => undefined },
    }));
  });
  after(async () => {
    await http.drain(0);
    await issuer.close();
  });

  it("names /mcp's own metadata in its 401, and takes a token issued for /mcp there only", async () => {
    const ping = (path: string, token?: string) =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          ...(token ? { Authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      });
    const refused = await ping('/mcp');
    assert.equal(refused.status, 401);
    assert.equal(
      refused.headers.get('www-authenticate'),
      `Bearer resource_metadata="${RESOURCE}/.well-known/oauth-protected-resource/mcp", scope="mcp:alpha mcp:beta"`,
    );
    const document = (await (await fetch(`${base}/.well-known/oauth-protected-resource/mcp`)).json()) as Record<
      string,
      unknown
    >;
    assert.equal(document.resource, `${RESOURCE}/mcp`);
    assert.deepEqual(document.scopes_supported, ['mcp:alpha', 'mcp:beta']);
    assert.deepEqual(document.authorization_servers, [issuer.issuer]);

    // A token for /mcp (the resource its metadata names) is served there, for the servers its scopes give.
    const forCombined = await issuer.sign({ aud: `${RESOURCE}/mcp`, scope: 'mcp:alpha' });
    const client = new Client({ name: 't', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${forCombined}` } },
      }),
    );
    const servers = (await client.callTool({ name: 'servers', arguments: {} })) as { content: { text: string }[] };
    assert.equal(servers.content[0]?.text, 'alpha');
    await client.close();
    // Not at a server's own path: it was not issued for that resource.
    const own = await ping('/mcp/alpha', forCombined);
    assert.equal(own.status, 401);
    assert.match(own.headers.get('www-authenticate') ?? '', /issued for another audience/);
  });
});
