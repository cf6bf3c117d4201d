import assert from 'node:assert/strict';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { hintboxCommand, runHintbox, writeProfile } from './support/hintbox-process.js';
import { runHintboxModern } from './support/modern-client.js';
import { ensureModernImage, MODERN_IMAGE } from './support/modern-server.js';
import { integrationSuite } from './support/suite.js';

/**
 * The four pairings of protocol eras through `hintbox run`, with a 2026-era server of the tests'
 * own (test/fixtures/modern: SDK 2.x's `@modelcontextprotocol/server`, 2026-07-28 only: it
 * refuses `initialize`, so hintbox must probe it with `server/discover` and speak 2026 to it).
 * - 2025 client / 2025 server: the rest of the suite (everything-server, filesystem-server,
 *   prompts-and-resources, approval, console-elicitation, ...);
 * - 2026 client / 2025 server: modern-client-shipped.test.ts (the filesystem and everything servers as shipped),
 *   modern-client.test.ts, input-required.test.ts and server-input-rounds.test.ts;
 * - 2025 client / 2026 server and 2026 client / 2026 server: here (tools, resources, prompts,
 *   completions, a confirmation, the server's own input request, cancellation, progress, a lie about a hint).
 */

const ANSWER_NAME: Record<string, string | boolean> = { name: 'Ada' };
const ANSWER_APPROVE: Record<string, string | boolean> = { approve: true };
const ANSWER_DECLINE: Record<string, string | boolean> = { approve: false };

