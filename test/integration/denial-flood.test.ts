import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { connect as connectSocket } from 'node:net';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { stringify } from 'yaml';
import { hashToken } from '../../src/serve/bearer-tokens.js';
import { parseSamples, sampleOf } from '../support/prometheus-text.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { ensureEverythingImage, ensureTestImages, EVERYTHING_IMAGE } from './support/docker.js';
import { auditOf } from './support/hintbox-process.js';
import { connect, leave, serve, stop, textOf, type Serving } from './support/serve-process.js';

const SERVER = `flood-${process.pid}`;
const ALICE = `alice-${process.pid}-token`;
/** Wrong-token requests of the flood. */
const FLOOD = 50_000;
/** The audit folder's file system: small, so that a flood that is written down fills it. */
const TMPFS_BYTES = 8 * 1024 * 1024;

/** `n` POSTs with `headers`, `concurrency` at a time over keep-alive connections; their statuses counted. */
async function flood(url: string, n: number, headers: Record<string, string>, concurrency = 64) {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
  const statuses = new Map<number, number>();
  let sent = 0;
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = request(url, { method: 'POST', agent, headers: { 'Content-Type': 'application/json', ...headers } });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => {
          statuses.set(res.statusCode ?? 0, (statuses.get(res.statusCode ?? 0) ?? 0) + 1);
          resolve();
        });
      });
      req.on('error', reject);
      req.end(body);
    });
  await Promise.all(
    [...Array(concurrency).keys()].map(async () => {
      while (sent < n) {
        sent++;
        await one();
      }
    }),
  );
  agent.destroy();
  return statuses;
}

const folderBytes = (dir: string): number =>
  readdirSync(dir).reduce((sum, name) => sum + statSync(path.join(dir, name)).size, 0);
const records = (dir: string): Record<string, unknown>[] =>
  readdirSync(dir)
    .sort()
    .flatMap((name) => readFileSync(path.join(dir, name), 'utf8').split('\n'))
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return []; // torn: a write cut off (a full disk)
      }
    });

/**
 * A client without a valid token floods `hintbox serve` (issue 35): the audit folder, on a
 * small file system of its own, must not grow with every refused request.
 */
integrationSuite(
  'a flood of unauthenticated requests against hintbox serve',
  { timeout: 300_000, images: [ensureTestImages, ensureEverythingImage] },
  (suite) => {
    let serving: Serving | undefined;
    let mount: string;
    let auditDir: string;
    before(async () => {
      mount = scratchFolder('hintbox-flood-audit-');
      execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${TMPFS_BYTES},mode=0700`, 'tmpfs', mount]);
      suite.defer(() => execFileSync('umount', [mount]));
      auditDir = path.join(mount, 'audit');
      mkdirSync(auditDir, { mode: 0o700 });
      const profiles = scratchFolder('hintbox-flood-profiles-');
      writeFileSync(
        path.join(profiles, 'everything.yaml'),
        stringify({
          name: SERVER,
          server: { image: EVERYTHING_IMAGE, args: ['stdio'] },
          trust: 'trusted',
          split: false,
          network: 'none',
          limits: { pids: 128, memory: '256m' },
        }),
      );
      const tokens = path.join(scratchFolder('hintbox-flood-tokens-'), 'tokens.yaml');
      writeFileSync(tokens, stringify([{ name: 'alice', sha256: hashToken(ALICE), metrics: true }]));
      serving = suite.use(await serve([profiles, '--tokens', tokens], { HINTBOX_AUDIT_DIR: auditDir }));
    });

    // proves: DENIAL-BUDGET
    it('answers a request target that is not a URL 400, without a log line of its text', async () => {
      const { port } = new URL(serving!.url);
      const before = serving!.stderr().length;
      for (let i = 0; i < 200; i++) {
        const answer = await new Promise<string>((resolve, reject) => {
          const socket = connectSocket(Number(port), '127.0.0.1', () =>
            socket.write(
              `GET http://[${'x'.repeat(2000)}-${i} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`,
            ),
          );
          let text = '';
          socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
          socket.on('end', () => resolve(text));
          socket.on('error', reject);
        });
        assert.match(answer, /^HTTP\/1\.1 400 /);
      }
      const logged = serving!.stderr().slice(before);
      assert.equal(logged, '', 'nothing logged');
    });

    // proves: DENIAL-BUDGET
    it('records denials within a budget (per address and overall), counts them all, and serves a good client after', async (t) => {
      if (!serving) throw new Error('serve did not start');
      const before = folderBytes(auditDir);

      const started = performance.now();
      const statuses = await flood(`${serving.url}/mcp/${SERVER}`, FLOOD, { Authorization: 'Bearer wrong-token' });
      const seconds = (performance.now() - started) / 1000;
      assert.deepEqual([...statuses], [[401, FLOOD]]);
      const grown = folderBytes(auditDir) - before;
      const denied = records(auditDir).filter((r) => r.type === 'auth.denied').length;
      // The budget: per address a burst of 10 then one every 10 s; overall a burst of 100 then one a second.
      const most = 10 + Math.ceil(seconds / 10) + 1;
      assert.ok(
        denied <= most && grown < 16 * 1024,
        `${denied} auth.denied records (at most ${most}), the folder grew ${grown} bytes in ${seconds.toFixed(1)} s`,
      );
      const logged = serving
        .stderr()
        .split('\n')
        .filter((l) => l.includes(': 401 for ')).length;
      t.diagnostic(
        `${FLOOD} wrong-token requests in ${seconds.toFixed(1)} s: ${denied} records, ${logged} log lines, +${grown} bytes`,
      );
      assert.ok(logged <= most, `${logged} log lines for the denials (at most ${most})`);

      // The metrics count every denial all the same.
      const metrics = await fetch(`${serving.url}/metrics`, { headers: { Authorization: `Bearer ${ALICE}` } });
      assert.equal(metrics.status, 200);
      const samples = parseSamples(await metrics.text());
      assert.equal(sampleOf(samples, 'hintbox_auth_denials_total', { server: SERVER, status: '401' }), FLOOD);

      // A good client is served and audited.
      const client = await connect(`${serving.url}/mcp/${SERVER}`, ALICE);
      try {
        assert.equal(
          textOf(await client.callTool({ name: 'echo', arguments: { message: 'still here' } })),
          'Echo: still here',
        );
      } finally {
        await leave(client);
      }
      const calls = await auditOf<{ tool: string; caller: string; outcome: string }>(SERVER, {
        env: { HINTBOX_AUDIT_DIR: auditDir },
      });
      assert.deepEqual(
        calls.map((c) => [c.tool, c.caller, c.outcome]),
        [['echo', 'alice', 'ok']],
      );

      // What was left out is recorded as a count when its window closes (at the latest, when serve stops).
      await stop(serving);
      const skipped = records(auditDir).filter((r) => r.type === 'denials.skipped');
      const counted = skipped.reduce((sum, r) => sum + (r.skipped as number), 0);
      assert.equal(counted + denied, FLOOD, JSON.stringify(skipped));
      assert.deepEqual((skipped[0]?.addresses as { address: string }[] | undefined)?.[0]?.address, '127.0.0.1');
    });
  },
);
