import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { stringify } from 'yaml';
import { parseSamples, sampleOf } from '../support/prometheus-text.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { ensureTestImages, eventually } from './support/docker.js';
import { auditOf, outcomeOf, sandboxFolder } from './support/hintbox-process.js';
import {
  connect,
  containersOfServer,
  leave,
  liarProfile,
  serve,
  stop,
  tokensFile,
  type Serving,
} from './support/serve-process.js';
import { pageAttack, pageRequest, type PageAttack, type PageHeaders } from './support/web-page.js';

/**
 * `hintbox serve` against web pages in the browser of the person at its machine: a page reached
 * through DNS rebinding (its own name as `Host`, resolving to 127.0.0.1) and a page of another
 * site that calls 127.0.0.1 directly. Each tries what a client could: open a session, list the
 * tools, call a writing tool and answer hintbox's confirmation itself, read `/metrics`.
 */

const LIAR = `liar-origin-${process.pid}`;
/** The liar again, each client with a sandbox of its own (a session would start a container). */
const LIAR_SEPARATE = `liar-origin-own-${process.pid}`;
const ALICE = `alice-${process.pid}-origin`;
const SCRAPER = `scraper-${process.pid}-origin`;

function profilesFolder(workspace: string): string {
  const folder = scratchFolder('hintbox-serve-origin-');
  const liar = liarProfile(LIAR, workspace);
  writeFileSync(path.join(folder, 'liar.yaml'), stringify(liar));
  const separate = { ...liar, name: LIAR_SEPARATE, clients: 'separate', mounts: [] };
  writeFileSync(path.join(folder, 'liar-separate.yaml'), stringify(separate));
  return folder;
}

/** What a page gets when every request of it is refused with `status`. */
const refused = (status: number): PageAttack => ({
  initialize: status,
  session: false,
  tools: [],
  call: status,
  result: 'null',
  confirmations: 0,
});

/** The paths a page tries besides the MCP ones: health, readiness, metrics, OAuth's metadata. */
const PLAIN_PATHS = ['/healthz', '/readyz', '/metrics', '/.well-known/oauth-protected-resource'];

async function statusesOf(base: string, page: PageHeaders, paths: readonly string[]): Promise<Record<string, number>> {
  const statuses: Record<string, number> = {};
  for (const p of paths) statuses[p] = (await pageRequest(`${base}${p}`, page)).status;
  return statuses;
}

