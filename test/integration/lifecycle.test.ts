import assert from 'node:assert/strict';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { LABEL_CLASS } from '../../src/engine/sandbox-labels.js';
import { containersOf, docker, ensureTestImages, eventually, LIAR_IMAGE } from './support/docker.js';
import { hintboxCommand, outcomeOf, runHintbox, writeProfile } from './support/hintbox-process.js';

const liarProfile = (suffix: string) =>
  writeProfile({
    name: `liar-${suffix}-${process.pid}`,
    server: { image: LIAR_IMAGE },
    trust: 'trusted',
    limits: { pids: 64 },
  });

integrationSuite('sandbox lifecycle', { timeout: 240_000, images: [ensureTestImages] }, () => {
  // proves: CLEANUP
  it('removes every container on SIGTERM', async () => {
    const hintbox = await runHintbox(liarProfile('term'));
    assert.ok((await containersOf(hintbox.pid)).length > 0, 'the run has containers');
    process.kill(hintbox.pid, 'SIGTERM');
    await hintbox.exited;
    assert.equal((await containersOf(hintbox.pid)).length, 0);
    await hintbox.client.close();
  });

  // proves: CLEANUP
  it('sweeps the containers of a run killed with SIGKILL at the next start, and leaves live sessions alone', async () => {
    await using live = await runHintbox(liarProfile('live'));
    const killed = await runHintbox(liarProfile('killed'));
    const orphans = await containersOf(killed.pid);
    assert.ok(orphans.length > 0, 'the killed run had containers');
    process.kill(killed.pid, 'SIGKILL');
    await killed.exited;
    await killed.client.close();
    assert.equal((await containersOf(killed.pid)).length, orphans.length, 'SIGKILL leaves the containers');

    const { code, stderr } = await hintboxCommand(['plan', liarProfile('next')]);
    assert.equal(code, 0, stderr);
    assert.match(stderr, /swept/);
    assert.equal((await containersOf(killed.pid)).length, 0, 'the next start swept them');
    assert.ok((await containersOf(live.pid)).length > 0, 'the live session keeps its containers');
    assert.equal(outcomeOf(await live.client.callTool({ name: 'identity', arguments: {} })).ok, true);
  });

  it('answers the pending call of a sandbox that dies with an error result and restarts it on the next call', async () => {
    await using hintbox = await runHintbox(liarProfile('death'));
    const { docker: d } = await docker();
    const [first] = await containersOf(hintbox.pid, false);
    assert.ok(first, 'the run has a container');
    const pending = hintbox.client.callTool({ name: 'hang', arguments: {} });
    await new Promise((r) => setTimeout(r, 300));
    await d.getContainer(first.Id).kill();
    const result = await pending;
    assert.equal(result.isError, true);
    assert.match(JSON.stringify(result.content), /died/);

    const next = outcomeOf(await hintbox.client.callTool({ name: 'identity', arguments: {} }));
    assert.equal(next.ok, true, 'the sandbox was started again');
    const now = await containersOf(hintbox.pid, false);
    assert.equal(now.length, 1);
    assert.notEqual(now[0]?.Id, first.Id);
    assert.equal(now[0]?.Labels[LABEL_CLASS], first.Labels[LABEL_CLASS]);
    await eventually(async () => (await containersOf(hintbox.pid)).length === 1, 10_000, 'the dead container removed');

    const crash = await hintbox.client.callTool({ name: 'crash', arguments: {} });
    assert.equal(crash.isError, true);
    assert.match(JSON.stringify(crash.content), /crashing on purpose/, "the error quotes the server's stderr");
    assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'identity', arguments: {} })).ok, true);
  });
});
