import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { ensureTestImages, LIAR_IMAGE } from './support/docker.js';
import { auditOf, hintboxCommand, writeProfile } from './support/hintbox-process.js';
import { MODERN, runHintboxModern, type CallAnswer } from './support/modern-client.js';
import { serve, tokensFile } from './support/serve-process.js';
import { integrationSuite } from './support/suite.js';

interface CallRow {
  tool: string;
  decision: string;
  decidedBy: string;
  outcome: string | null;
  arguments: unknown;
}

interface EventLine {
  type?: string;
  fields?: { tool?: string; reason?: string; detail?: string; answer?: string };
}

/** The person's yes, as the retry of a 2026 client carries it. */
const APPROVE = { 'hintbox.confirm': { action: 'accept', content: { approve: true } } };

/**
 * Confirmations asked of a 2026-era client (the SDK 2.x client pinned to 2026-07-28) as
 * `input_required`, and the attacks on the `requestState` its retry carries back: replayed,
 * altered (arguments, tool, caller), forged, from another process, expired. Each refusal runs nothing
 * (the file is not written) and is in the audit trail.
 */
integrationSuite(
  'approvals as input_required for 2026 clients (hintbox run)',
  { timeout: 300_000, images: [ensureTestImages] },
  (suite) => {
    const workspace = suite.workspace;
    let n = 0;
    /** An untrusted liar whose tools are all approved: every call is confirmed. */
    const approvedLiar = async (timeout = 60) => {
      const name = `liar-mrtr-${process.pid}-${n++}`;
      const file = writeProfile({
        name,
        server: { image: LIAR_IMAGE },
        trust: 'untrusted',
        mounts: [{ source: workspace, target: '/data' }],
        approval: { timeout },
      });
      const approved = await hintboxCommand(['approve', file, '--all', '--yes']);
      assert.equal(approved.code, 0, approved.stderr);
      return { name, file };
    };
    const write = (file: string, content: string) => ({
      name: 'unannotated_write',
      arguments: { path: `/data/${file}`, content },
    });
    const asked = (answer: CallAnswer): string => {
      assert.equal(answer.kind, 'input_required', `expected input_required, got ${JSON.stringify(answer)}`);
      return answer.kind === 'input_required' ? (answer.requestState ?? '') : '';
    };
    const refusedText = (answer: CallAnswer): string => {
      assert.equal(answer.kind, 'complete');
      if (answer.kind !== 'complete') return '';
      assert.equal(answer.result.isError, true, 'a refusal is an error result');
      return JSON.stringify(answer.result.content);
    };
    const events = async (server: string): Promise<EventLine[]> => {
      const out = await hintboxCommand(['audit', '--server', server, '--events', '--json']);
      return out.stdout
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as EventLine);
    };
    /** What the audit trail holds of a server: the reasons of its refused states, its calls (newest first). */
    const trail = async (server: string) => ({
      refused: (await events(server)).filter((e) => e.type === 'approval.refused').map((e) => e.fields?.reason),
      calls: (await auditOf<CallRow>(server)).map((r) => `${r.decision}/${r.decidedBy}/${r.outcome}`),
    });
    const REFUSED = 'denied/request-state/not-run';

    // proves: MRTR-CONFIRM
    it('asks a 2026 client with input_required (the form a 2025 client gets) and runs the approved retry once', async () => {
      const { name, file } = await approvedLiar();
      const target = path.join(workspace, `${name}.txt`);
      await using hintbox = await runHintboxModern(file);
      const first = await hintbox.callOnce(write(`${name}.txt`, 'approved once'));
      assert.equal(first.kind, 'input_required');
      assert.equal(existsSync(target), false, 'nothing runs before the answer');
      const form = first.kind === 'input_required' ? JSON.stringify(first.inputRequests['hintbox.confirm']) : '';
      assert.match(form, /"method":"elicitation\/create"/);
      assert.match(form, /hintbox asks: allow .* to run unannotated_write[\s\S]*approved once/);

      // The SDK's own multi-round-trip driver: the form goes to its elicitation handler, the retry carries the answer.
      const result = await hintbox.client.callTool(write(`${name}.txt`, 'approved once'));
      assert.equal(result.isError, undefined, JSON.stringify(result));
      assert.equal(readFileSync(target, 'utf8'), 'approved once');
      assert.equal(hintbox.asked.length, 1, 'the person was asked once');
      assert.match(hintbox.asked[0]?.message ?? '', /^hintbox asks: /);
      await hintbox[Symbol.asyncDispose]();
      const [record] = await auditOf<CallRow>(name);
      assert.deepEqual([record?.decision, record?.decidedBy, record?.outcome], ['allowed', 'person', 'ok']);
    });

    // proves: MRTR-STATE
    it('runs nothing for a requestState used a second time (replay), and audits the refusal', async () => {
      const { name, file } = await approvedLiar();
      const target = path.join(workspace, `${name}.txt`);
      await using hintbox = await runHintboxModern(file);
      const call = write(`${name}.txt`, 'once');
      const state = asked(await hintbox.callOnce(call));
      const ran = await hintbox.callOnce({ ...call, requestState: state, inputResponses: APPROVE });
      assert.equal(ran.kind, 'complete');
      assert.equal(readFileSync(target, 'utf8'), 'once');
      rmSync(target);
      const replayed = await hintbox.callOnce({ ...call, requestState: state, inputResponses: APPROVE });
      assert.equal(existsSync(target), false, 'the replay wrote nothing');
      assert.match(refusedText(replayed), /requestState was already used/);
      await hintbox[Symbol.asyncDispose]();
      assert.deepEqual(await trail(name), { refused: ['replayed'], calls: [REFUSED, 'allowed/person/ok'] });
    });

    // proves: MRTR-STATE
    it('refuses a requestState carried to other arguments or another tool, and runs nothing', async () => {
      const { name, file } = await approvedLiar();
      await using hintbox = await runHintboxModern(file);
      const state = asked(await hintbox.callOnce(write(`${name}-asked.txt`, 'what the person saw')));
      const swapped = await hintbox.callOnce({
        ...write(`${name}-other.txt`, 'what runs instead'),
        requestState: state,
        inputResponses: APPROVE,
      });
      assert.equal(existsSync(path.join(workspace, `${name}-other.txt`)), false, 'the swapped arguments wrote nothing');
      assert.match(refusedText(swapped), /issued for another call \(different arguments\)/);
      const otherTool = await hintbox.callOnce({
        name: 'write_mounted',
        arguments: { path: `/data/${name}-asked.txt`, content: 'what the person saw' },
        requestState: state,
        inputResponses: APPROVE,
      });
      assert.match(refusedText(otherTool), /issued for another call \(different tool, pin, question\)/);
      for (const f of ['asked', 'other']) assert.equal(existsSync(path.join(workspace, `${name}-${f}.txt`)), false);
      await hintbox[Symbol.asyncDispose]();
      assert.deepEqual(await trail(name), { refused: ['mismatch', 'mismatch'], calls: [REFUSED, REFUSED] });
    });

    // proves: MRTR-STATE
    it('refuses a requestState altered in one character or minted by another hintbox process', async () => {
      const { name, file } = await approvedLiar();
      const call = write(`${name}.txt`, 'never');
      let foreign: string;
      {
        await using other = await runHintboxModern(file);
        foreign = asked(await other.callOnce(call));
      }
      await using hintbox = await runHintboxModern(file);
      const fromOther = await hintbox.callOnce({ ...call, requestState: foreign, inputResponses: APPROVE });
      assert.match(refusedText(fromOther), /does not verify .*another hintbox process/);
      const own = asked(await hintbox.callOnce(call));
      const [prefix, body, mac] = own.split('.');
      const payload = JSON.parse(Buffer.from(body ?? '', 'base64url').toString()) as { exp: number };
      payload.exp += 3_600_000;
      const altered = `${prefix}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${mac}`;
      const later = await hintbox.callOnce({ ...call, requestState: altered, inputResponses: APPROVE });
      assert.match(refusedText(later), /does not verify/);
      assert.equal(existsSync(path.join(workspace, `${name}.txt`)), false, 'nothing was written');
      await hintbox[Symbol.asyncDispose]();
      assert.deepEqual(await trail(name), { refused: ['forged', 'forged'], calls: [REFUSED, REFUSED] });
    });

    // proves: MRTR-STATE
    it('refuses a requestState redeemed after the time a person has to answer', async () => {
      const { name, file } = await approvedLiar(1);
      const call = write(`${name}.txt`, 'too late');
      await using hintbox = await runHintboxModern(file);
      const state = asked(await hintbox.callOnce(call));
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const late = await hintbox.callOnce({ ...call, requestState: state, inputResponses: APPROVE });
      assert.equal(existsSync(path.join(workspace, `${name}.txt`)), false, 'the late answer wrote nothing');
      assert.match(refusedText(late), /requestState expired/);
      await hintbox[Symbol.asyncDispose]();
      assert.deepEqual(await trail(name), { refused: ['expired'], calls: [REFUSED] });
    });

    // proves: MRTR-STATE
    // Seen winning first: with the caller left out of the state's binding, bob's retry wrote the file.
    it("refuses alice's requestState carried by bob (another caller of serve), runs nothing, and audits it", async () => {
      const { name, file } = await approvedLiar();
      const target = path.join(workspace, `${name}.txt`);
      const tokens = tokensFile([
        { name: 'alice', token: 'alice-token' },
        { name: 'bob', token: 'bob-token' },
      ]);
      await using serving = await serve([path.dirname(file), '--tokens', tokens]);
      // A 2026 request: a POST of its own with the 2026 headers, under the caller's token.
      const callAs = async (token: string, params: Record<string, unknown>) => {
        const res = await fetch(`${serving.url}/mcp/${name}`, {
          method: 'POST',
          headers: {
            Authorization: `Bearer ${token}`,
            'Content-Type': 'application/json',
            Accept: 'application/json',
            'MCP-Protocol-Version': MODERN,
            'Mcp-Method': 'tools/call',
            'Mcp-Name': 'unannotated_write',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params }),
        });
        const text = await res.text();
        const messages = (
          text.startsWith('event:') ? [...text.matchAll(/^data: (.*)$/gm)].map((m) => m[1] ?? '{}') : [text]
        ).map((m) => JSON.parse(m) as { result?: Record<string, unknown> });
        const answer = messages.at(-1)?.result;
        assert.ok(answer, `${res.status}: ${text}`);
        return answer;
      };
      const call = {
        ...write(`${name}.txt`, 'by bob'),
        _meta: {
          'io.modelcontextprotocol/protocolVersion': MODERN,
          'io.modelcontextprotocol/clientCapabilities': { elicitation: {} },
        },
      };
      const first = await callAs('alice-token', call);
      assert.equal(first.resultType, 'input_required', JSON.stringify(first));
      const stolen = { ...call, requestState: first.requestState, inputResponses: APPROVE };
      const carried = await callAs('bob-token', stolen);
      assert.match(JSON.stringify(carried.content), /requestState was issued for another call \(different caller\)/);
      assert.equal(existsSync(target), false, "bob's retry wrote nothing");
      await serving[Symbol.asyncDispose]();
      const { refused, calls } = await trail(name);
      assert.deepEqual(refused, ['mismatch']);
      assert.deepEqual(calls, [REFUSED]);
    });

    // proves: MRTR-ONE-ENDPOINT
    it('carries a 2026 retry through serve --one-endpoint: input_required, the approved retry runs once, its replay nothing', async () => {
      const { name, file } = await approvedLiar();
      const target = path.join(workspace, `${name}.txt`);
      await using serving = await serve([path.dirname(file), '--one-endpoint']);
      // A 2026 client has no session: each request is a POST of its own, with the 2026 headers.
      const tool = `${name}__unannotated_write`;
      const callOnce = async (params: Record<string, unknown>) => {
        const res = await fetch(`${serving.url}/mcp`, {
          method: 'POST',
          headers: {
            'Content-Type': 'application/json',
            Accept: 'application/json, text/event-stream',
            'MCP-Protocol-Version': MODERN,
            'Mcp-Method': 'tools/call',
            'Mcp-Name': tool,
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params }),
        });
        assert.equal(res.headers.get('mcp-session-id'), null, 'no session');
        const text = await res.text();
        // Every message of the answer (one JSON, or a stream's): none is a request of hintbox's.
        const messages = (
          text.startsWith('event:') ? [...text.matchAll(/^data: (.*)$/gm)].map((m) => m[1] ?? '{}') : [text]
        ).map((m) => JSON.parse(m) as { method?: string; result?: Record<string, unknown> });
        assert.deepEqual(
          messages.filter((m) => m.method === 'elicitation/create'),
          [],
          'a 2026 client is never sent elicitation/create',
        );
        const answer = messages.at(-1) ?? {};
        assert.ok(answer.result, `${res.status}: ${text}`);
        return answer.result;
      };
      const call = {
        name: tool,
        arguments: { path: `/data/${name}.txt`, content: 'through /mcp' },
        _meta: {
          'io.modelcontextprotocol/protocolVersion': MODERN,
          'io.modelcontextprotocol/clientCapabilities': { elicitation: {} },
        },
      };
      const first = await callOnce(call);
      assert.equal(first.resultType, 'input_required', JSON.stringify(first));
      assert.equal(existsSync(target), false, 'nothing runs before the answer');
      const retry = { ...call, requestState: first.requestState, inputResponses: APPROVE };
      const ran = await callOnce(retry);
      assert.equal(ran.resultType, 'complete', `the retry was asked again: ${JSON.stringify(ran).slice(0, 120)}`);
      assert.equal(ran.isError, undefined, JSON.stringify(ran));
      assert.equal(readFileSync(target, 'utf8'), 'through /mcp');
      rmSync(target);
      const replayed = await callOnce(retry);
      assert.match(JSON.stringify(replayed.content), /requestState was already used/);
      assert.equal(existsSync(target), false, 'the replay wrote nothing');
      await serving[Symbol.asyncDispose]();
      assert.deepEqual(await trail(name), {
        refused: ['replayed'],
        calls: [REFUSED, 'allowed/person/ok'],
      });
    });
  },
);
