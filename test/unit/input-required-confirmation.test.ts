import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AuditEvent, AuditIntent, AuditLog } from '../../src/audit/audit-record.js';
import { CONFIRM_INPUT } from '../../src/confirmation/input-required-confirmation.js';
import { RequestStates } from '../../src/confirmation/request-state.js';
import { CallGuard, type ClientChannel, type GuardedTool } from '../../src/gateway/call-guard.js';
import type { RoundTrip } from '../../src/protocol/protocol-era.js';
import { silentLogger } from '../../src/util/logger.js';
import { guardedTool } from './support/guarded-tool.js';

/** An in-memory audit log keeping intents and events. */
function memoryAudit(): AuditLog & { intents: AuditIntent[]; events: AuditEvent[] } {
  const intents: AuditIntent[] = [];
  const events: AuditEvent[] = [];
  return {
    intents,
    events,
    recordIntent: (intent) => Promise.resolve(`call${intents.push(intent)}`),
    recordOutcome: () => Promise.resolve(),
    recordEvent: (event) => void events.push(event),
  };
}

/** A 2026 client's request: never asked by a request of hintbox's (that would throw). */
function modernClient(roundTrip: Omit<RoundTrip, 'canElicit'> = {}): ClientChannel {
  return {
    roundTrip: { canElicit: true, ...roundTrip },
    canElicit: () => false,
    elicit: () => Promise.reject(new Error('a 2026 client is never sent elicitation/create')),
  };
}

const answer = (approve: boolean) => ({ [CONFIRM_INPUT]: { action: 'accept', content: { approve } } });

/** Who, where and how long, for every guard of these tests (an untrusted server: every call is confirmed). */
const UNTRUSTED_NOTES = {
  server: 'notes',
  session: 's1',
  trust: 'untrusted',
  preApprovals: [],
  approvalTimeoutMs: 60_000,
  profileFile: '/p/notes.yaml',
  log: silentLogger,
} as const;

function guardOf(tool: GuardedTool, requestStates = new RequestStates()) {
  const audit = memoryAudit();
  const guard = new CallGuard({ ...UNTRUSTED_NOTES, tools: new Map([[tool.name, tool]]), audit, requestStates });
  return { guard, audit };
}

const write = () => guardedTool('write_note', { readOnlyHint: false, destructiveHint: false, openWorldHint: false });

