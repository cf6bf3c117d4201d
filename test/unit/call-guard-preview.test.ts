import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import { CallGuard, type ClientChannel, type GuardedTool } from '../../src/gateway/call-guard.js';
import type { ServerTrust } from '../../src/policy/approval-decision.js';
import type { ClaimedHints } from '../../src/policy/hints.js';
import type { CallPreview, CallPreviewer } from '../../src/sandbox/preview.js';
import type { AuditLog } from '../../src/audit/audit-record.js';
import { silentLogger } from '../../src/util/logger.js';
import { guardedTool } from './support/guarded-tool.js';

const audit: AuditLog = {
  recordIntent: () => Promise.resolve('a1'),
  recordOutcome: () => Promise.resolve(),
};

const tool = (name: string, claimed: ClaimedHints): GuardedTool => guardedTool(name, claimed);

function person(approve: boolean): ClientChannel & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    canElicit: () => true,
    elicit: (params) => {
      asked.push(params.message);
      return Promise.resolve<ElicitResult>({ action: 'accept', content: { approve } });
    },
  };
}

function guardWith(preview: () => Promise<CallPreview>, trust: ServerTrust = 'untrusted') {
  const calls: string[] = [];
  const previewer: CallPreviewer = {
    preview: (sandbox, name) => {
      calls.push(`${sandbox}/${name}`);
      return preview();
    },
  };
  const guard = new CallGuard({
    server: 'fs',
    session: 's1',
    trust,
    tools: new Map([
      ['write', tool('write', { readOnlyHint: false, destructiveHint: true, openWorldHint: false })],
      ['read', tool('read', { readOnlyHint: true, openWorldHint: false })],
    ]),
    preApprovals: [],
    audit,
    approvalTimeoutMs: 1000,
    profileFile: '/p.yaml',
    log: silentLogger,
    previewer,
  });
  return { guard, calls };
}

describe('CallGuard with a previewer', () => {
  it('shows the preview in the confirmation, and the person still decides', async () => {
    const { guard, calls } = guardWith(() => Promise.resolve({ available: true, text: 'Preview (…):\nadded: /w/x' }));
    const yes = person(true);
    assert.equal((await guard.admit('write', { path: '/w/x' }, yes)).allowed, true);
    assert.deepEqual(calls, ['rw-offline/write']);
    // Last, after hintbox's own text, and fenced: server-made lines cannot pass for hintbox's.
    assert.match(yes.asked[0] ?? '', /Why you are asked[\s\S]*Arguments[\s\S]*\nPreview \(…\):\n│ added: \/w\/x$/);
    const no = person(false);
    assert.equal((await guard.admit('write', {}, no)).allowed, false, 'a preview never approves');
  });

  it('says why there is no preview, and a failing previewer never blocks the call', async () => {
    const none = guardWith(() =>
      Promise.resolve({ available: false, reason: 'no preview: the mount /w is too large' }),
    );
    const a = person(true);
    assert.equal((await none.guard.admit('write', {}, a)).allowed, true);
    assert.match(a.asked[0] ?? '', /\nNo preview: the mount \/w is too large\.$/);

    const broken = guardWith(() => Promise.reject(new Error('docker is gone\nstack')));
    const b = person(true);
    assert.equal((await broken.guard.admit('write', {}, b)).allowed, true, 'the call is still admitted');
    assert.match(b.asked[0] ?? '', /\nNo preview: the dry run failed: docker is gone\.$/);
  });

  it('fences a preview so that a forged line cannot pass for hintbox text, and shows control characters', async () => {
    const forged = 'Preview (…):\nadded: x\nWhy you are asked: routine read.\nArguments:\n{}\u001b[2J';
    const { guard } = guardWith(() => Promise.resolve({ available: true, text: forged }));
    const p = person(false);
    await guard.admit('write', { path: '/w/x' }, p);
    const message = p.asked[0] ?? '';
    assert.equal(message.match(/^Why you are asked/gm)?.length, 1, 'one unfenced "Why you are asked", hintbox’s own');
    assert.match(message, /\n│ Why you are asked: routine read\.\n│ Arguments:\n│ \{\}\\u001b\[2J$/);
  });

  // proves: SERVER-TEXT
  it('fences every line a reader sees: a U+2028, U+2029 or CR in a previewed file name starts none', async () => {
    const forged = [
      'Preview (…):',
      'added: a\u2028Why you are asked: routine read.',
      'added: b\u2029Arguments (in full):',
      'added: c\rhintbox: no changes.',
      'added: d\u202etxt.exe',
    ].join('\n');
    const { guard } = guardWith(() => Promise.resolve({ available: true, text: forged }));
    const p = person(false);
    await guard.admit('write', { path: '/w/x' }, p);
    const message = p.asked[0] ?? '';
    const fenced = message.slice(message.indexOf('Preview (…):'));
    assert.deepEqual(fenced.split(/\r\n|[\n\r\u2028\u2029]/u), [
      'Preview (…):',
      '│ added: a\\u2028Why you are asked: routine read.',
      '│ added: b\\u2029Arguments (in full):',
      '│ added: c\\u000dhintbox: no changes.',
      '│ added: d\\u202etxt.exe',
    ]);
  });

  it('runs no preview for calls that are not confirmed', async () => {
    const { guard, calls } = guardWith(() => Promise.resolve({ available: true, text: 'x' }), 'trusted');
    const p = person(true);
    assert.equal((await guard.admit('read', {}, p)).allowed, true);
    assert.equal(p.asked.length, 0, 'a trusted, enforced read-only tool is not confirmed');
    assert.deepEqual(calls, [], 'and not previewed');
  });
});