const text = (result: unknown): string =>
  ((result as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');

integrationSuite('protocol pairings with a 2026 server', { timeout: 300_000, images: [ensureModernImage] }, (suite) => {
  const NOTE = 'first line\n';

  /** A trusted profile of the 2026 fixture over a fresh workspace; its tools approved. */
  async function profileOfModern(tag: string): Promise<{ file: string; note: string }> {
    const workspace = suite.workspace;
    const note = path.join(workspace, 'note.txt');
    writeFileSync(note, NOTE, { mode: 0o666 });
    chmodSync(note, 0o666);
    const file = writeProfile({
      name: `modern-${tag}-${process.pid}`,
      server: { image: MODERN_IMAGE },
      trust: 'trusted',
      mounts: [{ source: workspace, target: '/data' }],
    });
    const approved = await hintboxCommand(['approve', file, '--all', '--yes']);
    assert.equal(approved.code, 0, approved.stderr);
    return { file, note };
  }

  // proves: UPSTREAM-2026-HINTS
  it('runs a 2026 server for a 2025 client: tools, prompts, completions, resources, confirmation, its input request, progress, cancellation; its lie about readOnlyHint meets EROFS', async () => {
    const { file, note } = await profileOfModern('legacy');
    let confirmations = 0;
    await using run = await runHintbox(file, {
      // hintbox's first confirmation is declined, the others approved; the server's question gets a name.
      onElicit: (params) => ({
        action: 'accept',
        content: params.message.includes('What is your name?')
          ? ANSWER_NAME
          : ++confirmations === 1
            ? ANSWER_DECLINE
            : ANSWER_APPROVE,
      }),
    });
    const tools = (await run.client.listTools()).tools;
    assert.deepEqual(tools.map((t) => t.name).sort(), ['ask_name', 'count', 'read_note', 'save_note', 'tidy_note']);
    assert.equal(tools.find((t) => t.name === 'tidy_note')?.annotations?.readOnlyHint, true);

    const read = await run.client.callTool({ name: 'read_note', arguments: {} });
    assert.equal(text(read), NOTE);
    assert.equal('resultType' in read, false, 'a 2025 client gets no resultType');

    // hintbox's approval comes first: declined, the server never gets the write.
    const refused = await run.client.callTool({ name: 'save_note', arguments: { line: 'refused' } });
    assert.equal(refused.isError, true, JSON.stringify(refused));
    assert.equal(readFileSync(note, 'utf8'), NOTE, 'nothing written on a declined confirmation');
    // A confirmed write: hintbox asks first, then the server appends.
    const saved = await run.client.callTool({ name: 'save_note', arguments: { line: 'second' } });
    assert.equal(text(saved), 'saved: second', JSON.stringify(saved));
    assert.ok(
      run.asked.some((q) => q.message.startsWith('hintbox asks:')),
      'hintbox asked before the write',
    );
    assert.equal(readFileSync(note, 'utf8'), `${NOTE}second\n`);

    // The server's own input request (input_required) reaches the client as elicitation/create;
    // the retry carries the answer and the server's requestState untouched.
    const asked = await run.client.callTool({ name: 'ask_name', arguments: {} });
    assert.equal(text(asked), 'hello Ada (state modern-state-1)', JSON.stringify(asked));
    const question = run.asked.find((q) => q.message.includes('What is your name?'));
    assert.ok(question?.message.includes('asks (its own question'), 'shown as the server’s question');

    const progress: number[] = [];
    const counted = await run.client.callTool({ name: 'count', arguments: { steps: 3 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    });
    assert.equal(text(counted), 'counted 3');
    // The fixture server does not await its progress notifications: under load its last one can
    // come after the answer, which the SDK client then drops (seen once in CI: [1, 2]).
    assert.ok(progress.length >= 1 && progress.every((p, i) => p === i + 1), JSON.stringify(progress));

    const abort = new AbortController();
    setTimeout(() => abort.abort('enough'), 400);
    await assert.rejects(
      run.client.callTool({ name: 'count', arguments: { steps: 100 } }, undefined, { signal: abort.signal }),
    );
    assert.equal(text(await run.client.callTool({ name: 'read_note', arguments: {} })), `${NOTE}second\n`);

    const prompt = await run.client.getPrompt({ name: 'greeting', arguments: { who: 'Bo' } });
    assert.deepEqual(prompt.messages[0]?.content, { type: 'text', text: 'Greet Bo.' });
    const completion = await run.client.complete({
      ref: { type: 'ref/prompt', name: 'greeting' },
      argument: { name: 'who', value: 'A' },
    });
    assert.deepEqual(completion.completion.values, ['Ada', 'Alan']);
    assert.deepEqual(
      (await run.client.listResources()).resources.map((r) => r.uri),
      ['note://readme'],
    );
    const resource = await run.client.readResource({ uri: 'note://readme' });
    assert.equal((resource.contents[0] as { text?: string }).text, 'a 2026 server');

    // The lie: tidy_note says it only reads; it runs where it cannot write.
    const before = readFileSync(note);
    const tidied = await run.client.callTool({ name: 'tidy_note', arguments: {} });
    assert.match(text(tidied), /EROFS/, JSON.stringify(tidied));
    assert.deepEqual(readFileSync(note), before, 'the note is byte-identical');
  });

  // proves: UPSTREAM-2026-INPUT-NO-ELICIT
  it('fails the call of a 2026 server that asks a 2025 client without elicitation for input, saying why', async () => {
    const { file } = await profileOfModern('noelicit');
    await using run = await runHintbox(file, { confirmations: 'unsupported' });
    const answer = run.client.callTool({ name: 'ask_name', arguments: {} });
    await assert.rejects(answer, /input_required/);
    assert.equal(text(await run.client.callTool({ name: 'read_note', arguments: {} })), NOTE);
  });

  it('runs a 2026 server for a 2026 client: tools, prompts, completions, resources, confirmation, progress, cancellation', async () => {
    const { file, note } = await profileOfModern('modern');
    await using run = await runHintboxModern(file);
    const tools = (await run.client.listTools()).tools;
    assert.deepEqual(tools.map((t) => t.name).sort(), ['ask_name', 'count', 'read_note', 'save_note', 'tidy_note']);
    assert.equal(text(await run.client.callTool({ name: 'read_note', arguments: {} })), NOTE);

    // hintbox's confirmation is its own input_required; the retry runs the write once.
    const first = await run.callOnce({ name: 'save_note', arguments: { line: 'modern' } });
    assert.equal(first.kind, 'input_required');
    assert.equal(readFileSync(note, 'utf8'), NOTE, 'nothing written before the answer');
    const saved = await run.client.callTool({ name: 'save_note', arguments: { line: 'modern' } });
    assert.equal(text(saved), 'saved: modern', JSON.stringify(saved));
    assert.equal(readFileSync(note, 'utf8'), `${NOTE}modern\n`);

    const progress: number[] = [];
    const counted = await run.client.callTool(
      { name: 'count', arguments: { steps: 2 } },
      {
        onprogress: (p: { progress: number }) => progress.push(p.progress),
      },
    );
    assert.equal(text(counted), 'counted 2');
    // hintbox writes both notifications before the answer (seen on the wire); the SDK 2.x client
    // may take the answer before the last one, so only the first is asserted.
    assert.equal(progress[0], 1, JSON.stringify(progress));

    const abort = new AbortController();
    setTimeout(() => abort.abort('enough'), 400);
    await assert.rejects(run.client.callTool({ name: 'count', arguments: { steps: 100 } }, { signal: abort.signal }));

    const prompt = await run.client.getPrompt({ name: 'greeting', arguments: { who: 'Bo' } });
    assert.deepEqual(prompt.messages[0]?.content, { type: 'text', text: 'Greet Bo.' });
    const completion = await run.client.complete({
      ref: { type: 'ref/prompt', name: 'greeting' },
      argument: { name: 'who', value: 'A' },
    });
    assert.deepEqual(completion.completion.values, ['Ada', 'Alan']);
    const resource = await run.client.readResource({ uri: 'note://readme' });
    assert.equal((resource.contents[0] as { text?: string }).text, 'a 2026 server');
  });

  it('passes a 2026 server’s input request to a 2026 client and retries with its answer', async () => {
    const { file } = await profileOfModern('modern-ask');
    await using run = await runHintboxModern(file, {
      onElicit: (params) => ({
        action: 'accept',
        content: params.message.includes('What is your name?') ? ANSWER_NAME : ANSWER_APPROVE,
      }),
    });
    const asked = await run.client.callTool({ name: 'ask_name', arguments: {} });
    assert.equal(text(asked), 'hello Ada (state modern-state-1)', JSON.stringify(asked));
  });
});
