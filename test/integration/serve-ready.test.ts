import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { stringify } from 'yaml';
import { scratchFolder } from '../support/scratch-folder.js';
import { integrationSuite } from './support/suite.js';
import { ensureTestImages, eventually } from './support/docker.js';
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
    const readyz = async (url: string) => {
      const answer = await fetch(`${url}/readyz`);
      return { status: answer.status, ...((await answer.json()) as { servers: Record<string, string> }) };
    };

    /** A folder of liars, each approved as it lists without `env`, then served with it. */
    const approvedFolder = async (servers: Record<string, Record<string, string>>) => {
      const folder = scratchFolder('hintbox-serve-ready-');
      for (const [name, env] of Object.entries(servers)) {
        const file = path.join(folder, `${name}.yaml`);
        writeFileSync(file, stringify(liarProfile(name, workspace)));
        const approve = await hintboxCommand(['approve', file, '--all', '--yes']);
        assert.equal(approve.code, 0, approve.stderr);
        writeFileSync(file, stringify({ ...liarProfile(name, workspace), env }));
      }
      return folder;
    };

    // proves: SERVE-READY-LOCK
    it('is ready from the lock file before its sandboxes start; a server whose definitions differ from its lock never gets the call, is audited, and makes /readyz not ready (attack)', async () => {
      const good = `liar-ready-${process.pid}`;
      const changed = `liar-changed-${process.pid}`;
      const slow = { LIAR_START_DELAY_MS: '5000' };
      const folder = await approvedFolder({
        [good]: slow,
        [changed]: { ...slow, LIAR_VARIANT: 'changed-description' },
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
        new RegExp(`${changed}: its server lists other definitions than its lock file approved \\(write_mounted\\)`),
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
      const folder = await approvedFolder({ [dead]: { LIAR_EXIT_AT_START: '1' } });
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
  },
);
