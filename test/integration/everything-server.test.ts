import assert from 'node:assert/strict';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { CreateMessageRequestSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { LABEL_CLASS } from '../../src/engine/sandbox-labels.js';
import { containersOf, docker, ensureEverythingImage, eventually, EVERYTHING_IMAGE } from './support/docker.js';
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
integrationSuite(
  'the everything reference server under hintbox run',
  { timeout: 240_000, images: [ensureEverythingImage] },
  (suite) => {
    it('lists its tools and runs an approved read-only one of this trusted server without asking', async () => {
      const approve = await hintboxCommand(['approve', PROFILE, '--all', '--yes']);
      assert.equal(approve.code, 0, approve.stderr);
      const hintbox = await runHintbox(PROFILE);
      const pid = hintbox.pid;
      try {
        const { tools } = await hintbox.client.listTools();
        const names = tools.map((t) => t.name);
        for (const name of UNCONDITIONAL_TOOLS)
          assert.ok(names.includes(name), `${name} is listed: ${names.join(', ')}`);
        assert.deepEqual(
          tools.find((t) => t.name === 'echo')?.annotations,
          { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
          'as the server claims them',
        );

        const echo = await hintbox.client.callTool({ name: 'echo', arguments: { message: 'through hintbox' } });
        assert.deepEqual(echo.content, [{ type: 'text', text: 'Echo: through hintbox' }]);
        const sum = await hintbox.client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } });
        assert.deepEqual(sum.content, [{ type: 'text', text: 'The sum of 2 and 3 is 5.' }]);
        assert.equal(
          hintbox.asked.length,
          0,
          'approved read-only tools of a trusted server run without a confirmation',
        );
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

    suite.describe('everything besides tools passes through', (group) => {
      let hintbox: Awaited<ReturnType<typeof runHintbox>>;
      const sampled: unknown[] = [];

      before(async () => {
        const approve = await hintboxCommand(['approve', PROFILE, '--all', '--yes']);
        assert.equal(approve.code, 0, approve.stderr);
        hintbox = group.use(await runHintbox(PROFILE, { capabilities: { sampling: {} } }));
        hintbox.client.setRequestHandler(CreateMessageRequestSchema, (request) => {
          sampled.push(request.params);
          return { role: 'assistant', content: { type: 'text', text: 'sampled through hintbox' }, model: 'test-model' };
        });
      });

      it('lists and reads its resources, and reads one of a template', async () => {
        const { resources } = await hintbox.client.listResources();
        const uris = resources.map((r) => r.uri);
        assert.ok(uris.includes('demo://resource/static/document/architecture.md'), uris.join(', '));
        const read = await hintbox.client.readResource({ uri: 'demo://resource/static/document/architecture.md' });
        assert.match((read.contents[0] as { text: string }).text, /\S/);
        const { resourceTemplates } = await hintbox.client.listResourceTemplates();
        assert.ok(resourceTemplates.some((t) => t.uriTemplate === 'demo://resource/dynamic/text/{resourceId}'));
        const templated = await hintbox.client.readResource({ uri: 'demo://resource/dynamic/text/1' });
        assert.match((templated.contents[0] as { text: string }).text, /^Resource 1: This is a plaintext resource/);
      });

      it('gets a prompt with arguments and completes a prompt argument and a template variable', async () => {
        const prompt = await hintbox.client.getPrompt({
          name: 'args-prompt',
          arguments: { city: 'Lyon', state: 'Rhône' },
        });
        assert.deepEqual(prompt.messages[0]?.content, { type: 'text', text: "What's weather in Lyon, Rhône?" });
        const department = await hintbox.client.complete({
          ref: { type: 'ref/prompt', name: 'completable-prompt' },
          argument: { name: 'department', value: 'S' },
        });
        assert.deepEqual(department.completion.values, ['Sales', 'Support']);
        const id = await hintbox.client.complete({
          ref: { type: 'ref/resource', uri: 'demo://resource/dynamic/text/{resourceId}' },
          argument: { name: 'resourceId', value: '12' },
        });
        assert.deepEqual(id.completion.values, ['12']);
      });

      it('passes its log messages', async () => {
        const messages: unknown[] = [];
        hintbox.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void messages.push(n.params));
        await hintbox.client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
        await eventually(async () => messages.length > 0, 10_000, 'a log message');
        await hintbox.client.callTool({ name: 'toggle-simulated-logging', arguments: {} }); // stops its timer
      });

      it('passes its sampling request to a client that supports sampling', async () => {
        const result = await hintbox.client.callTool({
          name: 'trigger-sampling-request',
          arguments: { prompt: 'Say hi' },
        });
        assert.match(JSON.stringify(result.content), /sampled through hintbox/);
        assert.equal(sampled.length, 1);
      });

      it("shows its elicitation as the server's question", async () => {
        const before = hintbox.asked.length;
        await hintbox.client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
        const messages = hintbox.asked.slice(before).map((a) => a.message);
        assert.ok(
          messages.some((m) =>
            m.startsWith('The MCP server "everything" asks (its own question, not hintbox\'s): Please provide inputs'),
          ),
          messages.join('\n---\n'),
        );
      });
    });

    it('refuses its sampling request for a client that does not support sampling', async () => {
      const approve = await hintboxCommand(['approve', PROFILE, '--all', '--yes']);
      assert.equal(approve.code, 0, approve.stderr);
      await using hintbox = await runHintbox(PROFILE);
      const result = await hintbox.client.callTool({
        name: 'trigger-sampling-request',
        arguments: { prompt: 'Say hi' },
      });
      assert.match(JSON.stringify(result.content), /the client does not support sampling/);
    });
  },
);
