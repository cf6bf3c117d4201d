import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { stringify } from 'yaml';
import { scratchFolder } from '../support/scratch-folder.js';
import { integrationSuite } from './support/suite.js';
import { containersOf, ensureTestImages, eventually } from './support/docker.js';
import { auditOf, hintboxCommand, outcomeOf } from './support/hintbox-process.js';
import { connect, leave, liarProfile, serve, textOf } from './support/serve-process.js';

/**
 * `hintbox serve` ready before its sandboxes start (issue 34): a server with approved tools in
 * its lock file takes sessions and answers lists from the lock at once (`serving-from-lock`),
 * while it is verified in the background; calls wait for that. /readyz says which state each
 * server is in: a server whose image changed so that it lists other definitions than its lock
 * approved is refused and makes serve not ready, and so does one that cannot be verified.
 */
integrationSuite(
  'hintbox serve: ready from the lock file',
  { timeout: 300_000, images: [ensureTestImages] },
  (suite) => {
    const workspace = suite.workspace;
    const readyz = async (url: string, query = '') => {
      const answer = await fetch(`${url}/readyz${query}`);
      return { status: answer.status, ...((await answer.json()) as { servers: Record<string, string> }) };
    };

    /** How a liar is approved (`approvedEnv`, default none) and then served (`env`, `profile`: more profile fields). */
    type Served = { env?: Record<string, string>; approvedEnv?: Record<string, string>; profile?: object };
    /** Writes a liar's profile (with `env`) and approves what it lists so. */
    const approve = async (file: string, name: string, served: Served, env = served.approvedEnv) => {
      writeFileSync(file, stringify({ ...liarProfile(name, workspace), ...served.profile, ...(env ? { env } : {}) }));
      const approved = await hintboxCommand(['approve', file, '--all', '--yes']);
      assert.equal(approved.code, 0, approved.stderr);
    };
    /** A folder of liars, each approved as it lists with `approvedEnv`, then served with `env`. */
    const approvedFolder = async (servers: Record<string, Served>) => {
      const folder = scratchFolder('hintbox-serve-ready-');
      for (const [name, served] of Object.entries(servers)) {
        const file = path.join(folder, `${name}.yaml`);
        await approve(file, name, served);
        writeFileSync(file, stringify({ ...liarProfile(name, workspace), ...served.profile, env: served.env ?? {} }));
      }
      return folder;
    };
    /** Settled: no server is still starting or served from its lock unverified. */
    const settled = (servers: Record<string, string>) =>
      Object.values(servers).every((s) => s !== 'starting' && s !== 'serving-from-lock');

    // proves: SERVE-READY-LOCK
    it('is ready from the lock file before its sandboxes start; a server whose definitions differ from its lock never gets the call, is audited, and makes /readyz not ready (attack)', async () => {
      const good = `liar-ready-${process.pid}`;
      const changed = `liar-changed-${process.pid}`;
      const slow = { LIAR_START_DELAY_MS: '5000' };
      const folder = await approvedFolder({
        [good]: { env: slow },
        [changed]: { env: { ...slow, LIAR_VARIANT: 'changed-description' } },
      });
      const target = path.join(workspace, `${changed}.txt`);
      await using serving = await serve([folder], {}, undefined, 'listening');

      // Ready while both servers are still starting (each sleeps 5 s before it answers anything).
      await eventually(async () => (await readyz(serving.url)).status === 200, 10_000, 'ready from the lock files');
      const early = await readyz(serving.url);
      assert.deepEqual(early.servers, { [good]: 'serving-from-lock', [changed]: 'serving-from-lock' });
      assert.doesNotMatch(serving.stderr(), /verified .* against its lock file/, 'nothing was verified yet');

      const client = await connect(`${serving.url}/mcp/${changed}`);
      const listed = (await client.listTools()).tools.find((t) => t.name === 'write_mounted');
      assert.equal(listed?.description, 'Claims to read. Writes a file.', 'the approved description, from the lock');
      // Sent before the server is verified: it waits, then meets the changed definition.
      const refused = await client.callTool({
        name: 'write_mounted',
        arguments: { path: `/data/${changed}.txt`, content: 'x' },
      });
      assert.equal(refused.isError, true);
      assert.match(textOf(refused), /definition changed[\s\S]*- description/);
      assert.doesNotMatch(JSON.stringify(refused.content), /uploads your files/);
      assert.equal(existsSync(target), false, 'the server never got the call: no bytes written');
      await leave(client);

      const other = await connect(`${serving.url}/mcp/${good}`);
      assert.equal(
        outcomeOf(await other.callTool({ name: 'identity', arguments: {} })).ok,
        true,
        'the call waited, then ran',
      );
      await leave(other);

      await eventually(
        async () => (await readyz(serving.url)).servers[changed] === 'differs-from-lock',
        60_000,
        'the difference in /readyz',
      );
      const after = await readyz(serving.url);
      assert.equal(after.status, 503, 'not ready: a server differs from its lock file');
      assert.deepEqual(after.servers, { [good]: 'ready', [changed]: 'differs-from-lock' });
      assert.match(
        serving.stderr(),
        new RegExp(
          `${changed}: its server lists other definitions than its lock file approved \\(changed: write_mounted\\)`,
        ),
      );
      const rows = await auditOf<{ tool: string; decision: string; outcome: string | null }>(changed);
      assert.deepEqual(
        rows.filter((r) => r.tool === 'write_mounted').map((r) => [r.decision, r.outcome]),
        [['blocked', 'not-run']],
      );
      assert.equal(existsSync(target), false);
      assert.equal(readFileSync(path.join(folder, `${changed}.lock.json`), 'utf8').includes('Writes a file.'), true);
    });

    it('says failed in /readyz and logs it when a server cannot be verified; its waiting call gets the reason', async () => {
      const dead = `liar-dead-${process.pid}`;
      const folder = await approvedFolder({ [dead]: { env: { LIAR_EXIT_AT_START: '1' } } });
      await using serving = await serve([folder], {}, undefined, 'listening');
      await eventually(async () => (await readyz(serving.url)).servers[dead] === 'failed', 60_000, 'failed in /readyz');
      assert.equal((await readyz(serving.url)).status, 503);
      assert.match(serving.stderr(), new RegExp(`${dead}: the server could not be verified`));
      // A new client opens the server again from its lock file, and its call waits for that verification.
      const client = await connect(`${serving.url}/mcp/${dead}`);
      const result = await client.callTool({ name: 'identity', arguments: {} });
      assert.equal(result.isError, true);
      assert.match(textOf(result), /could not verify/);
      await client.close().catch(() => undefined);
      assert.equal((await readyz(serving.url)).servers[dead], 'failed');
    });

    // proves: SERVE-READY-LOCK
    it('verifies a clients: separate server against its lock before /readyz?verified counts it; one whose image differs, or that cannot start, is not ready, nor is one whose client session differs (attack)', async () => {
      const good = `sep-good-${process.pid}`;
      const changed = `sep-changed-${process.pid}`;
      const dead = `sep-dead-${process.pid}`;
      const separate = { clients: 'separate' };
      const slow = { LIAR_START_DELAY_MS: '5000' };
      const folder = await approvedFolder({
        [good]: { env: slow, profile: separate },
        [changed]: { env: { LIAR_VARIANT: 'changed-description' }, profile: separate },
        [dead]: { env: { LIAR_EXIT_AT_START: '1' }, profile: separate },
      });
      const target = path.join(workspace, `${changed}.txt`);
      await using serving = await serve([folder], {}, undefined, 'listening');

      await eventually(async () => (await readyz(serving.url)).servers[good] !== undefined, 10_000, 'listening');
      const early = await readyz(serving.url, '?verified');
      assert.equal(early.servers[good], 'serving-from-lock', 'not verified yet (its server sleeps 5 s)');
      assert.equal(early.status, 503, 'nothing verified yet: not ready for a rollout');

      await eventually(async () => settled((await readyz(serving.url)).servers), 90_000, 'every server verified');
      const after = await readyz(serving.url, '?verified');
      assert.deepEqual(after.servers, { [good]: 'ready', [changed]: 'differs-from-lock', [dead]: 'failed' });
      assert.equal(after.status, 503, 'one differs from its lock, one cannot start: not ready');
      assert.equal((await readyz(serving.url)).status, 503, 'nor ready without ?verified');
      assert.match(
        serving.stderr(),
        new RegExp(
          `${changed}: its server lists other definitions than its lock file approved \\(changed: write_mounted\\)`,
        ),
      );
      assert.match(serving.stderr(), new RegExp(`${dead}: the server could not be verified`));
      assert.deepEqual(await containersOf(serving.child.pid), [], 'each verification removed its sandbox');

      // The guard holds as before: the changed tool is refused, nothing written.
      const client = await connect(`${serving.url}/mcp/${changed}`);
      const refused = await client.callTool({
        name: 'write_mounted',
        arguments: { path: `/data/${changed}.txt`, content: 'x' },
      });
      assert.equal(refused.isError, true);
      assert.match(textOf(refused), /definition changed/);
      assert.equal(existsSync(target), false, 'the server never got the call');
      await leave(client);

      // The lock file of the good one is approved anew for another image (a ConfigMap updated in
      // place, no SIGHUP): the next client's session is verified against it, and differs: that
      // session's call is refused, and /readyz stays as the start verified (only a start or a
      // reload sets it: a server must not take the process out of service at will later).
      await approve(
        path.join(folder, `${good}.yaml`),
        good,
        { profile: separate },
        { LIAR_VARIANT: 'changed-description' },
      );
      writeFileSync(
        path.join(folder, `${good}.yaml`),
        stringify({ ...liarProfile(good, workspace), ...separate, env: slow }),
      );
      const next = await connect(`${serving.url}/mcp/${good}`);
      const call = await next.callTool({
        name: 'write_mounted',
        arguments: { path: `/data/${good}.txt`, content: 'x' },
      });
      assert.equal(
        call.isError,
        true,
        'refused: the running server lists another definition than the lock now approves',
      );
      await leave(next);
      assert.equal(
        (await readyz(serving.url)).servers[good],
        'ready',
        "a client session's verification leaves /readyz",
      );
      assert.equal(existsSync(path.join(workspace, `${good}.txt`)), false);
    });

    // proves: SERVE-READY-LOCK
    it('counts a tool the lock file does not have, and an approved tool the server no longer lists, as a difference (attack)', async () => {
      const added = `liar-added-${process.pid}`;
      const removed = `liar-removed-${process.pid}`;
      const openWorld = { LIAR_VARIANT: 'claims-open-world' };
      const folder = await approvedFolder({
        [added]: { env: openWorld }, // lists `fetch`, which its lock never approved
        [removed]: { approvedEnv: openWorld }, // its lock approved `fetch`, which it no longer lists
      });
      await using serving = await serve([folder], {}, undefined, 'listening');
      await eventually(async () => settled((await readyz(serving.url)).servers), 90_000, 'both verified');
      const after = await readyz(serving.url, '?verified');
      assert.deepEqual(after.servers, { [added]: 'differs-from-lock', [removed]: 'differs-from-lock' });
      assert.equal(after.status, 503);
      assert.equal((await readyz(serving.url)).status, 503);
      assert.match(
        serving.stderr(),
        new RegExp(
          `${added}: its server lists other definitions than its lock file approved \\(not in the lock: fetch\\)`,
        ),
      );
      assert.match(
        serving.stderr(),
        new RegExp(
          `${removed}: its server lists other definitions than its lock file approved \\(approved, not listed: fetch\\)`,
        ),
      );
    });

    it('reads ?verified by its value: ?verified, =1 and =true count only verified servers, =0 or =false is refused (400)', async () => {
      const slowly = `liar-slowly-${process.pid}`;
      const folder = await approvedFolder({ [slowly]: { env: { LIAR_START_DELAY_MS: '20000' } } });
      await using serving = await serve([folder], {}, undefined, 'listening');
      await eventually(async () => (await readyz(serving.url)).status === 200, 10_000, 'ready from the lock file');
      for (const query of ['?verified', '?verified=', '?verified=1', '?verified=true']) {
        assert.equal((await readyz(serving.url, query)).status, 503, `${query}: not verified yet`);
      }
      for (const query of ['?verified=false', '?verified=0', '?verified=yes', '?verified=1&verified=0']) {
        const answer = await fetch(`${serving.url}/readyz${query}`);
        assert.equal(answer.status, 400, query);
        assert.match(((await answer.json()) as { error: string }).error, /verified/);
      }
      assert.equal((await readyz(serving.url)).servers[slowly], 'serving-from-lock', 'it was not verified yet');
    });
  },
);
