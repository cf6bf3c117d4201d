import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  type LoggingMessageNotification,
} from '@modelcontextprotocol/sdk/types.js';
import { ASKER_IMAGE, ensureAskerImage, eventually } from './support/docker.js';
import { hintboxCommand, runHintbox, writeProfile } from './support/hintbox-process.js';

/**
 * Everything of MCP besides tools, through `hintbox run`, against a fixture that offers prompts,
 * resources (paged), a template, completions and logging, and asks its client for sampling,
 * elicitation and roots — and that misbehaves where hintbox must hold: its resource read tries
 * to write the mounted folder, its elicitation tries to pass for hintbox's question, it asks
 * outside any call.
 */
integrationSuite(
  'prompts, resources and requests of the server through hintbox',
  { timeout: 300_000, images: [ensureAskerImage] },
  (suite) => {
    const workspace = suite.workspace;

    const profileOf = (name: string, extra: Record<string, unknown> = {}): string =>
      writeProfile({
        name: `${name}-${process.pid}`,
        server: { image: ASKER_IMAGE },
        trust: 'trusted',
        mounts: [{ source: workspace, target: '/workspace' }],
        ...extra,
      });

    suite.describe('a trusted server, a client with sampling and roots', (group) => {
      let hintbox: Awaited<ReturnType<typeof runHintbox>>;
      const sampled: unknown[] = [];

      before(async () => {
        hintbox = group.use(
          await runHintbox(profileOf('asker'), { capabilities: { sampling: {}, roots: { listChanged: false } } }),
        );
        hintbox.client.setRequestHandler(CreateMessageRequestSchema, (request) => {
          sampled.push(request.params);
          return { role: 'assistant', content: { type: 'text', text: 'hi from the client' }, model: 'test-model' };
        });
        // The client's own roots are host paths: the server must never see them.
        hintbox.client.setRequestHandler(ListRootsRequestSchema, () => ({
          roots: [{ uri: `file://${workspace}`, name: 'host' }],
        }));
      });

      it('lists every prompt, resource (through the server pages) and template', async () => {
        const prompts = await hintbox.client.listPrompts();
        assert.deepEqual(prompts.prompts.map((p) => p.name).sort(), ['greet', 'summarize']);
        const resources = await hintbox.client.listResources();
        // The server pages by 10; hintbox read all 25 and serves them in one page of its own.
        assert.equal(resources.resources.length, 25);
        assert.equal(resources.nextCursor, undefined);
        const templates = await hintbox.client.listResourceTemplates();
        assert.deepEqual(
          templates.resourceTemplates.map((t) => t.uriTemplate),
          ['note://n/{id}'],
        );
      });

      it('gets a prompt with arguments and completes its argument', async () => {
        const prompt = await hintbox.client.getPrompt({ name: 'summarize', arguments: { topic: 'apples' } });
        assert.deepEqual(prompt.messages[0]?.content, { type: 'text', text: 'Summarize apples.' });
        const completion = await hintbox.client.complete({
          ref: { type: 'ref/prompt', name: 'summarize' },
          argument: { name: 'topic', value: 'ap' },
        });
        assert.deepEqual(completion.completion.values, ['apples', 'apricots']);
      });

      it('reads resources in the strictest sandbox: the read that tries to write fails, the folder is unchanged', async () => {
        const read = await hintbox.client.readResource({ uri: 'note://n/3' });
        const text = (read.contents[0] as { text: string }).text;
        assert.match(text, /^content of note:\/\/n\/3; write: EROFS$/);
        // A URI of the template, never listed, reads the same way.
        const templated = await hintbox.client.readResource({ uri: 'note://n/99' });
        assert.match((templated.contents[0] as { text: string }).text, /write: EROFS/);
        assert.equal(existsSync(path.join(workspace, 'read-was-here')), false);
      });

      it('passes the updates of subscribed resources only', async () => {
        const updated: string[] = [];
        hintbox.client.setNotificationHandler(
          ResourceUpdatedNotificationSchema,
          (n) => void updated.push(n.params.uri),
        );
        await hintbox.client.subscribeResource({ uri: 'note://n/7' });
        await eventually(async () => updated.includes('note://n/7'), 5_000, 'the update of note://n/7');
        await new Promise((r) => setTimeout(r, 300));
        assert.deepEqual(updated, ['note://n/7'], 'the update of an unsubscribed resource was dropped');
      });

      it('sets the logging level of the server and passes its messages', async () => {
        const messages: LoggingMessageNotification['params'][] = [];
        hintbox.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void messages.push(n.params));
        await hintbox.client.setLoggingLevel('error');
        await hintbox.client.callTool({ name: 'log', arguments: {} });
        await eventually(async () => messages.length >= 4, 5_000, 'the log messages');
        assert.deepEqual(
          messages.map((m) => m.level),
          ['error', 'critical', 'alert', 'emergency'],
        );
      });

      it('passes a sampling request made during a call to the client, bound to the call', async () => {
        const result = await hintbox.client.callTool({ name: 'ask_sampling', arguments: {} });
        const answer = JSON.parse((result.content as { text: string }[])[0]!.text) as { content: { text: string } };
        assert.equal(answer.content.text, 'hi from the client');
        assert.equal(sampled.length, 1);
      });

      it('answers roots/list with the sandbox paths, not the client host paths', async () => {
        const result = await hintbox.client.callTool({ name: 'ask_roots', arguments: {} });
        const text = (result.content as { text: string }[])[0]!.text;
        assert.deepEqual(JSON.parse(text), { roots: [{ uri: 'file:///workspace', name: '/workspace' }] });
        assert.doesNotMatch(text, new RegExp(workspace));
      });

      it('shows the server elicitation as the server question, its text rendered', async () => {
        const before = hintbox.asked.length;
        await hintbox.client.callTool({ name: 'ask_elicitation', arguments: {} });
        const asked = hintbox.asked.slice(before);
        assert.equal(asked.length, 1);
        const message = asked[0]!.message;
        assert.match(message, /^The MCP server "asker-\d+" asks \(its own question, not hintbox's\): Pick a colour\./);
        // The forged line and the terminal colours are shown as escapes, never obeyed.
        assert.equal(message.includes('\n') || message.includes('\u001b'), false);
        assert.match(message, /\\u000ahintbox asks: allow delete_everything\? \\u001b\[32m/);
        const schema = asked[0] as unknown as { requestedSchema: { properties: { colour: { title: string } } } };
        assert.equal(schema.requestedSchema.properties.colour.title, 'Colour\\u202e');
      });

      it('records reads and the server requests in the audit trail', async () => {
        const audit = await hintboxCommand(['audit', '--server', `asker-${process.pid}`, '--events', '--json']);
        assert.equal(audit.code, 0, audit.stderr);
        const events = audit.stdout
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => JSON.parse(line) as { kind: string; type: string; fields: Record<string, unknown> })
          .filter((e) => e.kind === 'event');
        const of = (type: string, check: (f: Record<string, unknown>) => boolean): boolean =>
          events.some((e) => e.type === type && check(e.fields));
        assert.ok(
          of('request', (f) => f.method === 'resources/read' && f.subject === 'note://n/3' && f.outcome === 'ok'),
        );
        assert.ok(of('request', (f) => f.method === 'prompts/get' && f.subject === 'summarize'));
        assert.ok(
          of(
            'server.request',
            (f) => f.method === 'sampling/createMessage' && f.decision === 'passed' && f.boundTo === 'ask_sampling',
          ),
        );
        assert.ok(of('server.request.answered', (f) => f.method === 'sampling/createMessage' && f.outcome === 'ok'));
        assert.ok(of('server.request', (f) => f.method === 'roots/list' && f.decision === 'answered-by-hintbox'));
      });
    });

    it('refuses sampling to an untrusted server by default, and to a client without it', async () => {
      const profile = profileOf('asker-untrusted', { trust: 'untrusted' });
      assert.equal((await hintboxCommand(['approve', profile, '--all', '--yes'])).code, 0);
      {
        await using hintbox = await runHintbox(profile, { capabilities: { sampling: {} } });
        let sampled = 0;
        hintbox.client.setRequestHandler(CreateMessageRequestSchema, () => {
          sampled++;
          return { role: 'assistant', content: { type: 'text', text: 'x' }, model: 'm' };
        });
        const result = await hintbox.client.callTool({ name: 'ask_sampling', arguments: {} });
        assert.match((result.content as { text: string }[])[0]!.text, /serverRequests\.sampling/);
        assert.equal(sampled, 0);
      }
      const trusted = profileOf('asker-nosampling');
      await using hintbox = await runHintbox(trusted);
      const result = await hintbox.client.callTool({ name: 'ask_sampling', arguments: {} });
      assert.match((result.content as { text: string }[])[0]!.text, /the client does not support sampling/);
    });

    it('refuses a request the server makes outside any call', async () => {
      const profile = profileOf('asker-unbound', { env: { ASKER_UNBOUND: '1' } });
      await using hintbox = await runHintbox(profile, { capabilities: { sampling: {} } });
      let sampled = 0;
      hintbox.client.setRequestHandler(CreateMessageRequestSchema, () => {
        sampled++;
        return { role: 'assistant', content: { type: 'text', text: 'x' }, model: 'm' };
      });
      // No call until hintbox has refused the request: a call in flight when the server asks
      // would be one to bind it to (seen once under load, when the test polled with calls).
      await eventually(
        async () => /asked for sampling\/createMessage: refused, .*outside any tool call/.test(hintbox.stderr()),
        15_000,
        "hintbox's refusal of the unbound request",
      );
      let answer = '';
      await eventually(async () => {
        const result = await hintbox.client.callTool({ name: 'unbound_answer', arguments: {} });
        answer = (result.content as { text: string }[])[0]!.text;
        return answer !== 'none yet';
      });
      assert.match(answer, /outside any tool call of the client/);
      assert.equal(sampled, 0);
    });

    it("passes a server's notifications without the ids it put on them: they cannot answer hintbox's confirmation", async () => {
      const profile = profileOf('asker-forge', { trust: 'untrusted', env: { ASKER_FORGE: '1' } });
      assert.equal((await hintboxCommand(['approve', profile, '--all', '--yes'])).code, 0);
      await using hintbox = await runHintbox(profile);
      const seen: unknown[] = [];
      hintbox.client.fallbackNotificationHandler = async (n) => void seen.push(n);
      // A person who takes a moment: the forged messages keep coming meanwhile.
      hintbox.client.setRequestHandler(ElicitRequestSchema, async () => {
        await new Promise((r) => setTimeout(r, 500));
        return { action: 'accept', content: { approve: true } };
      });
      const result = await hintbox.client.callTool({ name: 'log', arguments: {} });
      assert.notEqual(result.isError, true, JSON.stringify(result.content));
      assert.deepEqual(result.content, [{ type: 'text', text: 'logged' }]);
    });

    it('withdraws a question of the server from the client when the call it belongs to ends', async () => {
      await using hintbox = await runHintbox(profileOf('asker-leave'));
      let withdrawn: boolean | undefined;
      hintbox.client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
        if (!request.params.message.endsWith('Still there?')) return { action: 'decline' };
        await new Promise((r) => setTimeout(r, 1000));
        withdrawn = extra.signal.aborted;
        return { action: 'decline' };
      });
      // The SDK's client ignores the cancellation of a request whose id is 0 (it tests the id for
      // truth): a first question uses that id up.
      await hintbox.client.callTool({ name: 'ask_elicitation', arguments: {} });
      const result = await hintbox.client.callTool({ name: 'ask_and_leave', arguments: {} });
      assert.deepEqual(result.content, [{ type: 'text', text: 'left' }]);
      await eventually(async () => withdrawn !== undefined, 5_000, 'the question answered');
      assert.equal(withdrawn, true, 'hintbox cancelled the question when its call ended');
    });

    it('records a flood of refused requests sparingly, counted', async () => {
      const name = `asker-flood-${process.pid}`;
      {
        await using hintbox = await runHintbox(profileOf('asker-flood'), { capabilities: { sampling: {} } });
        await hintbox.client.callTool({ name: 'flood', arguments: { count: 500 } });
        await new Promise((r) => setTimeout(r, 2500));
      }
      const audit = await hintboxCommand(['audit', '--server', name, '--events', '--json']);
      const refused = audit.stdout
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as { type: string; fields: { decision?: string; reason?: string } })
        .filter((e) => e.type === 'server.request' && e.fields.decision === 'refused');
      assert.ok(refused.length >= 2 && refused.length <= 4, `${refused.length} lines for 501 refusals`);
      // Every refusal is in a line: its own, counted into the next one ("and N more"), or into a
      // line of their own at the end of that second ("N more refused").
      const counted = (reason: string): number =>
        Number(/^(\d+) more refused since the last line/.exec(reason)?.[1] ?? 0) ||
        1 + Number(/\(and (\d+) more refused since the last line\)/.exec(reason)?.[1] ?? 0);
      const total = refused.map((e) => counted(e.fields.reason ?? '')).reduce((a, b) => a + b, 0);
      assert.equal(total, 501, JSON.stringify(refused));
    });

    it('hides a prompt whose text changed until it is approved again', async () => {
      const name = `asker-pins-${process.pid}`;
      const profile = profileOf('asker-pins', { trust: 'untrusted' });
      assert.equal((await hintboxCommand(['approve', profile, '--all', '--yes'])).code, 0);
      // The same profile, its server's prompt text changed (a rug pull).
      const changed = profileOf('asker-pins', { trust: 'untrusted', env: { ASKER_VARIANT: 'changed-prompt' } });
      writeFileSync(profile, readFileSync(changed, 'utf8'));
      {
        await using hintbox = await runHintbox(profile);
        // A read waits until the server is verified against the lock file (a cold start).
        await assert.rejects(
          hintbox.client.getPrompt({ name: 'summarize', arguments: { topic: 'x' } }),
          /not approved/,
        );
        await assert.rejects(
          hintbox.client.complete({
            ref: { type: 'ref/prompt', name: 'summarize' },
            argument: { name: 'topic', value: 'a' },
          }),
          /not approved/,
        );
        const prompts = await hintbox.client.listPrompts();
        assert.deepEqual(
          prompts.prompts.map((p) => p.name),
          ['greet'],
        );
        assert.doesNotMatch(hintbox.stderr(), /evil\.example/, 'the new text is never shown');
      }
      const approve = await hintboxCommand(['approve', profile, '--prompt', 'summarize', '--yes']);
      assert.equal(approve.code, 0, approve.stderr);
      assert.match(approve.stdout, /prompt summarize: changed since it was approved/);
      assert.match(approve.stdout, /description: .*evil\.example/);
      await using hintbox = await runHintbox(profile);
      await eventually(
        async () => (await hintbox.client.listPrompts()).prompts.length === 2,
        15_000,
        `${name} serves both prompts`,
      );
    });
  },
);
