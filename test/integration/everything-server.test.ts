import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LABEL_CLASS } from '../../src/engine/docker/container-spec.js';
import {
  assertNoLeftovers,
  containersOf,
  docker,
  ensureEverythingImage,
  eventually,
  EVERYTHING_IMAGE,
} from './support/docker.js';
import { auditOf, copyOfFixtureProfile, hintboxCommand, runHintbox } from './support/hintbox-process.js';

/** A copy: approving it writes the lock file beside the copy, not into the repository. */
const PROFILE = copyOfFixtureProfile('everything/everything.yaml');

/**
 * The tools the server registers whatever its client declared. Others appear only when the
 * client (hintbox, towards the server) declares a capability at `initialize`: get-roots-list
 * (roots), trigger-elicitation-request (elicitation), trigger-url-elicitation (elicitation.url),
 * trigger-sampling-request (sampling), the *-async ones (tasks). simulate-research-query is
 * registered for every client, after `initialize`, and needs task-augmented calls.
 */
const UNCONDITIONAL_TOOLS = [
  'echo',
  'get-annotated-message',
  'get-env',
  'get-resource-links',
  'get-resource-reference',
  'get-structured-content',
  'get-sum',
  'get-tiny-image',
  'gzip-file-as-resource',
  'toggle-simulated-logging',
  'toggle-subscriber-updates',
  'trigger-long-running-operation',
  'simulate-research-query',
];

/** The real @modelcontextprotocol/server-everything from npm, under `hintbox run`. */
describe('the everything reference server under hintbox run', { timeout: 240_000 }, () => {
  after(assertNoLeftovers);
  before(ensureEverythingImage);

  it('lists its tools and runs an approved read-only one of this trusted server without asking', async () => {
    const approve = await hintboxCommand(['approve', PROFILE, '--all']);
    assert.equal(approve.code, 0, approve.stderr);
    const hintbox = await runHintbox(PROFILE);
    const pid = hintbox.pid;
    try {
      const { tools } = await hintbox.client.listTools();
      const names = tools.map((t) => t.name);
      for (const name of UNCONDITIONAL_TOOLS) assert.ok(names.includes(name), `${name} is listed: ${names.join(', ')}`);
      assert.deepEqual(
        tools.find((t) => t.name === 'echo')?.annotations,
        { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
        'as the server claims them',
      );

      const echo = await hintbox.client.callTool({ name: 'echo', arguments: { message: 'through hintbox' } });
      assert.deepEqual(echo.content, [{ type: 'text', text: 'Echo: through hintbox' }]);
      const sum = await hintbox.client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } });
      assert.deepEqual(sum.content, [{ type: 'text', text: 'The sum of 2 and 3 is 5.' }]);
      assert.equal(hintbox.asked.length, 0, 'approved read-only tools of a trusted server run without a confirmation');
      const [last] = await auditOf<{ tool: string; decision: string; decidedBy: string; sandbox: string }>(
        'everything',
      );
      assert.deepEqual(
        { tool: last?.tool, decision: last?.decision, decidedBy: last?.decidedBy, sandbox: last?.sandbox },
        { tool: 'get-sum', decision: 'allowed', decidedBy: 'auto', sandbox: 'nomounts-offline' },
      );

      // One sandbox (split: false), without mounts of the server's and without a network.
      const containers = await containersOf(pid, false);
      assert.deepEqual(
        containers.map((c) => c.Labels[LABEL_CLASS]),
        ['nomounts-offline'],
      );
      const { docker: d } = await docker();
      const info = await d.getContainer(containers[0]?.Id as string).inspect();
      assert.equal(info.HostConfig.NetworkMode, 'none');
      assert.equal(info.Image, (await d.getImage(EVERYTHING_IMAGE).inspect()).Id);
    } finally {
      await hintbox.client.close();
      await hintbox.exited;
    }
    await eventually(async () => (await containersOf(pid)).length === 0, 15_000, 'no containers after disconnect');
  });
});
