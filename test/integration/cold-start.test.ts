import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { lockFilePath, lockedDefinitions, readLockFile } from '../../src/approvals/lock-file.js';
import { containersOf, ensureTestImages, eventually, LIAR_IMAGE } from './support/docker.js';
import { auditOf, hintboxCommand, outcomeOf, runHintbox, writeProfile } from './support/hintbox-process.js';

/**
 * A cold start from the lock file (issue 12, item 3): with approved tools, `hintbox run`
 * answers `initialize` and `tools/list` from the lock file at once, while the server is
 * discovered and verified in the background; calls wait for that. The fixture's
 * LIAR_START_DELAY_MS makes the server slow to start, so that the client is served well before
 * the server could have answered anything.
 */
integrationSuite('cold start from the lock file', { timeout: 300_000, images: [ensureTestImages] }, (suite) => {
  const workspace = suite.workspace;

  let n = 0;
  /** An untrusted liar whose tools are approved as it lists them without `env`; then run with `env`. */
  const approvedLiar = async (env: Record<string, string>) => {
    const name = `liar-cold-${process.pid}-${n++}`;
    const profile = (extra: Record<string, string>) => ({
      name,
      server: { image: LIAR_IMAGE },
      trust: 'untrusted',
      mounts: [{ source: workspace, target: '/data' }],
      env: extra,
    });
    const file = writeProfile(profile({}));
    const approve = await hintboxCommand(['approve', file, '--all', '--yes']);
    assert.equal(approve.code, 0, approve.stderr);
    // The same profile file and server name, the server as it will run.
    writeFileSync(file, readFileSync(writeProfile(profile(env)), 'utf8'));
    return { name, file };
  };

  it('answers tools/list from the lock file before the server is up, then serves calls once it is verified', async () => {
    const { name, file } = await approvedLiar({ LIAR_START_DELAY_MS: '4000' });
    await using hintbox = await runHintbox(file);
    const listed = (await hintbox.client.listTools()).tools;
    assert.equal(
      /verified .* against its lock file/.test(hintbox.stderr()),
      false,
      'the list was answered before the server was verified',
    );
    const lock = readLockFile(lockFilePath(file), name);
    assert.ok(lock);
    assert.deepEqual(
      listed.map((t) => t.name).sort(),
      lockedDefinitions(lock).map((t) => t.name),
      'the approved tools, as locked',
    );
    const result = outcomeOf(await hintbox.client.callTool({ name: 'identity', arguments: {} }));
    assert.equal(result.ok, true, 'the call waited for the server and ran');
    assert.match(hintbox.stderr(), /verified .* against its lock file/);
  });

  // proves: PINS
  it('never shows the changed text of a server that changed since approved; a call made meanwhile is refused and never reaches it', async () => {
    const { name, file } = await approvedLiar({ LIAR_VARIANT: 'changed-description', LIAR_START_DELAY_MS: '2000' });
    const target = path.join(workspace, `${name}.txt`);
    await using hintbox = await runHintbox(file);
    let told = 0;
    hintbox.client.setNotificationHandler(ToolListChangedNotificationSchema, () => void told++);
    const first = (await hintbox.client.listTools()).tools.find((t) => t.name === 'write_mounted');
    assert.equal(first?.description, 'Claims to read. Writes a file.', 'the approved description, not the new one');
    // Sent while the server is not verified yet: it waits, then meets the changed definition.
    const refused = await hintbox.client.callTool({
      name: 'write_mounted',
      arguments: { path: `/data/${name}.txt`, content: 'x' },
    });
    assert.equal(refused.isError, true);
    assert.match(JSON.stringify(refused.content), /definition changed[\s\S]*- description/);
    assert.doesNotMatch(JSON.stringify(refused.content), /uploads your files/, 'not in the refusal either');
    assert.equal(existsSync(target), false, 'the server never got the call');
    await eventually(() => Promise.resolve(told > 0), 15_000, 'the client to be told its list changed');
    const now = (await hintbox.client.listTools()).tools.map((t) => t.name);
    assert.equal(now.includes('write_mounted'), false, 'the changed tool is hidden once verified');
    assert.equal(now.includes('identity'), true, 'unchanged tools stay');
    const rows = await auditOf<{ tool: string; decision: string; outcome: string | null }>(name);
    assert.deepEqual(
      rows.filter((r) => r.tool === 'write_mounted').map((r) => [r.decision, r.outcome]),
      [['blocked', 'not-run']],
    );
  });

  it('does not lose a change the server announces right after it was listed (a rug pull during discovery)', async () => {
    const { name, file } = await approvedLiar({ LIAR_CHANGE_AFTER_LIST: '1' });
    const target = path.join(workspace, `${name}-rug.txt`);
    await using hintbox = await runHintbox(file);
    let told = 0;
    hintbox.client.setNotificationHandler(ToolListChangedNotificationSchema, () => void told++);
    assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'identity', arguments: {} })).ok, true);
    await eventually(() => Promise.resolve(told > 0), 15_000, 'the client to be told its list changed');
    const names = (await hintbox.client.listTools()).tools.map((t) => t.name);
    assert.equal(names.includes('write_mounted'), false, 'the changed tool is hidden');
    const refused = await hintbox.client.callTool({
      name: 'write_mounted',
      arguments: { path: `/data/${name}-rug.txt`, content: 'x' },
    });
    assert.match(JSON.stringify(refused.content), /definition changed[\s\S]*- description/);
    assert.equal(existsSync(target), false);
  });

  it('ends the run when the server cannot be verified: the waiting call gets the reason, nothing is left', async () => {
    const { file } = await approvedLiar({ LIAR_EXIT_AT_START: '1' });
    const hintbox = await runHintbox(file);
    try {
      assert.ok((await hintbox.client.listTools()).tools.length > 0, 'served from the lock file');
      const result = await hintbox.client.callTool({ name: 'identity', arguments: {} });
      assert.equal(result.isError, true);
      assert.match(JSON.stringify(result.content), /could not verify/);
      await hintbox.exited;
      assert.match(hintbox.stderr(), /exiting at start on purpose|could not verify|closed/);
      assert.deepEqual(await containersOf(hintbox.pid), [], 'no container of the run is left');
    } finally {
      await hintbox[Symbol.asyncDispose]();
    }
    assert.equal(readFileSync(lockFilePath(file), 'utf8').includes('identity'), true, 'the lock file is untouched');
  });
});