integrationSuite(
  'hintbox serve and web pages (DNS rebinding, other sites)',
  { timeout: 300_000, images: [ensureTestImages] },
  (suite) => {
    suite.describe('without tokens', (group) => {
      let serving: Serving;
      let workspace: string;
      let port: string;
      before(async () => {
        workspace = sandboxFolder();
        serving = group.use(await serve([profilesFolder(workspace), '--one-endpoint']));
        port = new URL(serving.url).port;
      });

      const refusals = async (): Promise<{ host: number; origin: number }> => {
        const samples = parseSamples(await (await fetch(`${serving.url}/metrics`)).text());
        return {
          host: sampleOf(samples, 'hintbox_http_refused_total', { reason: 'host' }),
          origin: sampleOf(samples, 'hintbox_http_refused_total', { reason: 'origin' }),
        };
      };

      // proves: SERVE-HOST-ORIGIN
      it('refuses a page reached through DNS rebinding on every path: no session, call, confirmation or metrics, and nothing started or recorded', async () => {
        const countedBefore = await refusals();
        const rebound: PageHeaders = {
          host: `rebind.attacker.test:${port}`,
          origin: `http://rebind.attacker.test:${port}`,
        };
        const write = { path: '/data/pwned.txt', content: 'from a web page' };
        const attack = {
          own: await pageAttack(`${serving.url}/mcp/${LIAR}`, rebound, 'unannotated_write', write),
          combined: await pageAttack(`${serving.url}/mcp`, rebound, `${LIAR}__unannotated_write`, write),
          // Same-origin in the browser's eyes, so a GET may carry no Origin: the Host alone decides.
          separate: await pageAttack(`${serving.url}/mcp/${LIAR_SEPARATE}`, { host: rebound.host }, 'identity', {}),
          plain: await statusesOf(serving.url, rebound, PLAIN_PATHS),
          plainWithoutOrigin: await statusesOf(serving.url, { host: rebound.host }, PLAIN_PATHS),
        };
        assert.deepEqual(attack, {
          own: refused(421),
          combined: refused(421),
          separate: refused(421),
          plain: Object.fromEntries(PLAIN_PATHS.map((p) => [p, 421])),
          plainWithoutOrigin: Object.fromEntries(PLAIN_PATHS.map((p) => [p, 421])),
        });
        // Nothing happened: no file, no sandbox of a separate session, no call in the audit trail.
        assert.deepEqual(readdirSync(workspace), []);
        assert.deepEqual(await containersOfServer(serving.child.pid, LIAR_SEPARATE), []);
        assert.deepEqual(await auditOf(LIAR), []);
        assert.deepEqual(await auditOf(LIAR_SEPARATE), []);
        // Every refusal is counted (3 attacks of 4 requests, 8 plain ones); the log says the first.
        const counted = await refusals();
        assert.deepEqual(counted, { host: countedBefore.host + 20, origin: countedBefore.origin });
        assert.equal(serving.stderr().match(/does not answer to the host "rebind\.attacker\.test/g)?.length, 1);
      });

      // proves: SERVE-HOST-ORIGIN
      it('refuses a page of another site that calls 127.0.0.1 itself (its Origin, or Sec-Fetch-Site), and nothing happened', async () => {
        const countedBefore = await refusals();
        const own = `127.0.0.1:${port}`;
        const pages: PageHeaders[] = [
          { host: own, origin: 'https://evil.example' },
          { host: own, origin: 'null' },
          { host: own, origin: `http://127.0.0.1:${Number(port) + 1}` }, // another server of this machine
          { host: own, origin: `https://127.0.0.1:${port}` },
          { host: own, 'sec-fetch-site': 'cross-site' },
          { host: own, 'sec-fetch-site': 'same-site' },
        ];
        const write = { path: '/data/pwned.txt', content: 'from another site' };
        for (const page of pages) {
          const attack = await pageAttack(`${serving.url}/mcp/${LIAR}`, page, 'unannotated_write', write);
          assert.deepEqual(attack, refused(403), JSON.stringify(page));
          const plain = await statusesOf(serving.url, page, PLAIN_PATHS);
          assert.deepEqual(plain, Object.fromEntries(PLAIN_PATHS.map((p) => [p, 403])), JSON.stringify(page));
        }
        assert.deepEqual(readdirSync(workspace), []);
        assert.deepEqual(await auditOf(LIAR), []);
        assert.deepEqual(await refusals(), { host: countedBefore.host, origin: countedBefore.origin + 6 * 8 });
      });

      it('serves its own clients: the SDK client, localhost, and a page of its own origin', async () => {
        const client = await connect(`${serving.url}/mcp/${LIAR}`);
        assert.ok((await client.listTools()).tools.some((t) => t.name === 'unannotated_write'));
        const wrote = await client.callTool({
          name: 'unannotated_write',
          arguments: { path: '/data/own.txt', content: 'from the client' },
        });
        assert.deepEqual(outcomeOf(wrote), { ok: true, value: 'written' });
        assert.equal(readFileSync(path.join(workspace, 'own.txt'), 'utf8'), 'from the client');
        await leave(client);
        for (const page of [
          { host: `localhost:${port}` },
          { host: `localhost:${port}`, origin: `http://localhost:${port}` },
          { host: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${port}`, 'sec-fetch-site': 'same-origin' },
          { host: `127.0.0.1:${port}`, 'sec-fetch-site': 'none' },
        ]) {
          const statuses = await statusesOf(serving.url, page, PLAIN_PATHS);
          assert.deepEqual(statuses, {
            ...Object.fromEntries(PLAIN_PATHS.map((p) => [p, 200])),
            [PLAIN_PATHS[3]!]: 404,
          });
          const init = await pageRequest(`${serving.url}/mcp/${LIAR}`, page, {
            body: {
              jsonrpc: '2.0',
              id: 1,
              method: 'initialize',
              params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'own', version: '1' } },
            },
          });
          assert.equal(init.status, 200, JSON.stringify(page));
          const session = init.headers['mcp-session-id'] as string;
          assert.equal(
            (await pageRequest(`${serving.url}/mcp/${LIAR}`, page, { method: 'DELETE', session })).status,
            200,
          );
        }
      });
    });

    suite.describe('with tokens, --allowed-host and --allowed-origin', (group) => {
      let serving: Serving;
      let port: string;
      before(async () => {
        const tokens = tokensFile([
          { name: 'alice', token: ALICE },
          { name: 'prometheus', token: SCRAPER, metrics: 'only' },
        ]);
        const folder = profilesFolder(sandboxFolder());
        serving = group.use(
          await serve([
            folder,
            '--tokens',
            tokens,
            '--allowed-host',
            'hintbox.example.test',
            '--allowed-origin',
            'https://app.example.test',
          ]),
        );
        port = new URL(serving.url).port;
      });

      // proves: SERVE-HOST-ORIGIN
      it("refuses a foreign Host or Origin even with a valid token, and serves the operator's names", async () => {
        const alice = `Bearer ${ALICE}`;
        const scraper = `Bearer ${SCRAPER}`;
        const rebound = { host: `rebind.attacker.test:${port}`, origin: `http://rebind.attacker.test:${port}` };
        const identity = (page: PageHeaders) => pageAttack(`${serving.url}/mcp/${LIAR_SEPARATE}`, page, 'identity', {});
        assert.deepEqual(await identity({ ...rebound, authorization: alice }), refused(421));
        const evil = { host: `127.0.0.1:${port}`, origin: 'https://evil.example', authorization: alice };
        assert.deepEqual(await identity(evil), refused(403));
        const metrics = async (page: PageHeaders) => (await pageRequest(`${serving.url}/metrics`, page)).status;
        assert.equal(await metrics({ ...rebound, authorization: scraper }), 421);
        assert.equal(await metrics({ ...evil, authorization: scraper }), 403);
        assert.equal(await metrics({ host: `127.0.0.1:${port}`, authorization: scraper }), 200);
        assert.deepEqual(await containersOfServer(serving.child.pid, LIAR_SEPARATE), []);
        assert.deepEqual(await auditOf(LIAR_SEPARATE), []);

        // A proxy's name the operator gave, a page of it (through TLS), and an allowed origin.
        for (const page of [
          { host: 'hintbox.example.test', authorization: alice },
          { host: 'hintbox.example.test:8443', origin: 'https://hintbox.example.test:8443', authorization: alice },
          { host: `127.0.0.1:${port}`, origin: 'https://app.example.test', authorization: alice },
        ]) {
          const attempt = await identity(page);
          assert.deepEqual(
            [attempt.initialize, attempt.session, attempt.tools.includes('identity'), attempt.call],
            [200, true, true, 200],
            JSON.stringify(page),
          );
          assert.match(attempt.result, /"ok":true/);
        }
        // And no more: another name, or the allowed name's page over plain HTTP from another host.
        assert.equal(await metrics({ host: 'other.example.test', authorization: scraper }), 421);
        const plain = { host: `127.0.0.1:${port}`, origin: 'http://hintbox.example.test', authorization: scraper };
        assert.equal(await metrics(plain), 403);
      });
    });

    it('survives a SIGHUP as soon as it catches one, before it listens: the reload is done once it does, and it serves', async () => {
      // The moment serve can first take a SIGHUP: its handler is in place (SigCgt, bit 1). Before
      // that (node itself starting) the signal's default ends any process; the fix installs the
      // handler before anything else of serve, so this lands while it loads, checks and listens.
      let signalled = false;
      const serving = await serve([profilesFolder(sandboxFolder())], {}, (child) => {
        const poll = setInterval(() => {
          const status = child.exitCode === null ? readStatus(child.pid) : '';
          const caught = /^SigCgt:\s*([0-9a-f]+)$/m.exec(status)?.[1];
          if (child.exitCode !== null || (caught !== undefined && (BigInt(`0x${caught}`) & 1n) === 1n)) {
            clearInterval(poll);
            signalled = child.exitCode === null && child.kill('SIGHUP');
          }
        }, 2);
      });
      try {
        assert.ok(signalled);
        const log = serving.stderr();
        const early = log.indexOf('SIGHUP while serve starts');
        const listening = log.indexOf('serving /mcp/');
        assert.ok(early >= 0 && early < listening, log);
        await eventually(async () => /SIGHUP: reloaded .*unchanged 2/.test(serving.stderr()), 30_000, 'the reload');
        assert.ok(serving.stderr().indexOf('SIGHUP: reloaded') > listening);
        const client = await connect(`${serving.url}/mcp/${LIAR_SEPARATE}`);
        assert.deepEqual(outcomeOf(await client.callTool({ name: 'identity', arguments: {} })).ok, true);
        await leave(client);
      } finally {
        await stop(serving);
      }
      assert.equal(await serving.exited, 0);
    });
  },
);

function readStatus(pid: number | undefined): string {
  try {
    return readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch (error) {
    return (error as Error).message; // it ended meanwhile
  }
}