describe('CallGuard: confirmations of 2026 clients (input_required)', () => {
  // proves: MRTR-CONFIRM
  it('answers input_required with the form, records no call until the retry, then runs the approved retry', async () => {
    const { guard, audit } = guardOf(write());
    const args = { path: '/data/a.md', content: 'hi' };
    const asked = await guard.admit('write_note', args, modernClient());
    assert.equal(asked.allowed, false);
    const inputRequired = asked.allowed ? undefined : asked.inputRequired;
    assert.ok(inputRequired, 'asked as input_required');
    assert.match(inputRequired.inputRequests[CONFIRM_INPUT]?.params.message ?? '', /^hintbox asks: allow notes/);
    assert.equal(audit.intents.length, 0, 'nothing is decided yet: no call record');
    assert.deepEqual(
      audit.events.map((e) => e.type),
      ['approval.asked'],
    );
    const retry = { requestState: inputRequired.requestState, inputResponses: answer(true) };
    const ran = await guard.admit('write_note', args, modernClient(retry));
    assert.equal(ran.allowed, true);
    assert.deepEqual([audit.intents[0]?.decision, audit.intents[0]?.decidedBy], ['allowed', 'person']);
  });

  it('denies the retry whose form came back unticked or declined (the state is used either way)', async () => {
    const { guard, audit } = guardOf(write());
    for (const responses of [answer(false), { [CONFIRM_INPUT]: { action: 'decline' } }, {}]) {
      const asked = await guard.admit('write_note', {}, modernClient());
      const state = asked.allowed ? '' : (asked.inputRequired?.requestState ?? '');
      const denied = await guard.admit(
        'write_note',
        {},
        modernClient({ requestState: state, inputResponses: responses }),
      );
      assert.equal(denied.allowed, false);
      const again = await guard.admit(
        'write_note',
        {},
        modernClient({ requestState: state, inputResponses: answer(true) }),
      );
      assert.equal(again.allowed, false, 'a declined state cannot be approved later');
    }
    assert.deepEqual(
      audit.intents.map((i) => [i.decision, i.decidedBy]),
      [
        ['denied', 'person'],
        ['denied', 'request-state'],
        ['denied', 'person'],
        ['denied', 'request-state'],
        ['denied', 'person'],
        ['denied', 'request-state'],
      ],
    );
  });

  // proves: MRTR-NO-BYPASS
  it('never lets a valid state skip the decision: a tool blocked since it was asked stays blocked', async () => {
    const tool = write();
    const { guard, audit } = guardOf(tool);
    const asked = await guard.admit('write_note', {}, modernClient());
    const state = asked.allowed ? '' : (asked.inputRequired?.requestState ?? '');
    guard.replaceTools(new Map([[tool.name, { ...tool, pinState: 'changed' }]]));
    const retried = await guard.admit(
      'write_note',
      {},
      modernClient({ requestState: state, inputResponses: answer(true) }),
    );
    assert.equal(retried.allowed, false);
    assert.deepEqual([audit.intents[0]?.decision, audit.intents[0]?.decidedBy], ['blocked', 'pin']);
  });

  it('asks a 2026 client that declares no form elicitation the 2025 way (no input_required)', async () => {
    const { guard } = guardOf(write());
    const client: ClientChannel = { ...modernClient(), roundTrip: { canElicit: false } };
    const admitted = await guard.admit('write_note', {}, client);
    assert.equal(admitted.allowed, false);
    assert.equal(admitted.allowed ? undefined : admitted.inputRequired, undefined);
    assert.match(JSON.stringify(admitted.allowed ? null : admitted.result), /cannot be asked \(no MCP elicitation\)/);
  });

  // proves: MRTR-STATE
  it('redeems the state of a retry that declares no elicitation: a forged state, or answers without one, are refused and audited', async () => {
    const { guard, audit } = guardOf(write());
    const noElicitation = (roundTrip: Omit<RoundTrip, 'canElicit'>): ClientChannel => ({
      ...modernClient(),
      roundTrip: { canElicit: false, ...roundTrip },
    });
    const forged = await guard.admit(
      'write_note',
      {},
      noElicitation({ requestState: 'hbx1.forged.x', inputResponses: answer(true) }),
    );
    const unstated = await guard.admit('write_note', {}, noElicitation({ inputResponses: answer(true) }));
    for (const refused of [forged, unstated]) {
      assert.equal(refused.allowed, false);
      assert.match(
        JSON.stringify(refused.allowed ? null : refused.result),
        /hintbox refused write_note: its requestState/,
      );
    }
    assert.deepEqual(
      audit.events.filter((e) => e.type === 'approval.refused').map((e) => e.reason),
      ['forged', 'malformed'],
    );
    assert.deepEqual(
      audit.intents.map((i) => [i.decision, i.decidedBy]),
      [
        ['denied', 'request-state'],
        ['denied', 'request-state'],
      ],
    );
  });

  // proves: MRTR-NO-BYPASS
  it('asks again when the server lost trust between the question and the retry: an answer to another question does not count', async () => {
    const tool = guardedTool(
      'write_note',
      { readOnlyHint: false, destructiveHint: true, openWorldHint: false },
      { rule: 'confirm' },
    );
    const read = guardedTool('read_note', { readOnlyHint: true, openWorldHint: false });
    const audit = memoryAudit();
    const guard = new CallGuard({
      ...UNTRUSTED_NOTES,
      trust: 'trusted',
      tools: new Map([
        [tool.name, tool],
        [read.name, read],
      ]),
      audit,
      requestStates: new RequestStates(),
    });
    const args = { path: '/data/a.md' };
    const asked = await guard.admit('write_note', args, modernClient());
    const first = asked.allowed ? undefined : asked.inputRequired;
    assert.ok(first);
    assert.doesNotMatch(first.inputRequests[CONFIRM_INPUT]?.params.message ?? '', /broke a hint/);
    guard.violationIn('read_note', {
      isError: true,
      content: [{ type: 'text', text: 'EROFS: read-only file system' }],
    });
    assert.equal(guard.trust, 'untrusted');
    const retry = { requestState: first.requestState, inputResponses: answer(true) };
    const again = await guard.admit('write_note', args, modernClient(retry));
    assert.equal(again.allowed, false, 'approved on a form that did not say the server broke a hint');
    const second = again.allowed ? undefined : again.inputRequired;
    assert.ok(second, 'the person is asked again');
    assert.match(second.inputRequests[CONFIRM_INPUT]?.params.message ?? '', /broke a hint earlier in this session/);
    assert.equal(audit.intents.length, 0, 'nothing ran');
    const refused = audit.events.find((e) => e.type === 'approval.refused');
    assert.deepEqual(
      [refused?.reason, refused?.detail],
      ['mismatch', 'its requestState was issued for another call (different question)'],
    );
    const ran = await guard.admit(
      'write_note',
      args,
      modernClient({ requestState: second.requestState, inputResponses: answer(true) }),
    );
    assert.equal(ran.allowed, true, 'the answer to the question as it stands now runs the call');
  });

  // proves: MRTR-STATE-BOUNDED
  it('refuses a call with one line, audited, when its caller has as many confirmations waiting as it may', async () => {
    const { guard, audit } = guardOf(write(), new RequestStates({ maxPerCaller: 2 }));
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await guard.admit('write_note', { i }, modernClient()));
    assert.deepEqual(
      answers.map((a) => !a.allowed && a.inputRequired !== undefined),
      [true, true, false],
    );
    const third = answers[2];
    assert.equal(third?.allowed, false);
    const text = JSON.stringify(third?.allowed ? null : third?.result);
    assert.match(text, /hintbox refused write_note: this caller already has 2 confirmations waiting for an answer/);
    assert.deepEqual(
      audit.events.map((e) => [e.type, e.type === 'approval.refused' ? e.reason : undefined]),
      [
        ['approval.asked', undefined],
        ['approval.asked', undefined],
        ['approval.refused', 'too-many'],
      ],
    );
    assert.deepEqual(
      audit.intents.map((i) => [i.decision, i.decidedBy]),
      [['denied', 'request-state']],
    );
  });
});
