import assert from 'node:assert/strict';
import { it } from 'node:test';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ensureEverythingImage, ensureTestImages } from './support/docker.js';
import {
  copyOfFixtureProfile,
  copyOfShippedProfile,
  hintboxCommand,
  sandboxFolder,
} from './support/hintbox-process.js';
import { runHintboxModern, type ModernHintbox } from './support/modern-client.js';
import { integrationSuite } from './support/suite.js';

/** Copies: approving them writes the lock files beside the copies, not into the repository. */
const PROFILE = copyOfFixtureProfile('everything/everything.yaml');
const FILESYSTEM = copyOfShippedProfile('filesystem');

const APPROVE: Record<string, string | boolean> = { approve: true };
const FORM: Record<string, string | boolean> = { name: 'Ada Lovelace', check: true };

/** The everything server's argument prompt, and the completion of its completable prompt's argument. */
async function promptAndCompletion(client: ModernHintbox['client']): Promise<void> {
  const prompt = await client.getPrompt({ name: 'args-prompt', arguments: { city: 'Lyon', state: 'Rhône' } });
  assert.deepEqual(prompt.messages[0]?.content, { type: 'text', text: "What's weather in Lyon, Rhône?" });
  const department = await client.complete({
    ref: { type: 'ref/prompt', name: 'completable-prompt' },
    argument: { name: 'department', value: 'S' },
  });
  assert.deepEqual(department.completion.values, ['Sales', 'Support']);
}

