import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compilePreApprovals, matchesPreApproval } from '../../src/gateway/call-guard.js';
import { hasDotDotSegment, isPathUnder } from '../../src/policy/argument-rule.js';

const ESCAPES = [
  '/workspace/scratch/../notes.txt',
  '/workspace/scratch/./../notes.txt',
  '/workspace/scratch//../notes.txt',
  '/workspace/scratch/a/../../notes.txt',
  '/workspace/scratch/..',
  '/workspace/scratchpad/x',
  '/workspace/scratch',
  '/workspace/scratch/',
  'scratch/x.txt',
  './scratch/x.txt',
  '../workspace/scratch/x',
  '',
  '/workspace/scratch/x\0y',
];

describe('pre-approval rules', () => {
  // proves: PRE-APPROVE-PATHS
  it('a path rule (under:) matches only absolute paths strictly inside its folder, never one with ..', () => {
    const [rule] = compilePreApprovals([{ tool: 'write', arguments: { path: { under: '/workspace/scratch/' } } }]);
    const ok = (value: unknown): boolean => matchesPreApproval(rule!, 'write', { path: value });
    for (const inside of ['/workspace/scratch/a.txt', '/workspace/scratch//a/./b.txt', '/workspace/scratch/..a/b']) {
      assert.equal(ok(inside), true, inside);
    }
    for (const escape of [...ESCAPES, 42, ['/workspace/scratch/a'], null, undefined]) {
      assert.equal(ok(escape), false, JSON.stringify(escape));
    }
    assert.equal(matchesPreApproval(rule!, 'write', {}), false, 'a missing argument never matches');
    assert.equal(matchesPreApproval(rule!, 'other', { path: '/workspace/scratch/a' }), false);
  });

  // proves: PRE-APPROVE-PATHS
  it('a regex rule matches raw text, but never a value with a .. path segment', () => {
    const [rule] = compilePreApprovals([{ tool: 'write', arguments: { path: '/workspace/scratch/.*' } }]);
    const ok = (value: unknown): boolean => matchesPreApproval(rule!, 'write', { path: value });
    assert.equal(ok('/workspace/scratch/a.txt'), true);
    assert.equal(ok('/workspace/scratch/..a'), true, 'a name that starts with .. is no walk out');
    for (const escape of ['/workspace/scratch/../notes.txt', '/workspace/scratch/a/../../x', '/workspace/scratch/..']) {
      assert.equal(ok(escape), false, escape);
    }
    const [any] = compilePreApprovals([{ tool: 'read', arguments: { paths: '.*' } }]);
    assert.equal(matchesPreApproval(any!, 'read', { paths: ['/a/../b'] }), false, 'the JSON of a value is checked too');
    assert.equal(matchesPreApproval(any!, 'read', { paths: ['/a/b'] }), true);
  });

  it('isPathUnder and hasDotDotSegment', () => {
    assert.equal(isPathUnder('/x/y', '/'), true);
    assert.equal(isPathUnder('/', '/'), false);
    assert.equal(hasDotDotSegment('a..b/c'), false);
    assert.equal(hasDotDotSegment('../a'), true);
    assert.equal(hasDotDotSegment('a/..'), true);
  });
});
