import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ASKER_IMAGE, ensureAskerImage } from './support/docker.js';
import { auditOf, hintboxCommand, writeProfile } from './support/hintbox-process.js';
import { runHintboxModern, type CallAnswer } from './support/modern-client.js';
import { integrationSuite } from './support/suite.js';

interface CallRow {
  tool: string;
  decision: string;
  decidedBy: string;
  outcome: string | null;
}

interface EventLine {
  type?: string;
  fields?: { method?: string; decision?: string; reason?: string | null; outcome?: string; detail?: string | null };
}

const ASK = { name: 'ask_elicitation', arguments: {} };

/**
 * A 2025 server's own question (the asker fixture's `elicitation/create`, made in the middle of
 * a call) reaching a 2026 client (the SDK 2.x client pinned to 2026-07-28) as `input_required`,
 * and the same call going on once the client's retry brings the answer; and the attacks on that
 * retry: an answer carried to another call's question, a replay after the call finished.
 */
integrationSuite(
  "a 2025 server's questions to a 2026 client (input_required)",
  { timeout: 300_000, images: [ensureAskerImage] },
  (suite) => {
    let n = 0;
    const askerProfile = (trust: 'trusted' | 'untrusted', extra: Record<string, unknown> = {}) => {
      const name = `asker-rounds-${process.pid}-${n++}`;
      const file = writeProfile({
        name,
        server: { image: ASKER_IMAGE },
        trust,
        mounts: [{ source: suite.workspace, target: '/workspace' }],
        ...extra,
      });
      return { name, file };
    };
    /** The one question of an `input_required` answer: its key, what it asks, and the state. */
    const question = (answer: CallAnswer) => {
      assert.equal(answer.kind, 'input_required', `expected input_required, got ${JSON.stringify(answer)}`);
      if (answer.kind !== 'input_required') throw new Error('unreachable');
      const [key = '', request] = Object.entries(answer.inputRequests)[0] ?? [];
      assert.ok(key.startsWith('hintbox.server-input.'), `a key of hintbox's: ${key}`);
      return { key, request: request as { method: string; params: { message: string } }, state: answer.requestState };
    };
    const textOf = (answer: CallAnswer): string => {
      assert.equal(answer.kind, 'complete', JSON.stringify(answer));
      return answer.kind === 'complete' ? JSON.stringify(answer.result.content) : '';
    };
    const colour = (value: string) => ({ action: 'accept', content: { colour: value } });
    const events = (server: string) => auditOf<EventLine>(server, { events: true });

    // proves: MRTR-SERVER-INPUT
    it("asks a 2025 server's elicitation of a 2026 client as input_required and goes on with the same call, once", async () => {
      const { name, file } = askerProfile('trusted');
      await using hintbox = await runHintboxModern(file);
      const asked = question(await hintbox.callOnce(ASK));
      assert.equal(asked.request.method, 'elicitation/create');
      assert.match(asked.request.params.message, /^The MCP server "asker-rounds-\d+-\d+" asks \(its own question/);
      const done = await hintbox.callOnce({
        ...ASK,
        requestState: asked.state,
        inputResponses: { [asked.key]: colour('blue') },
      });
      assert.match(textOf(done), /\\"colour\\":\\"blue\\"/, 'the server got the answer and its call went on');
      // The SDK's own driver: the question goes to its elicitation handler, the retry carries the answer.
      const driven = await hintbox.client.callTool(ASK);
      assert.match(JSON.stringify(driven.content), /"action\\":\\"accept\\"/);
      assert.match(hintbox.asked[0]?.message ?? '', /^The MCP server /);
      await hintbox[Symbol.asyncDispose]();
      const calls = await auditOf<CallRow>(name);
      assert.deepEqual(
        calls.map((c) => `${c.tool}/${c.outcome}`),
        ['ask_elicitation/ok', 'ask_elicitation/ok'],
        'each call ran once',
      );
    });

    // proves: MRTR-SERVER-INPUT-BOUND
    it("refuses an answer carried to another call's question, and answers nothing to that server (attack)", async () => {
      const { name, file } = askerProfile('trusted');
      await using hintbox = await runHintboxModern(file);
      const victim = question(await hintbox.callOnce(ASK));
      const attacker = question(await hintbox.callOnce(ASK));
      // The attacker's own (valid) state, the victim's question: the victim's server must not hear this.
      const stolen = await hintbox.callOnce({
        ...ASK,
        requestState: attacker.state,
        inputResponses: { [victim.key]: colour('evil') },
      });
      assert.equal(stolen.kind, 'complete');
      assert.equal(stolen.kind === 'complete' && stolen.result.isError, true, JSON.stringify(stolen));
      assert.doesNotMatch(textOf(stolen), /evil/, "the victim's call did not go on with the attacker's answer");
      assert.match(textOf(stolen), /issued for another call/);
      // The victim's question still waits, and its own answer is what its server gets.
      const victimDone = await hintbox.callOnce({
        ...ASK,
        requestState: victim.state,
        inputResponses: { [victim.key]: colour('red') },
      });
      assert.match(textOf(victimDone), /\\"colour\\":\\"red\\"/);
      await hintbox[Symbol.asyncDispose]();
      const refused = (await events(name)).filter(
        (e) => e.type === 'server.request' && e.fields?.decision === 'refused',
      );
      assert.equal(refused.length, 1, 'the refusal is in the audit trail');
      assert.match(refused[0]?.fields?.reason ?? '', /issued for another call/);
    });

    // proves: MRTR-SERVER-INPUT-BOUND
    it('refuses the replay of an answer after its call finished, and sends the server nothing (attack)', async () => {
      const { name, file } = askerProfile('trusted');
      await using hintbox = await runHintboxModern(file);
      const asked = question(await hintbox.callOnce(ASK));
      const retry = { ...ASK, requestState: asked.state, inputResponses: { [asked.key]: colour('blue') } };
      assert.match(textOf(await hintbox.callOnce(retry)), /blue/);
      const replayed = await hintbox.callOnce(retry);
      assert.equal(replayed.kind === 'complete' && replayed.result.isError, true, JSON.stringify(replayed));
      assert.match(textOf(replayed), /no question of the server waits for this answer/);
      await hintbox[Symbol.asyncDispose]();
      assert.equal((await auditOf<CallRow>(name)).length, 1, 'the replay started no call');
      const answered = (await events(name)).filter((e) => e.type === 'server.request.answered');
      assert.equal(answered.length, 1, 'the server got one answer, not two');
    });

    // proves: MRTR-SERVER-INPUT
    it("asks hintbox's approval first, then the server's question, in two input_required rounds of one call", async () => {
      const { name, file } = askerProfile('untrusted');
      assert.equal((await hintboxCommand(['approve', file, '--all', '--yes'])).code, 0);
      await using hintbox = await runHintboxModern(file, {
        onElicit: (params) => {
          const content: Record<string, string | boolean> = params.message.startsWith('hintbox asks:')
            ? { approve: true }
            : { colour: 'green' };
          return { action: 'accept', content };
        },
      });
      const result = await hintbox.client.callTool(ASK);
      assert.match(JSON.stringify(result.content), /\\"colour\\":\\"green\\"/);
      assert.deepEqual(
        hintbox.asked.map((p) => p.message.slice(0, 20)),
        ['hintbox asks: allow ', 'The MCP server "aske'],
        'the approval first, then the server',
      );
      await hintbox[Symbol.asyncDispose]();
      const calls = await auditOf<CallRow>(name);
      assert.deepEqual(
        calls.map((c) => `${c.decision}/${c.decidedBy}/${c.outcome}`),
        ['allowed/person/ok'],
      );
    });

    // proves: MRTR-SERVER-INPUT-BOUND
    it("ends a call whose server's question is not answered by timeouts.call, and refuses the late answer", async () => {
      const { name, file } = askerProfile('trusted', { timeouts: { call: 3 } });
      await using hintbox = await runHintboxModern(file);
      const asked = question(await hintbox.callOnce(ASK));
      await new Promise((resolve) => setTimeout(resolve, 4500));
      const late = await hintbox.callOnce({
        ...ASK,
        requestState: asked.state,
        inputResponses: { [asked.key]: colour('late') },
      });
      assert.match(textOf(late), /no question of the server waits for this answer/);
      // The leftover sandbox answers the next call: nothing of the parked one is in the way.
      assert.match(textOf(await hintbox.callOnce({ name: 'log', arguments: {} })), /logged/);
      await hintbox[Symbol.asyncDispose]();
      const calls = await auditOf<CallRow & { detail?: string | null }>(name);
      assert.deepEqual(
        calls.map((c) => `${c.tool}/${c.outcome}`),
        ['log/ok', 'ask_elicitation/error'],
      );
      const answered = (await events(name)).filter((e) => e.type === 'server.request.answered');
      assert.equal(answered[0]?.fields?.outcome, 'error', "the server's question was answered with an error");
    });

    // proves: MRTR-SERVER-INPUT-BOUND
    it("drops the answer of a call that answers while its question waits, and refuses the question's answer", async () => {
      const { name, file } = askerProfile('trusted');
      await using hintbox = await runHintboxModern(file);
      const asked = question(await hintbox.callOnce({ name: 'ask_and_leave', arguments: {} }));
      const retry = await hintbox.callOnce({
        name: 'ask_and_leave',
        arguments: {},
        requestState: asked.state,
        inputResponses: { [asked.key]: colour('blue') },
      });
      assert.match(textOf(retry), /no question of the server waits for this answer/);
      await hintbox[Symbol.asyncDispose]();
      assert.deepEqual(
        (await auditOf<CallRow>(name)).map((c) => `${c.tool}/${c.outcome}`),
        ['ask_and_leave/ok'],
      );
    });

    // proves: MRTR-SERVER-INPUT
    it('gives the server the error a 2025 client without elicitation gives when the 2026 client declared none', async () => {
      const { file } = askerProfile('trusted');
      await using hintbox = await runHintboxModern(file, { elicitation: false });
      const answer = await hintbox.callOnce(ASK);
      assert.match(textOf(answer), /hintbox refused elicitation\/create: the client does not support elicitation/);
    });
  },
);
