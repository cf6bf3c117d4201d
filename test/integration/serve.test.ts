import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { parse, stringify } from 'yaml';
import { LABEL_SERVER } from '../../src/engine/sandbox-labels.js';
import { oauthSettingsFile, startTestIssuer, type TestIssuer } from '../support/oauth-issuer.js';
import { parseSamples, sampleOf } from '../support/prometheus-text.js';
import { scratchFolder } from '../support/scratch-folder.js';
import {
  containersOf,
  ensureEverythingImage,
  ensureTestImages,
  eventually,
  EVERYTHING_IMAGE,
  LIAR_IMAGE,
} from './support/docker.js';
import { auditOf, hintboxCommand, outcomeOf, sandboxFolder, STATE_DIR } from './support/hintbox-process.js';

const LIAR = `liar-serve-${process.pid}`;
const EVERYTHING = `every-serve-${process.pid}`;
/** The liar again, each client with sandboxes of its own. */
const LIAR_SEPARATE = `liar-own-${process.pid}`;

/**
 * A folder with the profiles: the liar (a host folder mounted at /data) and the everything
 * server, whose clients share their sandboxes, and the liar once more with `clients: separate`.
 */
function profilesFolder(workspace: string, extra: Record<string, string> = {}): string {
  const folder = scratchFolder('hintbox-serve-profiles-');
  const liar = { ...liarProfile(LIAR, workspace), tools: { identity: { tags: ['probe'] } } };
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
  const separate = { ...liar, name: LIAR_SEPARATE, clients: 'separate', mounts: [] };
  writeFileSync(path.join(folder, 'liar-separate.yaml'), stringify(separate));
  writeFileSync(path.join(folder, 'everything.yaml'), stringify(everything));
  for (const [file, text] of Object.entries(extra)) writeFileSync(path.join(folder, file), text);
  return folder;
}

import {
  connect,
  containersOfServer,
  leave,
  liarProfile,
  serve,
  stop,
  textOf,
  tokensFile,
  type Serving,
} from './support/serve-process.js';

