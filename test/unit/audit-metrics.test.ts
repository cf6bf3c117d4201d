import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AuditEvent, AuditIntent } from '../../src/audit/audit-record.js';
import { AuditMetrics, type MetricUpdate } from '../../src/serve/audit-metrics.js';

const HINTS = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false };

function intent(tool: string, decision: AuditIntent['decision'], decidedBy: AuditIntent['decidedBy']): AuditIntent {
  return {
    session: 's1',
    server: 'fs',
    tool,
    tags: [],
    claimedHints: {},
    effectiveHints: HINTS,
    sandbox: decision === 'blocked' ? null : 'rw',
    decision,
    decidedBy,
    pinHash: null,
  };
}

describe('metrics derived from audit records', () => {
  it('counts an allowed call once, by its outcome, and times it from intent to outcome', () => {
    const metrics = new AuditMetrics({ now: () => 0 });
    assert.deepEqual(metrics.intent('c1', intent('write_file', 'allowed', 'person'), 1000), []);
    assert.deepEqual(metrics.outcome('c1', { outcome: 'tool-error' }, 1250), [
      { metric: 'calls', labels: { server: 'fs', tool: 'write_file', outcome: 'tool-error' }, value: 1 },
      { metric: 'callSeconds', labels: { server: 'fs', tool: 'write_file' }, value: 0.25 },
    ]);
    // Its outcome is counted once: a second report (which the log refuses anyway) adds nothing.
    assert.deepEqual(metrics.outcome('c1', { outcome: 'ok' }, 2000), []);
    assert.deepEqual(metrics.outcome('unknown', { outcome: 'ok' }, 2000), []);
  });

  it('counts a refused call as a refusal, by decision and decider, and as not-run, without a duration', () => {
    const metrics = new AuditMetrics({ now: () => 0 });
    assert.deepEqual(metrics.intent('c1', intent('write_file', 'denied', 'person')), [
      {
        metric: 'refusals',
        labels: { server: 'fs', tool: 'write_file', decision: 'denied', decided_by: 'person' },
        value: 1,
      },
    ]);
    assert.deepEqual(metrics.outcome('c1', { outcome: 'not-run' }), [
      { metric: 'calls', labels: { server: 'fs', tool: 'write_file', outcome: 'not-run' }, value: 1 },
    ]);
    const [blocked] = metrics.intent('c2', intent('edit_file', 'blocked', 'pin'));
    assert.deepEqual(blocked?.labels, { server: 'fs', tool: 'edit_file', decision: 'blocked', decided_by: 'pin' });
  });

  // proves: METRICS-ACCESS
  it('labels pinned tools by name, at most N other names per server, and the rest as other', () => {
    const metrics = new AuditMetrics({ now: () => 0, maxUnpinnedTools: 2 });
    metrics.pin('fs', ['read_file']);
    const toolOf = (id: string, tool: string, server = 'fs'): string | undefined => {
      metrics.intent(id, { ...intent(tool, 'allowed', 'auto'), server });
      return metrics.outcome(id, { outcome: 'ok' })[0]?.labels.tool;
    };
    assert.deepEqual(
      ['a', 'b', 'c', 'a', 'read_file', 'd'].map((tool, i) => toolOf(`x${i}`, tool)),
      ['a', 'b', 'other', 'a', 'read_file', 'other'],
    );
    assert.equal(toolOf('y', 'c', 'other-server'), 'c', 'each server has its own bound');
    metrics.pin('fs', ['c']);
    assert.equal(toolOf('z', 'c'), 'c', 'a tool pinned later is labelled by name');
  });

  it('counts confirmations, denials, violations, sandboxes and server requests from events', () => {
    const metrics = new AuditMetrics({ now: () => 0 });
    const base = { session: 's1', server: 'fs' };
    const updates = (event: AuditEvent): MetricUpdate[] => metrics.event(event);
    assert.deepEqual(updates({ ...base, type: 'approval.asked', tool: 'write_file', reasons: ['destructive'] }), []);
    assert.deepEqual(updates({ ...base, type: 'approval.answered', tool: 'write_file', answer: 'declined' }), [
      { metric: 'confirmations', labels: { server: 'fs', tool: 'write_file', answer: 'declined' }, value: 1 },
    ]);
    assert.deepEqual(
      updates({
        type: 'auth.denied',
        session: null,
        server: 'fs',
        status: 403,
        reason: 'token not allowed for fs',
        caller: 'bot',
        remoteAddress: '127.0.0.1',
      }),
      [{ metric: 'authDenials', labels: { server: 'fs', status: '403' }, value: 1 }],
    );
    const violation = (text: string): string | undefined =>
      updates({ ...base, type: 'hint.violation', tool: 'a, b', sandbox: 'ro', violation: text })[0]?.labels.hint;
    assert.equal(
      violation('readOnlyHint: the tool tried to write where its sandbox is read-only (EROFS)'),
      'readOnlyHint',
    );
    assert.equal(violation("the profile's database grant: Postgres refused the role"), 'other');
    assert.equal(violation('readOnlyHint'), 'other', 'only the "<hint>:" prefix names a hint');
    const sandbox = { ...base, sandbox: 'ro', container: 'abc' };
    assert.deepEqual(
      [...updates({ ...sandbox, type: 'sandbox.start' }), ...updates({ ...sandbox, type: 'sandbox.stop' })].map((u) => [
        u.metric,
        u.labels.server,
        u.value,
      ]),
      [
        ['sandboxes', 'fs', 1],
        ['sandboxes', 'fs', -1],
      ],
    );
    const request = (method: string): MetricUpdate[] =>
      updates({
        ...base,
        type: 'server.request',
        ref: 'r1',
        sandbox: 'ro',
        method,
        boundTo: null,
        decision: 'refused',
        reason: 'no call in flight',
      });
    assert.deepEqual(request('sampling/createMessage')[0]?.labels, {
      server: 'fs',
      method: 'sampling/createMessage',
      decision: 'refused',
    });
    assert.equal(request('x/'.repeat(1000))[0]?.labels.method, 'other');
  });
});
