import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { stringify } from 'yaml';
import { hashToken } from '../../src/serve/bearer-tokens.js';
import { startTestIssuer, type TestIssuer } from '../support/oauth-issuer.js';
import { scratchFolder } from '../support/scratch-folder.js';
import {
  assertNoLeftovers,
  containersOf,
  ensureEverythingImage,
  ensureTestImages,
  eventually,
  EVERYTHING_IMAGE,
  LIAR_IMAGE,
} from './support/docker.js';
import {
  auditOf,
  HINTBOX_BIN,
  hintboxCommand,
  outcomeOf,
  sandboxFolder,
  STATE_DIR,
} from './support/hintbox-process.js';

const LIAR = `liar-serve-${process.pid}`;
const EVERYTHING = `every-serve-${process.pid}`;

/** A folder with the two profiles: the liar (a host folder mounted at /data) and the everything server. */
function profilesFolder(workspace: string, extra: Record<string, string> = {}): string {
  const folder = scratchFolder('hintbox-serve-profiles-');
  const liar = {
    name: LIAR,
    server: { image: LIAR_IMAGE },
    trust: 'trusted',
    mounts: [{ source: workspace, target: '/data' }],
    network: 'none',
    limits: { pids: 64, memory: '128m' },
    tools: { identity: { tags: ['probe'] } },
  };
  const everything = {
    name: EVERYTHING,
    server: { image: EVERYTHING_IMAGE, args: ['stdio'] },
    trust: 'trusted',
    split: false,
    network: 'none',
    limits: { pids: 128, memory: '256m' },
    tools: { echo: { tags: ['greet'] } },
  };
  writeFileSync(path.join(folder, 'liar.yaml'), stringify(liar));
  writeFileSync(path.join(folder, 'everything.yaml'), stringify(everything));
  for (const [file, text] of Object.entries(extra)) writeFileSync(path.join(folder, file), text);
  return folder;
}

interface Serving {
  child: ChildProcess;
  url: string;
  stderr(): string;
  exited: Promise<number | null>;
}

/** `hintbox serve` on a free port; resolves once it listens and /readyz says ready. */
async function serve(args: string[]): Promise<Serving> {
  const child = spawn(HINTBOX_BIN, ['serve', ...args, '--port', '0'], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/root',
      HINTBOX_STATE_DIR: STATE_DIR,
      ...(process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {}),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
    if (process.env.HINTBOX_TEST_VERBOSE) process.stderr.write(chunk);
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let url = '';
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`serve exited ${child.exitCode}: ${stderr}`);
      url = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr)?.[1] ?? '';
      return url !== '' && (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200;
    },
    120_000,
    'serve to be ready',
  );
  return { child, url, stderr: () => stderr, exited };
}

async function stop(serving: Serving | undefined): Promise<void> {
  if (!serving || serving.child.exitCode !== null) return;
  serving.child.kill('SIGTERM');
  await serving.exited;
}

/** A real SDK client over streamable HTTP that approves every confirmation. */
async function connect(url: string, token?: string): Promise<Client & { asked: number }> {
  const client = Object.assign(
    new Client({ name: 'serve-test', version: '1.0.0' }, { capabilities: { elicitation: {} } }),
    {
      asked: 0,
    },
  );
  client.setRequestHandler(ElicitRequestSchema, () => {
    client.asked++;
    return { action: 'accept', content: { approve: true } };
  });
  const headers = token ? { Authorization: `Bearer ${token}` } : undefined;
  await client.connect(new StreamableHTTPClientTransport(new URL(url), headers ? { requestInit: { headers } } : {}));
  return client;
}

const textOf = (result: unknown): string => (result as { content: { text?: string }[] }).content[0]?.text ?? '';