const text = (result: unknown): string =>
  ((result as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');

/**
 * The pairing 2026 client / 2025 server with servers as shipped: the SDK 2.x client pinned to
 * MCP 2026-07-28 and the real server-filesystem and server-everything from npm (2025-11-25
 * servers) through `hintbox run`: reads and confirmed writes, resources and a template, prompts,
 * completions of a prompt argument and of a template variable, progress, cancellation, and the
 * server's own elicitation (asked of the 2026 client as `input_required`). protocol-pairings.test.ts has the pairings with
 * a 2026 server; input-required and server-input-rounds the attacks on the 2026 rounds.
 */
integrationSuite(
  'the SDK 2.x client and the filesystem and everything servers as shipped',
  { timeout: 240_000, images: [ensureEverythingImage, ensureTestImages] },
  () => {
    it('serves a 2026 client the filesystem server: a read, a declined write that writes nothing, a confirmed one', async () => {
      const workspace = sandboxFolder();
      const approve = await hintboxCommand(['approve', FILESYSTEM, '--all', '--yes'], { WORKSPACE: workspace });
      assert.equal(approve.code, 0, approve.stderr);
      const file = path.join(workspace, 'note.txt');
      writeFileSync(file, 'first\n');
      const writes: string[] = [];
      // An untrusted server: hintbox asks before reads too. The write whose content says "declined" is declined.
      await using run = await runHintboxModern(FILESYSTEM, {
        env: { WORKSPACE: workspace },
        onElicit: (params) => {
          if (params.message.includes('write_file')) writes.push(params.message);
          return { action: 'accept', content: { approve: !params.message.includes('declined') } };
        },
      });
      const read = await run.client.callTool({ name: 'read_text_file', arguments: { path: '/workspace/note.txt' } });
      assert.equal(text(read), 'first\n');
      const declined = await run.client.callTool({
        name: 'write_file',
        arguments: { path: '/workspace/note.txt', content: 'declined\n' },
      });
      assert.equal(declined.isError, true, JSON.stringify(declined));
      assert.equal(readFileSync(file, 'utf8'), 'first\n', 'nothing written on a declined confirmation');
      const written = await run.client.callTool({
        name: 'write_file',
        arguments: { path: '/workspace/note.txt', content: 'second\n' },
      });
      assert.notEqual(written.isError, true, JSON.stringify(written));
      assert.equal(readFileSync(file, 'utf8'), 'second\n');
      assert.equal(writes.length, 2, 'hintbox asked before each write');
    });

    it('serves a 2026 client the everything server: resources, prompts, completions, progress, cancellation, its elicitation', async () => {
      const approve = await hintboxCommand(['approve', PROFILE, '--all', '--yes']);
      assert.equal(approve.code, 0, approve.stderr);
      await using run = await runHintboxModern(PROFILE, {
        // hintbox's own confirmation (the tool is not read-only) is approved; the server's form gets a name.
        onElicit: (params) => ({
          action: 'accept',
          content: params.message.startsWith('hintbox asks:') ? APPROVE : FORM,
        }),
      });

      const echo = await run.client.callTool({ name: 'echo', arguments: { message: 'from 2026' } });
      assert.equal(text(echo), 'Echo: from 2026');

      const { resources } = await run.client.listResources();
      assert.ok(
        resources.some((r) => r.uri === 'demo://resource/static/document/architecture.md'),
        resources.map((r) => r.uri).join(', '),
      );
      const read = await run.client.readResource({ uri: 'demo://resource/static/document/architecture.md' });
      assert.match((read.contents[0] as { text: string }).text, /\S/);
      const { resourceTemplates } = await run.client.listResourceTemplates();
      assert.ok(resourceTemplates.some((t) => t.uriTemplate === 'demo://resource/dynamic/text/{resourceId}'));
      const templated = await run.client.readResource({ uri: 'demo://resource/dynamic/text/1' });
      assert.match((templated.contents[0] as { text: string }).text, /^Resource 1: This is a plaintext resource/);

      await promptAndCompletion(run.client);
      const id = await run.client.complete({
        ref: { type: 'ref/resource', uri: 'demo://resource/dynamic/text/{resourceId}' },
        argument: { name: 'resourceId', value: '12' },
      });
      assert.deepEqual(id.completion.values, ['12']);

      const progress: number[] = [];
      const operated = await run.client.callTool(
        { name: 'trigger-long-running-operation', arguments: { duration: 0.6, steps: 3 } },
        { onprogress: (p: { progress: number }) => progress.push(p.progress) },
      );
      assert.match(text(operated), /Long running operation completed\. Duration: 0\.6 seconds, Steps: 3\./);
      // The server awaits each notification before its next step: at least the first two are in
      // before the answer; the SDK 2.x client may take the answer before the last.
      assert.ok(progress.length >= 2 && progress.every((p, i) => p === i + 1), JSON.stringify(progress));

      const abort = new AbortController();
      setTimeout(() => abort.abort('enough'), 400);
      const started = Date.now();
      await assert.rejects(
        run.client.callTool(
          { name: 'trigger-long-running-operation', arguments: { duration: 30, steps: 30 } },
          { signal: abort.signal },
        ),
      );
      assert.ok(Date.now() - started < 10_000, 'the cancelled call ended with its cancellation, not its 30 s');
      // The session goes on after the cancellation.
      assert.equal(text(await run.client.callTool({ name: 'echo', arguments: { message: 'after' } })), 'Echo: after');

      const before = run.asked.length;
      const elicited = await run.client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
      const asked = run.asked.slice(before).map((q) => q.message);
      assert.ok(
        asked.some((m) => m.includes('asks (its own question') && m.includes('Please provide inputs')),
        asked.join('\n---\n'),
      );
      assert.match(JSON.stringify(elicited.content), /Ada Lovelace/);
    });

    it('serves the SDK 2.x client in its 2025 mode (initialize) the everything server: a tool, a prompt, a completion', async () => {
      const approve = await hintboxCommand(['approve', PROFILE, '--all', '--yes']);
      assert.equal(approve.code, 0, approve.stderr);
      await using run = await runHintboxModern(PROFILE, { negotiation: 'legacy' });
      assert.equal(run.client.getNegotiatedProtocolVersion(), '2025-11-25');
      const echo = await run.client.callTool({ name: 'echo', arguments: { message: 'from 2025' } });
      assert.equal(text(echo), 'Echo: from 2025');
      await promptAndCompletion(run.client);
    });
  },
);
