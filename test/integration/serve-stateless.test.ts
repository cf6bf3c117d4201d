import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { stringify } from 'yaml';
import { scratchFolder } from '../support/scratch-folder.js';
import { ensureTestImages, LIAR_IMAGE } from './support/docker.js';
import { auditOf, hintboxCommand } from './support/hintbox-process.js';
import { MODERN } from './support/modern-client.js';
import { serve, tokensFile } from './support/serve-process.js';
import { integrationSuite } from './support/suite.js';

interface CallRow {
  decision: string;
  decidedBy: string;
  outcome: string | null;
}

/** What a raw request got back (the last event of a stream). */
interface Answer {
  result?: { resultType?: string; requestState?: string; isError?: boolean; content?: unknown };
  error?: { code?: number; message?: string };
}

/** The person's yes, as the retry of a 2026 client carries it. */
const APPROVE = { 'hintbox.confirm': { action: 'accept', content: { approve: true } } };
const TOKENS = { alice: 'alice-token-0123456789abcdef', bob: 'bob-token-0123456789abcdef' };
const ENVELOPE = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': { elicitation: {} },
};

/**
 * `hintbox serve` for 2026-era clients (MCP 2026-07-28): no `initialize`, no `Mcp-Session-Id`;
 * each request is answered by its caller's gateway on that server (`stateless-clients.ts`),
 * driven by the SDK 2.x client over streamable HTTP and by raw requests for the attacks: headers
 * that lie about the body, a confirmation's `requestState` carried to another caller or server.
 */