describe('hintbox serve', { timeout: 300_000 }, () => {
  before(async () => {
    await ensureTestImages();
    await ensureEverythingImage();
  });
  after(assertNoLeftovers);

  it('refuses to listen beyond loopback without tokens, and a folder with a bad profile (exit 2)', async () => {
    const folder = profilesFolder(sandboxFolder());
    const wide = await hintboxCommand(['serve', folder, '--host', '0.0.0.0']);
    assert.equal(wide.code, 2, wide.stderr);
    assert.match(wide.stderr, /^serve: --host 0\.0\.0\.0 .*--tokens or --oauth too\n$/);
    const oauth = path.join(scratchFolder('hintbox-serve-oauth-'), 'oauth.yaml');
    writeFileSync(oauth, 'issuer: http://auth.example.com\njwksUri: https://auth.example.com/jwks\nscopes: {}\n');
    const both = await hintboxCommand(['serve', folder, '--tokens', oauth, '--oauth', oauth]);
    assert.equal(both.code, 2, both.stderr);
    assert.match(both.stderr, /^serve: give --tokens or --oauth, not both\n$/);
    const badOauth = await hintboxCommand(['serve', folder, '--oauth', oauth]);
    assert.equal(badOauth.code, 2, badOauth.stderr);
    assert.deepEqual(badOauth.stderr.trimEnd().split('\n'), [
      `${oauth}: issuer: expected an https URL (http only on a loopback address)`,
      `${oauth}: resource: Invalid input: expected string, received undefined`,
      `${oauth}: scopes: expected at least one scope`,
    ]);
    const bad = profilesFolder(sandboxFolder(), { 'broken.yaml': 'name: Broken Name\nserver: {}\n' });
    const refused = await hintboxCommand(['serve', bad]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /broken\.yaml: name: /);
  });

  describe('without tokens', () => {
    let serving: Serving;
    let workspace: string;
    before(async () => {
      workspace = sandboxFolder();
      serving = await serve([profilesFolder(workspace)]);
    });
    after(() => stop(serving));

    it('serves both servers at their paths; a confirmed write lands in the host folder; DELETE removes the sandboxes', async () => {
      const liar = await connect(`${serving.url}/mcp/${LIAR}`);
      const everything = await connect(`${serving.url}/mcp/${EVERYTHING}`);
      const liarTools = (await liar.listTools()).tools.map((t) => t.name);
      const everythingTools = (await everything.listTools()).tools.map((t) => t.name);
      assert.ok(liarTools.includes('unannotated_write'), liarTools.join(', '));
      assert.ok(everythingTools.includes('echo') && !everythingTools.includes('unannotated_write'));
      assert.equal(textOf(await everything.callTool({ name: 'echo', arguments: { message: 'hi' } })), 'Echo: hi');
      const wrote = outcomeOf(
        await liar.callTool({ name: 'unannotated_write', arguments: { path: '/data/out.txt', content: 'over http' } }),
      );
      assert.deepEqual(wrote, { ok: true, value: 'written' });
      assert.equal(readFileSync(path.join(workspace, 'out.txt'), 'utf8'), 'over http');
      assert.ok(liar.asked >= 1, 'the write was confirmed through the client');
      const [intent] = await auditOf<{ tool: string; caller: string | null }>(LIAR);
      assert.deepEqual({ tool: intent?.tool, caller: intent?.caller }, { tool: 'unannotated_write', caller: null });

      const pid = serving.child.pid;
      assert.ok((await containersOf(pid)).length > 0);
      for (const client of [liar, everything]) {
        await (client.transport as StreamableHTTPClientTransport).terminateSession();
        await client.close();
      }
      await eventually(async () => (await containersOf(pid)).length === 0, 20_000, 'no sandboxes after DELETE');
    });

    it('gives 4 clients at once exactly their own answers', async () => {
      const clients = await Promise.all([0, 1, 2, 3].map(() => connect(`${serving.url}/mcp/${EVERYTHING}`)));
      try {
        const answers = await Promise.all(
          clients.map(async (client, c) => {
            const got: string[] = [];
            for (let i = 0; i < 5; i++) {
              got.push(textOf(await client.callTool({ name: 'echo', arguments: { message: `c${c}-${i}` } })));
            }
            return got;
          }),
        );
        answers.forEach((got, c) =>
          assert.deepEqual(
            got,
            [0, 1, 2, 3, 4].map((i) => `Echo: c${c}-${i}`),
          ),
        );
      } finally {
        for (const client of clients) {
          await (client.transport as StreamableHTTPClientTransport).terminateSession().catch(() => undefined);
          await client.close();
        }
      }
    });
  });

  describe('with tokens', () => {
    let serving: Serving;
    const ALICE = `alice-${process.pid}-token`;
    const BOT = `bot-${process.pid}-token`;
    const PROBE = `probe-${process.pid}-token`;
    let workspace: string;
    before(async () => {
      workspace = sandboxFolder();
      const tokens = path.join(scratchFolder('hintbox-serve-tokens-'), 'tokens.yaml');
      writeFileSync(
        tokens,
        stringify([
          { name: 'alice', sha256: hashToken(ALICE) },
          { name: 'ci-bot', sha256: hashToken(BOT), servers: [LIAR] },
          { name: 'prober', sha256: hashToken(PROBE), servers: [LIAR], tags: ['probe'] },
        ]),
      );
      serving = await serve([profilesFolder(workspace), '--tokens', tokens]);
    });
    after(() => stop(serving));

    it('answers 401 to no or a wrong token, 403 to a token of other servers, and audits each denial', async () => {
      const url = `${serving.url}/mcp/${EVERYTHING}`;
      const post = (headers: Record<string, string>) =>
        fetch(url, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
        });
      const none = await post({});
      assert.equal(none.status, 401);
      assert.match(none.headers.get('www-authenticate') ?? '', /^Bearer/);
      assert.equal((await post({ Authorization: `Bearer ${ALICE}-wrong` })).status, 401);
      assert.equal((await post({ Authorization: `Bearer ${BOT}` })).status, 403);
      const denials = (await hintboxCommand(['audit', '--server', EVERYTHING, '--events', '--json'])).stdout
        .split('\n')
        .filter((l) => l.includes('auth.denied'))
        .map((l) => JSON.parse(l) as { fields?: Record<string, unknown> } & Record<string, unknown>);
      assert.equal(denials.length, 3, JSON.stringify(denials));
      assert.ok(!JSON.stringify(denials).includes(BOT) && !JSON.stringify(denials).includes(ALICE), 'no token text');
      assert.match(JSON.stringify(denials), /"caller":"ci-bot"/);
    });

    it("serves the right token and records its name as every call's caller", async () => {
      const client = await connect(`${serving.url}/mcp/${EVERYTHING}`, ALICE);
      try {
        assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: 'me' } })), 'Echo: me');
      } finally {
        await (client.transport as StreamableHTTPClientTransport).terminateSession();
        await client.close();
      }
      const [intent] = await auditOf<{ tool: string; caller: string | null }>(EVERYTHING);
      assert.deepEqual({ tool: intent?.tool, caller: intent?.caller }, { tool: 'echo', caller: 'alice' });
    });

    it("serves a token with tags only its tags' tools: another is refused as unknown, and nothing reaches the server", async () => {
      const client = await connect(`${serving.url}/mcp/${LIAR}`, PROBE);
      try {
        assert.deepEqual(
          (await client.listTools()).tools.map((t) => t.name),
          ['identity'],
        );
        assert.equal(outcomeOf(await client.callTool({ name: 'identity', arguments: {} })).ok, true);
        await assert.rejects(
          client.callTool({ name: 'unannotated_write', arguments: { path: '/data/probe.txt', content: 'no' } }),
          /Unknown tool: unannotated_write/,
        );
        assert.equal(client.asked, 0, 'nothing was asked of the client');
      } finally {
        await (client.transport as StreamableHTTPClientTransport).terminateSession();
        await client.close();
      }
      assert.equal(existsSync(path.join(workspace, 'probe.txt')), false, 'the write never ran');
      const calls = await auditOf<{ tool: string; caller: string | null }>(LIAR);
      assert.deepEqual(
        calls.filter((c) => c.caller === 'prober').map((c) => [c.tool, c.caller]),
        [['identity', 'prober']],
      );
    });
  });

  describe('with OAuth', () => {
    let serving: Serving;
    let issuer: TestIssuer;
    const RESOURCE = 'http://127.0.0.1:8931';
    before(async () => {
      issuer = await startTestIssuer();
      const oauth = path.join(scratchFolder('hintbox-serve-oauth-'), 'oauth.yaml');
      writeFileSync(
        oauth,
        stringify({
          issuer: issuer.issuer,
          jwksUri: issuer.jwksUri,
          resource: RESOURCE,
          scopes: { 'mcp:greet': { servers: [EVERYTHING], tags: ['greet'] }, 'mcp:liar': { servers: [LIAR] } },
        }),
      );
      serving = await serve([profilesFolder(sandboxFolder()), '--oauth', oauth]);
    });
    after(async () => {
      await stop(serving);
      await issuer.close();
    });

    it('serves the metadata, a valid token (its subject the caller, its scope its tools), and refuses the others', async () => {
      const url = `${serving.url}/mcp/${EVERYTHING}`;
      const metadata = (await (
        await fetch(`${serving.url}/.well-known/oauth-protected-resource/mcp/${EVERYTHING}`)
      ).json()) as Record<string, unknown>;
      assert.deepEqual(
        { resource: metadata.resource, authorization_servers: metadata.authorization_servers },
        { resource: `${RESOURCE}/mcp/${EVERYTHING}`, authorization_servers: [issuer.issuer] },
      );
      const audience = `${RESOURCE}/mcp/${EVERYTHING}`;
      const post = (token: string) =>
        fetch(url, {
          method: 'POST',
          headers: {
            'Content-Type': 'application/json',
            Accept: 'application/json, text/event-stream',
            Authorization: `Bearer ${token}`,
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
        });
      const expired = await post(await issuer.sign({ aud: audience, scope: 'mcp:greet' }, { expiresIn: 1 }));
      assert.equal(expired.status, 401);
      assert.match(expired.headers.get('www-authenticate') ?? '', /resource_metadata="[^"]+\/mcp\/every-serve-/);
      const liarOnly = await post(await issuer.sign({ aud: audience, scope: 'mcp:liar' }));
      assert.equal(liarOnly.status, 403);

      const client = await connect(url, await issuer.sign({ aud: audience, scope: 'mcp:greet', client_id: 'ide' }));
      try {
        assert.deepEqual(
          (await client.listTools()).tools.map((t) => t.name),
          ['echo'],
        );
        assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: 'jwt' } })), 'Echo: jwt');
      } finally {
        await (client.transport as StreamableHTTPClientTransport).terminateSession();
        await client.close();
      }
      const [intent] = await auditOf<{ tool: string; caller: string | null }>(EVERYTHING);
      assert.deepEqual({ tool: intent?.tool, caller: intent?.caller }, { tool: 'echo', caller: 'alice (client ide)' });
      const denials = (await hintboxCommand(['audit', '--server', EVERYTHING, '--events', '--json'])).stdout
        .split('\n')
        .filter((l) => l.includes('auth.denied'));
      assert.match(denials.join('\n'), /the token has expired/);
      assert.match(denials.join('\n'), /no scope of the token gives/);
    });
  });

  it('on SIGTERM lets a slow call finish, then exits 0 with nothing left', async () => {
    const serving = await serve([profilesFolder(sandboxFolder())]);
    const pid = serving.child.pid;
    try {
      const client = await connect(`${serving.url}/mcp/${EVERYTHING}`);
      const slow = client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 3, steps: 3 } });
      await new Promise((r) => setTimeout(r, 1000));
      serving.child.kill('SIGTERM');
      await eventually(
        async () => (await fetch(`${serving.url}/readyz`)).status === 503,
        5_000,
        'readyz 503 while stopping',
      );
      const result = await slow;
      assert.match(textOf(result), /completed/i);
      assert.equal(await serving.exited, 0, serving.stderr());
      assert.deepEqual(await containersOf(pid), []);
      await client.close().catch(() => undefined);
    } finally {
      await stop(serving);
    }
    assert.equal(existsSync(STATE_DIR), true);
  });
});