integrationSuite('hintbox serve', { timeout: 300_000, images: [ensureTestImages, ensureEverythingImage] }, (suite) => {
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

  it('refuses with --one-endpoint a folder where one server hides another (x__y beside x): exit 2, one line', async () => {
    const x = `hidden-${process.pid}`;
    const folder = profilesFolder(sandboxFolder(), {
      'x.yaml': stringify(liarProfile(x, sandboxFolder())),
      'x-y.yaml': stringify(liarProfile(`${x}__y`, sandboxFolder())),
    });
    const refused = await hintboxCommand(['serve', folder, '--one-endpoint']);
    assert.equal(refused.code, 2, refused.stderr);
    assert.equal(
      refused.stderr
        .split('\n')
        .filter((line) => !line.startsWith('hintbox: no lock file '))
        .join('\n'),
      `serve: --one-endpoint: no tool of ${x}__y (beside ${x}) could be named apart at /mcp (<server>__<tool>): rename the profile\n`,
    );
  });

  it('refuses with --one-endpoint more servers than --max-sessions (a session at /mcp counts once per server): exit 2, one line', async () => {
    const folder = profilesFolder(sandboxFolder(), {
      'a.yaml': stringify(liarProfile(`capa-${process.pid}`, sandboxFolder())),
      'b.yaml': stringify(liarProfile(`capb-${process.pid}`, sandboxFolder())),
    });
    const refused = await hintboxCommand(['serve', folder, '--one-endpoint', '--max-sessions', '1']);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(
      refused.stderr,
      /^serve: --one-endpoint: a session at \/mcp counts once for each of the \d+ servers, more than --max-sessions 1: raise it$/m,
    );
  });

  suite.describe('without tokens', (group) => {
    let serving: Serving;
    let workspace: string;
    before(async () => {
      workspace = sandboxFolder();
      serving = group.use(await serve([profilesFolder(workspace), '--idle-timeout', '4', '--one-endpoint']));
    });

    it("serves both servers at their paths; a confirmed write lands in the host folder; DELETE removes a separate client's sandboxes", async () => {
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
      const own = await connect(`${serving.url}/mcp/${LIAR_SEPARATE}`);
      assert.deepEqual(outcomeOf(await own.callTool({ name: 'identity', arguments: {} })).ok, true);
      assert.ok((await containersOfServer(pid, LIAR_SEPARATE)).length > 0, 'the separate client has sandboxes');
      const shared = (await containersOfServer(pid, EVERYTHING)).length;
      assert.ok(shared > 0);
      for (const client of [liar, everything, own]) await leave(client);
      await eventually(
        async () => (await containersOfServer(pid, LIAR_SEPARATE)).length === 0,
        20_000,
        "no sandboxes of the separate client's after DELETE",
      );
      // Shared sandboxes serve on for the next client.
      assert.equal((await containersOfServer(pid, EVERYTHING)).length, shared);
    });

    it('gives 8 clients of shared sandboxes exactly their own answers and progress (their tokens are the same)', async () => {
      const pid = serving.child.pid;
      const before = (await containersOfServer(pid, EVERYTHING)).map((c) => c.Id).sort();
      const clients = await Promise.all([...Array(8).keys()].map(() => connect(`${serving.url}/mcp/${EVERYTHING}`)));
      try {
        const got = await Promise.all(
          clients.map(async (client, c) => {
            // Each client's SDK uses the same request ids, so the same progress tokens: only
            // hintbox's own tokens upstream keep one client's progress from another's.
            const steps = c + 2;
            const progress: number[] = [];
            const slow = client.callTool(
              { name: 'trigger-long-running-operation', arguments: { duration: 2, steps } },
              undefined,
              {
                onprogress: (p) => progress.push(p.total ?? -1),
              },
            );
            const echoes: string[] = [];
            for (let i = 0; i < 5; i++) {
              echoes.push(textOf(await client.callTool({ name: 'echo', arguments: { message: `c${c}-${i}` } })));
            }
            return { echoes, done: textOf(await slow), progress, steps };
          }),
        );
        got.forEach(({ echoes, done, progress, steps }, c) => {
          assert.deepEqual(
            echoes,
            [0, 1, 2, 3, 4].map((i) => `Echo: c${c}-${i}`),
          );
          assert.match(done, new RegExp(`Steps: ${steps}\\.`));
          assert.deepEqual(progress, Array(steps).fill(steps), `client ${c} got only its own progress`);
        });
        // One set of sandboxes served them all: the same containers as before they came.
        assert.deepEqual((await containersOfServer(pid, EVERYTHING)).map((c) => c.Id).sort(), before);
      } finally {
        await Promise.all(clients.map(leave));
      }
    });

    it('asks each confirmation of 8 clients at once of the client that made the call', async () => {
      const clients = await Promise.all(
        [...Array(8).keys()].map((c) => connect(`${serving.url}/mcp/${LIAR}`, undefined, new RegExp(`c${c}\\.txt`))),
      );
      try {
        const results = await Promise.all(
          clients.map((client, c) =>
            client.callTool({
              name: 'unannotated_write',
              arguments: { path: `/data/c${c}.txt`, content: `from c${c}` },
            }),
          ),
        );
        results.forEach((result, c) =>
          assert.deepEqual(outcomeOf(result), { ok: true, value: 'written' }, `client ${c}`),
        );
        clients.forEach((client, c) => {
          assert.equal(client.asked, 1, `client ${c} was asked once: ${client.messages.join(' | ')}`);
          assert.equal(readFileSync(path.join(workspace, `c${c}.txt`), 'utf8'), `from c${c}`);
        });
      } finally {
        await Promise.all(clients.map(leave));
      }
    });

    it('serves every server at /mcp with prefixed names: calls, confirmations and progress as at their own paths', async () => {
      const one = await connect(`${serving.url}/mcp`);
      try {
        const names = (await one.listTools()).tools.map((t) => t.name);
        for (const name of [`${LIAR}__unannotated_write`, `${EVERYTHING}__echo`, `${LIAR_SEPARATE}__identity`]) {
          assert.ok(names.includes(name), `${name} in ${names.join(', ')}`);
        }
        assert.equal(
          textOf(await one.callTool({ name: `${EVERYTHING}__echo`, arguments: { message: 'one' } })),
          'Echo: one',
        );
        const wrote = await one.callTool({
          name: `${LIAR}__unannotated_write`,
          arguments: { path: '/data/one.txt', content: 'through one endpoint' },
        });
        assert.deepEqual(outcomeOf(wrote), { ok: true, value: 'written' });
        assert.equal(one.asked, 1, 'the confirmation reached the client at /mcp');
        assert.equal(readFileSync(path.join(workspace, 'one.txt'), 'utf8'), 'through one endpoint');
        const progress: number[] = [];
        await one.callTool(
          { name: `${EVERYTHING}__trigger-long-running-operation`, arguments: { duration: 1, steps: 3 } },
          undefined,
          { onprogress: (p) => progress.push(p.progress) },
        );
        assert.deepEqual(progress, [1, 2, 3], `progress: ${JSON.stringify(progress)}`);
        await assert.rejects(one.callTool({ name: 'nope__echo', arguments: {} }), /Unknown tool/);
        const [intent] = await auditOf<{ tool: string }>(EVERYTHING);
        assert.equal(intent?.tool, 'trigger-long-running-operation', "audited as the server's own tool");
      } finally {
        await leave(one);
      }
    });

    it('cancels the call of a client whose connection drops, and closes the session of a client that vanished', async () => {
      const gone = await connect(`${serving.url}/mcp/${EVERYTHING}`);
      const slow = gone.callTool(
        { name: 'trigger-long-running-operation', arguments: { duration: 30, steps: 30 } },
        undefined,
        {
          onprogress: () => undefined,
        },
      );
      slow.catch(() => undefined);
      await new Promise((r) => setTimeout(r, 1500));
      // Its transport goes without ending the session (no DELETE): the streams drop.
      await gone.close();
      await eventually(
        async () => {
          const [call] = await auditOf<{ tool: string; outcome?: string; detail?: string }>(EVERYTHING);
          return call?.tool === 'trigger-long-running-operation' && call.outcome === 'cancelled';
        },
        10_000,
        'the call cancelled in the audit trail',
      );
      const [call] = await auditOf<{ detail?: string }>(EVERYTHING);
      assert.match(call?.detail ?? '', /the client went away/);
      await eventually(
        async () => /session \S+ ends \(no request for 4 s\)/.test(serving.stderr()),
        15_000,
        'the idle session closed',
      );
    });
  });

  suite.describe('with tokens', (group) => {
    let serving: Serving;
    const ALICE = `alice-${process.pid}-token`;
    const BOT = `bot-${process.pid}-token`;
    const PROBE = `probe-${process.pid}-token`;
    let workspace: string;
    before(async () => {
      workspace = sandboxFolder();
      const tokens = tokensFile([
        { name: 'alice', token: ALICE },
        { name: 'ci-bot', token: BOT, servers: [LIAR] },
        { name: 'prober', token: PROBE, servers: [LIAR], tags: ['probe'] },
      ]);
      serving = group.use(await serve([profilesFolder(workspace), '--tokens', tokens, '--one-endpoint']));
    });

    // proves: SERVE-TAGS
    it('serves a token at /mcp only the servers (and tags) it may use; none gets 401', async () => {
      const none = await fetch(`${serving.url}/mcp`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      });
      assert.equal(none.status, 401);
      const bot = await connect(`${serving.url}/mcp`, BOT);
      const probe = await connect(`${serving.url}/mcp`, PROBE);
      try {
        const botTools = (await bot.listTools()).tools.map((t) => t.name);
        assert.ok(botTools.length > 0 && botTools.every((name) => name.startsWith(`${LIAR}__`)), botTools.join(', '));
        assert.deepEqual(
          (await probe.listTools()).tools.map((t) => t.name),
          [`${LIAR}__identity`],
        );
        await assert.rejects(
          probe.callTool({ name: `${EVERYTHING}__echo`, arguments: { message: 'x' } }),
          /Unknown tool/,
        );
      } finally {
        await leave(bot);
        await leave(probe);
      }
    });

    // proves: SERVE-AUTH
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

    // proves: SERVE-TAGS
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

  suite.describe('with OAuth', (group) => {
    let serving: Serving;
    let issuer: TestIssuer;
    const RESOURCE = 'http://127.0.0.1:8931';
    before(async () => {
      issuer = group.use(await startTestIssuer());
      const oauth = oauthSettingsFile(issuer, {
        resource: RESOURCE,
        scopes: { 'mcp:greet': { servers: [EVERYTHING], tags: ['greet'] }, 'mcp:liar': { servers: [LIAR] } },
      });
      serving = group.use(await serve([profilesFolder(sandboxFolder()), '--oauth', oauth]));
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
      const [intent] = await auditOf<{ tool: string; caller: string | null; client?: string | null }>(EVERYTHING);
      assert.deepEqual(
        { tool: intent?.tool, caller: intent?.caller, client: intent?.client },
        { tool: 'echo', caller: 'alice', client: 'ide' },
      );
      const denials = (await hintboxCommand(['audit', '--server', EVERYTHING, '--events', '--json'])).stdout
        .split('\n')
        .filter((l) => l.includes('auth.denied'));
      assert.match(denials.join('\n'), /the token has expired/);
      assert.match(denials.join('\n'), /no scope of the token gives/);
    });
  });

  suite.describe('metrics and JSON logs', (group) => {
    let serving: Serving;
    const ALICE = `alice-${process.pid}-metrics`;
    const SCRAPER = `scraper-${process.pid}-metrics`;
    before(async () => {
      const tokens = tokensFile([
        { name: 'alice', token: ALICE },
        { name: 'prometheus', token: SCRAPER, metrics: 'only' },
      ]);
      serving = group.use(
        await serve([profilesFolder(sandboxFolder()), '--tokens', tokens], { HINTBOX_LOG_FORMAT: 'json' }),
      );
    });

    // proves: METRICS-ACCESS
    it('counts on /metrics exactly the calls made, a declined one and the denials; logs JSON lines', async () => {
      const metricsUrl = `${serving.url}/metrics`;
      const scrape = async () => {
        const response = await fetch(metricsUrl, { headers: { Authorization: `Bearer ${SCRAPER}` } });
        assert.equal(response.status, 200);
        return parseSamples(await response.text());
      };
      assert.equal((await fetch(metricsUrl)).status, 401);
      assert.equal((await fetch(metricsUrl, { headers: { Authorization: `Bearer ${ALICE}` } })).status, 403);
      assert.equal((await fetch(`${serving.url}/mcp/${EVERYTHING}`, { method: 'POST' })).status, 401);

      const everything = await connect(`${serving.url}/mcp/${EVERYTHING}`, ALICE);
      const liar = await connect(`${serving.url}/mcp/${LIAR}`, ALICE, /(?!)/); // declines every confirmation
      for (const message of ['a', 'b', 'c']) await everything.callTool({ name: 'echo', arguments: { message } });
      const declined = await liar.callTool({ name: 'unannotated_write', arguments: { path: '/data/x', content: 'x' } });
      assert.equal((declined as { isError?: boolean }).isError, true);
      const samples = await scrape();
      const echo = { server: EVERYTHING, tool: 'echo' };
      const write = { server: LIAR, tool: 'unannotated_write' };
      assert.equal(sampleOf(samples, 'hintbox_calls_total'), 4);
      assert.equal(sampleOf(samples, 'hintbox_calls_total', { ...echo, outcome: 'ok' }), 3);
      assert.equal(sampleOf(samples, 'hintbox_calls_total', { ...write, outcome: 'not-run' }), 1);
      assert.equal(sampleOf(samples, 'hintbox_call_duration_seconds_count', echo), 3);
      assert.equal(sampleOf(samples, 'hintbox_call_duration_seconds_count', write), 0);
      const refused = { ...write, decision: 'denied', decided_by: 'person' };
      assert.equal(sampleOf(samples, 'hintbox_calls_refused_total', refused), 1);
      assert.equal(sampleOf(samples, 'hintbox_confirmations_total', { ...write, answer: 'declined' }), 1);
      assert.equal(sampleOf(samples, 'hintbox_auth_denials_total', { server: '/metrics', status: '401' }), 1);
      assert.equal(sampleOf(samples, 'hintbox_auth_denials_total', { server: '/metrics', status: '403' }), 1);
      assert.equal(sampleOf(samples, 'hintbox_auth_denials_total', { server: EVERYTHING, status: '401' }), 1);
      // A sandbox counts once its server runs: the one of split: false, and not liar's write
      // sandbox, held at its gate since the start (its only call was declined).
      const running = async (server: string) =>
        (await containersOf(serving.child.pid, false)).filter((c) => c.Labels[LABEL_SERVER] === server).length;
      assert.equal(sampleOf(samples, 'hintbox_sandboxes', { server: EVERYTHING }), 1);
      assert.equal(await running(EVERYTHING), 1);
      const liarSandboxes = sampleOf(samples, 'hintbox_sandboxes', { server: LIAR });
      assert.ok(liarSandboxes >= 1 && liarSandboxes <= (await running(LIAR)), String(liarSandboxes));
      assert.equal(sampleOf(samples, 'hintbox_client_sessions'), 2);

      for (const client of [everything, liar]) {
        await (client.transport as StreamableHTTPClientTransport).terminateSession();
        await client.close();
      }
      await eventually(async () => sampleOf(await scrape(), 'hintbox_client_sessions') === 0, 10_000);
      // Shared sandboxes outlive their clients: the gauge still says so.
      assert.equal(sampleOf(await scrape(), 'hintbox_sandboxes', { server: EVERYTHING }), 1);
      const lines = serving
        .stderr()
        .split('\n')
        .filter((line) => line !== '');
      assert.ok(lines.length > 3);
      const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
      for (const entry of entries) {
        assert.deepEqual(Object.keys(entry).slice(0, 4), ['time', 'level', 'component', 'msg'], JSON.stringify(entry));
      }
      const denial = entries.find((e) => e.path === '/metrics' && e.status === 403);
      assert.deepEqual([denial?.level, denial?.caller], ['warn', 'alice']);
    });
  });

  it('reloads the folder on SIGHUP: a changed server restarts, a removed one is gone, a new one serves; a broken folder changes nothing', async () => {
    const folder = profilesFolder(sandboxFolder());
    const serving = await serve([folder]);
    const pid = serving.child.pid;
    try {
      const before = (await containersOfServer(pid, EVERYTHING)).map((c) => c.Id);
      const old = await connect(`${serving.url}/mcp/${EVERYTHING}`);
      assert.equal(textOf(await old.callTool({ name: 'echo', arguments: { message: 'a' } })), 'Echo: a');

      writeFileSync(path.join(folder, 'broken.yaml'), 'name: Broken Name\nserver: {}\n');
      serving.child.kill('SIGHUP');
      await eventually(async () => /SIGHUP: nothing reloaded/.test(serving.stderr()), 10_000, 'the refused reload');
      assert.equal(textOf(await old.callTool({ name: 'echo', arguments: { message: 'b' } })), 'Echo: b');

      rmSync(path.join(folder, 'broken.yaml'));
      rmSync(path.join(folder, 'liar-separate.yaml'));
      const everything = parse(readFileSync(path.join(folder, 'everything.yaml'), 'utf8')) as Record<string, unknown>;
      writeFileSync(
        path.join(folder, 'everything.yaml'),
        stringify({ ...everything, limits: { pids: 129, memory: '256m' } }),
      );
      const added = `liar-new-${process.pid}`;
      writeFileSync(
        path.join(folder, 'added.yaml'),
        stringify({
          name: added,
          server: { image: LIAR_IMAGE },
          trust: 'trusted',
          clients: 'separate',
          network: 'none',
        }),
      );
      serving.child.kill('SIGHUP');
      await eventually(async () => /SIGHUP: reloaded/.test(serving.stderr()), 20_000, 'the reload');
      assert.match(
        serving.stderr(),
        new RegExp(`added ${added}; changed ${EVERYTHING}; removed ${LIAR_SEPARATE}; unchanged 1`),
      );
      // The changed server's clients were ended: they connect again.
      await assert.rejects(old.callTool({ name: 'echo', arguments: { message: 'c' } }));
      await old.close().catch(() => undefined);
      await eventually(async () => (await fetch(`${serving.url}/readyz`)).status === 200, 60_000, 'ready again');
      const again = await connect(`${serving.url}/mcp/${EVERYTHING}`);
      assert.equal(textOf(await again.callTool({ name: 'echo', arguments: { message: 'd' } })), 'Echo: d');
      const after = (await containersOfServer(pid, EVERYTHING)).map((c) => c.Id);
      assert.ok(after.length > 0 && after.every((id) => !before.includes(id)), 'new sandboxes for the changed profile');
      const fresh = await connect(`${serving.url}/mcp/${added}`);
      assert.equal(outcomeOf(await fresh.callTool({ name: 'identity', arguments: {} })).ok, true);
      const removed = await fetch(`${serving.url}/mcp/${LIAR_SEPARATE}`, { method: 'POST', body: '{}' });
      assert.equal(removed.status, 404);
      for (const client of [again, fresh]) await leave(client);
      serving.child.kill('SIGTERM');
      assert.equal(await serving.exited, 0, serving.stderr());
      assert.deepEqual(await containersOf(pid), []);
    } finally {
      await stop(serving);
    }
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