integrationSuite(
  'hintbox serve: 2026 clients without a session',
  { timeout: 300_000, images: [ensureTestImages] },
  (suite) => {
    const workspace = suite.workspace;
    let n = 0;

    /** A folder of liar profiles (every tool approved; `trusted` ones pre-approve the write) and serve on it with two tokens. */
    const serveLiars = async (profiles: { trusted?: boolean }[], args: string[] = []) => {
      const folder = scratchFolder('hintbox-serve-stateless-');
      const names: string[] = [];
      for (const { trusted } of profiles) {
        const name = `liar-st-${process.pid}-${n++}`;
        const file = path.join(folder, `${name}.yaml`);
        const preApprove = trusted ? [{ tool: 'unannotated_write' }] : [];
        const trust = trusted ? 'trusted' : 'untrusted';
        const mounts = [{ source: workspace, target: '/data' }];
        writeFileSync(
          file,
          stringify({ name, server: { image: LIAR_IMAGE }, trust, mounts, network: 'none', preApprove }),
        );
        const approved = await hintboxCommand(['approve', file, '--all', '--yes']);
        assert.equal(approved.code, 0, approved.stderr);
        names.push(name);
      }
      const tokens = tokensFile(Object.entries(TOKENS).map(([name, token]) => ({ name, token })));
      const serving = await serve([folder, '--tokens', tokens, ...args]);
      return { serving, names };
    };

    /** One raw 2026 POST; `headers` are the standard ones unless given (null: left out). */
    const post = async (
      url: string,
      token: string,
      body: { method: string; params: Record<string, unknown> },
      headers: Record<string, string | null> = {},
    ) => {
      const name = body.params.name ?? body.params.uri;
      const standard: Record<string, string | null> = {
        'mcp-protocol-version': MODERN,
        'mcp-method': body.method,
        ...(typeof name === 'string' ? { 'mcp-name': name } : {}),
        ...headers,
      };
      const res = await fetch(url, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          Authorization: `Bearer ${token}`,
          ...Object.fromEntries(Object.entries(standard).filter((e): e is [string, string] => e[1] !== null)),
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, ...body, params: { ...body.params, _meta: ENVELOPE } }),
      });
      const text = await res.text();
      const json =
        (text.startsWith('event:') ? /^data: (.*)$/m.exec(text.split('\n\n').at(-2) ?? '')?.[1] : text) ?? '{}';
      return {
        status: res.status,
        session: res.headers.get('mcp-session-id'),
        json: JSON.parse(json) as Answer,
      };
    };
    const write = (file: string, content: string) => ({
      method: 'tools/call',
      params: { name: 'unannotated_write', arguments: { path: `/data/${file}`, content } },
    });
    const events = async (server: string) => {
      const out = await hintboxCommand(['audit', '--server', server, '--events', '--json']);
      return out.stdout
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { type?: string; fields?: { reason?: string; detail?: string } })
        .filter((e) => e.type === 'approval.refused')
        .map((e) => `${e.fields?.reason}: ${e.fields?.detail}`);
    };

    // proves: SERVE-STATELESS-BINDING
    it('serves the SDK 2.x client over HTTP without a session: lists, a confirmed write as input_required that runs once, its replay nothing, the gateway ended when idle', async () => {
      const { serving, names } = await serveLiars([{}], ['--idle-timeout', '2']);
      const name = names[0] as string;
      const url = `${serving.url}/mcp/${name}`;
      const sessions: (string | null)[] = [];
      const client = new Client(
        { name: 'hintbox-test-2026', version: '1.0.0' },
        { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: MODERN } } },
      );
      let asked = 0;
      client.setRequestHandler('elicitation/create', () => {
        asked++;
        return { action: 'accept', content: { approve: true } };
      });
      const transport = new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: `Bearer ${TOKENS.alice}` } },
        fetch: async (input, init) => {
          const res = await fetch(input, init);
          sessions.push(res.headers.get('mcp-session-id'));
          return res;
        },
      });
      try {
        await client.connect(transport);
        const tools = await client.listTools();
        assert.ok(tools.tools.some((t) => t.name === 'unannotated_write'));
        const target = path.join(workspace, `${name}.txt`);
        // The SDK's own round trip: input_required, the form to its handler, the retry runs the write once.
        const wrote = await client.callTool(write(`${name}.txt`, 'once').params);
        assert.equal(wrote.isError, undefined, JSON.stringify(wrote));
        assert.equal(readFileSync(target, 'utf8'), 'once');
        assert.equal(asked, 1, 'the person was asked once');
        rmSync(target);

        // By hand: the retry runs once, the same state again runs nothing.
        const first = await post(url, TOKENS.alice, write(`${name}.txt`, 'by hand'));
        assert.equal(first.json.result?.resultType, 'input_required', JSON.stringify(first.json));
        assert.equal(existsSync(target), false, 'nothing runs before the answer');
        const retry = write(`${name}.txt`, 'by hand');
        Object.assign(retry.params, { requestState: first.json.result.requestState, inputResponses: APPROVE });
        const ran = await post(url, TOKENS.alice, retry);
        assert.equal(ran.json.result?.isError, undefined, JSON.stringify(ran.json));
        assert.equal(readFileSync(target, 'utf8'), 'by hand');
        rmSync(target);
        const replayed = await post(url, TOKENS.alice, retry);
        assert.match(JSON.stringify(replayed.json.result?.content), /requestState was already used/);
        assert.equal(existsSync(target), false, 'the replay wrote nothing');
        assert.ok(sessions.length > 0);
        assert.deepEqual([...new Set([...sessions, first.session, ran.session])], [null], 'no answer opens a session');

        // Idle past --idle-timeout: the caller's gateway ends; its next request opens another.
        await new Promise((r) => setTimeout(r, 3500));
        assert.match(serving.stderr(), /stateless gateway ends \(no request for 2 s\)/);
        assert.ok((await client.listTools()).tools.length > 0);
      } finally {
        await client.close().catch(() => undefined);
        await serving[Symbol.asyncDispose]();
      }
      const calls = (await auditOf<CallRow>(name)).map((r) => `${r.decision}/${r.decidedBy}/${r.outcome}`);
      assert.deepEqual(calls, ['denied/request-state/not-run', 'allowed/person/ok', 'allowed/person/ok']);
    });

    // proves: SERVE-STANDARD-HEADERS
    it('refuses a 2026 request whose Mcp-Method or Mcp-Name header is missing or says another call than its body (400, -32020): the write runs nothing and no call is recorded (attack)', async () => {
      const { serving, names } = await serveLiars([{ trusted: true }]);
      const name = names[0] as string;
      const url = `${serving.url}/mcp/${name}`;
      const target = path.join(workspace, `${name}.txt`);
      try {
        const lies: Record<string, string | null>[] = [
          // A filter on headers would let a list through: the body writes.
          { 'mcp-method': 'tools/list', 'mcp-name': null },
          { 'mcp-name': 'identity' },
          { 'mcp-method': null },
          { 'mcp-name': null },
          { 'mcp-protocol-version': '2025-11-25' },
        ];
        for (const headers of lies) {
          const answer = await post(url, TOKENS.alice, write(`${name}.txt`, 'hidden write'), headers);
          const what = JSON.stringify(headers);
          assert.equal(answer.status, 400, `${what}: ${JSON.stringify(answer.json)}`);
          assert.equal(answer.json.error?.code, -32020, what);
          assert.equal(existsSync(target), false, `${what}: nothing was written`);
        }
        // The same call with headers that say what it does runs (pre-approved).
        const honest = await post(url, TOKENS.alice, write(`${name}.txt`, 'honest write'));
        assert.equal(honest.status, 200, JSON.stringify(honest.json));
        assert.equal(readFileSync(target, 'utf8'), 'honest write');
      } finally {
        await serving[Symbol.asyncDispose]();
      }
      const calls = (await auditOf<CallRow>(name)).map((r) => `${r.decision}/${r.outcome}`);
      assert.deepEqual(calls, ['allowed/ok'], 'only the honest call is recorded');
    });

    // proves: SERVE-STATELESS-ERA
    it('refuses a 2026 initialize on the stateless path (404, -32601, naming the versions served): no gateway opens, no session is minted (attack)', async () => {
      const { serving, names } = await serveLiars([{}]);
      const url = `${serving.url}/mcp/${names[0] as string}`;
      try {
        // A 2026 request (its _meta and headers say 2026-07-28) that asks for the 2025 handshake.
        const params = {
          protocolVersion: MODERN,
          capabilities: { elicitation: {} },
          clientInfo: { name: 'x', version: '1' },
        };
        const answer = await post(url, TOKENS.alice, { method: 'initialize', params });
        assert.equal(answer.status, 404, JSON.stringify(answer.json));
        assert.equal(answer.json.error?.code, -32601);
        assert.match(
          answer.json.error?.message ?? '',
          /^Method not found: initialize \(MCP 2026-07-28 has none: send server\/discover\).*2025-11-25/,
        );
        assert.equal(answer.session, null, 'no session id minted');
        assert.doesNotMatch(serving.stderr(), /served statelessly/, 'no gateway opened for it');
        // The same caller's 2026 requests are served.
        const discovered = await post(url, TOKENS.alice, { method: 'server/discover', params: {} });
        assert.equal(discovered.status, 200, JSON.stringify(discovered.json));
      } finally {
        await serving[Symbol.asyncDispose]();
      }
    });

    // proves: SERVE-STATELESS-BINDING
    it('refuses a requestState retried by another principal or on another profile: nothing is written, each refusal audited (attack)', async () => {
      const { serving, names } = await serveLiars([{}, {}]);
      const [x, y] = names as [string, string];
      const target = path.join(workspace, `${x}.txt`);
      try {
        const first = await post(`${serving.url}/mcp/${x}`, TOKENS.alice, write(`${x}.txt`, 'alice asked'));
        assert.equal(first.json.result?.resultType, 'input_required', JSON.stringify(first.json));
        const retry = write(`${x}.txt`, 'alice asked');
        Object.assign(retry.params, { requestState: first.json.result.requestState, inputResponses: APPROVE });

        const byBob = await post(`${serving.url}/mcp/${x}`, TOKENS.bob, retry);
        assert.equal(byBob.json.result?.isError, true, JSON.stringify(byBob.json));
        assert.match(JSON.stringify(byBob.json.result?.content), /issued for another call \(different caller\)/);
        const onY = await post(`${serving.url}/mcp/${y}`, TOKENS.alice, retry);
        assert.equal(onY.json.result?.isError, true, JSON.stringify(onY.json));
        assert.match(JSON.stringify(onY.json.result?.content), /issued for another call \(different server\)/);
        assert.equal(existsSync(target), false, 'neither retry wrote');

        // Neither used the state up: alice's own retry on x still runs, once.
        const own = await post(`${serving.url}/mcp/${x}`, TOKENS.alice, retry);
        assert.equal(own.json.result?.isError, undefined, JSON.stringify(own.json));
        assert.equal(readFileSync(target, 'utf8'), 'alice asked');
      } finally {
        await serving[Symbol.asyncDispose]();
      }
      assert.deepEqual(await events(x), ['mismatch: its requestState was issued for another call (different caller)']);
      assert.deepEqual(await events(y), ['mismatch: its requestState was issued for another call (different server)']);
      const calls = (await auditOf<CallRow>(y)).map((r) => `${r.decision}/${r.decidedBy}/${r.outcome}`);
      assert.deepEqual(calls, ['denied/request-state/not-run']);
    });
  },
);
