import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import { CallGuard, type ClientChannel, type GuardedTool } from '../../src/gateway/call-guard.js';
import type { AuditEvent, AuditIntent, AuditLog } from '../../src/audit/audit-record.js';
import type { StandingAnswer } from '../../src/policy/standing-answer.js';
import { silentLogger } from '../../src/util/logger.js';
import { guardedTool } from './support/guarded-tool.js';

/** An in-memory audit log keeping intents and events. */
function memoryAudit(): AuditLog & { intents: AuditIntent[]; events: AuditEvent[]; details: (string | null)[] } {
  const intents: AuditIntent[] = [];
  const events: AuditEvent[] = [];
  const details: (string | null)[] = [];
  return {
    intents,
    events,
    details,
    recordIntent: (intent) => Promise.resolve(`call${intents.push(intent)}`),
    recordOutcome: (_id, report) => {
      details.push(report.detail ?? null);
      return Promise.resolve();
    },
    recordEvent: (event) => void events.push(event),
  };
}

/** A write tool of an untrusted server, approved as it is now (or as `description` says). */
function writeTool(description = 'writes a note', rule?: GuardedTool['rule']): GuardedTool {
  const claimed = { readOnlyHint: false, destructiveHint: false, openWorldHint: false };
  return guardedTool('write_note', claimed, { description, ...(rule ? { rule } : {}) });
}

/** A person at the client who declines everything, counting the questions. */
function decliningPerson(): ClientChannel & { asked: number } {
  const person = {
    asked: 0,
    canElicit: () => true,
    elicit: () => {
      person.asked += 1;
      return Promise.resolve<ElicitResult>({ action: 'decline' });
    },
  };
  return person;
}

const given = (sha256: string, args: StandingAnswer['arguments'] = {}): StandingAnswer => ({
  sha256,
  arguments: args,
  by: 'alice',
  at: '2026-12-03T17:00:00.000Z',
});

function guardWith(tool: GuardedTool, standing: () => StandingAnswer | undefined) {
  const audit = memoryAudit();
  const guard = new CallGuard({
    server: 'notes',
    session: 's1',
    trust: 'untrusted',
    tools: new Map([[tool.name, tool]]),
    preApprovals: [],
    audit,
    approvalTimeoutMs: 1000,
    profileFile: '/p/notes.yaml',
    log: silentLogger,
    standingAnswer: (name) => (name === tool.name ? standing() : undefined),
  });
  return { guard, audit };
}

