import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { stringify } from 'yaml';
import { scratchFolder } from '../support/scratch-folder.js';
import { ensureFaultyImage, ensureTestImages, FAULTY_IMAGE } from './support/docker.js';
import { outcomeOf } from './support/hintbox-process.js';
import { integrationSuite } from './support/suite.js';
import { connect, leave, liarProfile, serve } from './support/serve-process.js';

const LIAR = `liar-json-${process.pid}`;
const IMAGES = [ensureTestImages, ensureFaultyImage];

/** A fetch that notes, for each POST of a request, its method and the answer's Content-Type. */
function recordingFetch(seen: { method: string; type: string | null }[]): FetchLike {
  return async (url, init) => {
    const res = await fetch(url, init);
    const body = init?.method === 'POST' ? (JSON.parse(init.body as string) as { method?: string; id?: unknown }) : {};
    if (body.method !== undefined && body.id !== undefined)
      seen.push({ method: body.method, type: res.headers.get('content-type') });
    return res;
  };
}

integrationSuite('hintbox serve: plain JSON answers', { timeout: 300_000, images: IMAGES }, (suite) => {
  // proves: SERVE-JSON-ANSWER
  it('answers a call with plain JSON when nothing comes before its result; a confirmation turns the answer into a stream and is never dropped, and a declined write changes nothing', async () => {
    const workspace = suite.workspace;
    const folder = scratchFolder('hintbox-serve-json-');
    writeFileSync(path.join(folder, 'liar.yaml'), stringify(liarProfile(LIAR, workspace)));
    const serving = suite.use(await serve([folder]));
    const url = `${serving.url}/mcp/${LIAR}`;

    const seen: { method: string; type: string | null }[] = [];
    const declining = await connect(url, undefined, /(?!)/, { fetch: recordingFetch(seen) });
    try {
      // Nothing can come before the answer of a read the sandbox enforces: one JSON body.
      const read = await declining.callTool({ name: 'identity', arguments: {} });
      assert.equal(outcomeOf(read).ok, true);
      assert.deepEqual(seen.at(-1), { method: 'tools/call', type: 'application/json' });

      // The write needs a confirmation: it reaches the client on the call's own answer, which
      // becomes a stream; declined, the call is refused and the host folder is untouched.
      const declined = await declining.callTool({
        name: 'unannotated_write',
        arguments: { path: '/data/declined.txt', content: 'must not land' },
      });
      assert.equal((declined as { isError?: boolean }).isError, true);
      assert.equal(declining.asked, 1, 'the confirmation reached the client');
      assert.deepEqual(seen.at(-1), { method: 'tools/call', type: 'text/event-stream' });
      assert.equal(existsSync(path.join(workspace, 'declined.txt')), false);
    } finally {
      await leave(declining);
    }

    seen.length = 0;
    const approving = await connect(url, undefined, undefined, { fetch: recordingFetch(seen) });
    try {
      const wrote = await approving.callTool({
        name: 'unannotated_write',
        arguments: { path: '/data/approved.txt', content: 'confirmed over a stream' },
      });
      assert.deepEqual(outcomeOf(wrote), { ok: true, value: 'written' });
      assert.equal(approving.asked, 1);
      assert.deepEqual(seen.at(-1), { method: 'tools/call', type: 'text/event-stream' });
      assert.equal(readFileSync(path.join(workspace, 'approved.txt'), 'utf8'), 'confirmed over a stream');
      // The next read is plain JSON again: the choice is made per request.
      await approving.callTool({ name: 'identity', arguments: {} });
      assert.deepEqual(seen.at(-1), { method: 'tools/call', type: 'application/json' });
    } finally {
      await leave(approving);
    }
  });

  // proves: SERVE-CLIENT-GONE
  it('a client that abandons its calls before their JSON answers, 60 times, never stops serve (attack)', async () => {
    const folder = scratchFolder('hintbox-serve-json-gone-');
    const server = `faulty-json-${process.pid}`;
    writeFileSync(
      path.join(folder, 'faulty.yaml'),
      stringify({ name: server, server: { image: FAULTY_IMAGE }, trust: 'trusted', network: 'none' }),
    );
    const serving = suite.use(await serve([folder]));
    const url = `${serving.url}/mcp/${server}`;
    const client = await connect(url);
    try {
      const sessionId = (client.transport as StreamableHTTPClientTransport).sessionId ?? '';
      // Raw POSTs of the session, each abandoned (its socket closed, no cancellation) before
      // the server's answer comes: the answer is then written to a response nobody reads.
      const abandoned = async (n: number): Promise<void> => {
        const abort = new AbortController();
        const posted = fetch(url, {
          method: 'POST',
          headers: {
            'Content-Type': 'application/json',
            Accept: 'application/json, text/event-stream',
            'mcp-session-id': sessionId,
          },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: `gone-${n}`,
            method: 'tools/call',
            params: { name: 'echo', arguments: { n, waitMs: 150 } },
          }),
          signal: abort.signal,
        });
        setTimeout(() => abort.abort(), 20 + (n % 5) * 25);
        await posted
          .then(
            (res) => res.text(),
            () => undefined,
          )
          .catch(() => undefined);
      };
      for (let round = 0; round < 6; round++)
        await Promise.all(Array.from({ length: 10 }, (_, i) => abandoned(round * 10 + i)));
      await new Promise((r) => setTimeout(r, 500)); // the last answers written to closed responses
      assert.equal(serving.child.exitCode, null, `serve still runs: ${serving.stderr().slice(-2000)}`);
      assert.doesNotMatch(serving.stderr(), /hintbox failed|stopping/, 'serve never began to stop');
      const answer = await client.callTool({ name: 'echo', arguments: { n: 7 } });
      assert.deepEqual(
        (answer as { structuredContent?: unknown }).structuredContent,
        { n: 7, pad: 0 },
        'the session still answers',
      );
    } finally {
      await leave(client);
    }
  });
});
