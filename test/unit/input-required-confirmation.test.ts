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
});