describe('CallGuard: standing answers', () => {
  // proves: STANDING-ANSWERS
  it("runs an untrusted server's call on the person's standing answer without a question, audited as decided by it and naming it", async () => {
    const tool = writeTool();
    const { guard, audit } = guardWith(tool, () => given(tool.pin.hash, { path: { under: '/workspace/notes' } }));
    const person = decliningPerson();
    const admitted = await guard.admit('write_note', { path: '/workspace/notes/a.md' }, person);
    assert.equal(admitted.allowed, true);
    assert.equal(person.asked, 0, 'nobody was asked');
    assert.equal(audit.intents[0]?.decidedBy, 'standing');
    assert.deepEqual(audit.events, [
      {
        type: 'standing.used',
        session: 's1',
        server: 'notes',
        tool: 'write_note',
        callId: 'call1',
        pin: tool.pin.hash,
        givenBy: 'alice',
        givenAt: '2026-12-03T17:00:00.000Z',
      },
    ]);
  });

  // proves: STANDING-ANSWERS
  it('asks the person again for arguments outside the standing answer, and for every call once it is revoked', async () => {
    const tool = writeTool();
    let standing: StandingAnswer | undefined = given(tool.pin.hash, { path: { under: '/workspace/notes' } });
    const { guard, audit } = guardWith(tool, () => standing);
    const person = decliningPerson();
    const outside = await guard.admit('write_note', { path: '/workspace/notes/../.git/config' }, person);
    assert.equal(outside.allowed, false);
    assert.equal(person.asked, 1);
    standing = undefined; // revoked (the lock file is read again at each call)
    const revoked = await guard.admit('write_note', { path: '/workspace/notes/a.md' }, person);
    assert.equal(revoked.allowed, false);
    assert.equal(person.asked, 2);
    assert.deepEqual(
      audit.intents.map((i) => [i.decision, i.decidedBy]),
      [
        ['denied', 'person'],
        ['denied', 'person'],
      ],
    );
  });

  // proves: STANDING-ANSWERS
  it('voids a standing answer given for another definition of the tool: asks the person, audits the voiding once', async () => {
    const approvedThen = writeTool('writes a note');
    const now = writeTool('writes a note; also uploads it'); // approved again since (or only narrowed)
    const { guard, audit } = guardWith(now, () => given(approvedThen.pin.hash));
    const person = decliningPerson();
    assert.equal((await guard.admit('write_note', {}, person)).allowed, false);
    assert.equal((await guard.admit('write_note', {}, person)).allowed, false);
    assert.equal(person.asked, 2);
    assert.deepEqual(
      audit.events.filter((e) => e.type.startsWith('standing.')),
      [
        {
          type: 'standing.voided',
          session: 's1',
          server: 'notes',
          tool: 'write_note',
          pin: now.pin.hash,
          givenFor: approvedThen.pin.hash,
        },
      ],
    );
  });

  // proves: STANDING-ANSWERS
  it('never stands in for a profile rule that demands confirmation, nor after the server broke a hint, nor for a tool that is not approved', async () => {
    const ruled = writeTool('writes a note', 'confirm');
    const person = decliningPerson();
    const one = guardWith(ruled, () => given(ruled.pin.hash));
    assert.equal((await one.guard.admit('write_note', {}, person)).allowed, false);
    const tool = writeTool();
    const two = guardWith(tool, () => given(tool.pin.hash));
    two.guard.markUntrusted('write_note broke its readOnlyHint');
    assert.equal((await two.guard.admit('write_note', {}, person)).allowed, false);
    const changed = { ...writeTool(), pinState: 'changed' as const };
    const three = guardWith(changed, () => given(changed.pin.hash));
    assert.equal((await three.guard.admit('write_note', {}, person)).allowed, false);
    assert.equal(three.audit.intents[0]?.decision, 'blocked');
    assert.equal(person.asked, 2);
  });

  it('asks the person when the standing answer cannot be read', async () => {
    const tool = writeTool();
    const { guard } = guardWith(tool, () => {
      throw new Error('lock file: not JSON');
    });
    const person = decliningPerson();
    assert.equal((await guard.admit('write_note', {}, person)).allowed, false);
    assert.equal(person.asked, 1);
  });
});

describe("CallGuard: the person's answer through the form", () => {
  // proves: FORM-ANSWER-SAID
  it('records a form accepted without ticking approve as declined, and says why in the answer and the audit', async () => {
    const tool = writeTool();
    const { guard, audit } = guardWith(tool, () => undefined);
    let form = '';
    const unticked: ClientChannel = {
      canElicit: () => true,
      elicit: (params) => {
        form = params.message;
        return Promise.resolve<ElicitResult>({ action: 'accept', content: { approve: false } });
      },
    };
    const admitted = await guard.admit('write_note', {}, unticked);
    assert.equal(admitted.allowed, false);
    const text = admitted.allowed ? '' : JSON.stringify(admitted.result.content);
    assert.match(
      text,
      /hintbox denied write_note: the confirmation was declined: the form was submitted without \\"approve\\" ticked/,
    );
    assert.deepEqual([audit.intents[0]?.decision, audit.intents[0]?.decidedBy], ['denied', 'person']);
    assert.match(audit.details[0] ?? '', /without "approve" ticked \(submitting is not approving\)/);
    // The standing answer is offered as a command for the person, not as a field of the form.
    assert.match(
      form,
      /Only you can allow this tool always, in a terminal: hintbox approve \/p\/notes\.yaml --always write_note/,
    );
  });
});
