import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { KEPT, keptTargets, LONGEST_KEPT, requestTarget } from '../../src/serve/request-target.js';

/** What `new URL` reads of a target: the answer requestTarget must give, kept or not. */
function byUrl(target: string): { pathname: string; search: string } | undefined {
  try {
    const url = new URL(target, 'http://hintbox');
    return { pathname: url.pathname, search: url.search };
  } catch {
    return undefined;
  }
}

const tricky = [
  '/mcp/fs-1',
  '/mcp/fs-1/',
  '/mcp/../mcp/fs-1',
  '/mcp/%2e%2e/healthz',
  '/mcp/a%2Fb',
  '/readyz?verified=1',
  '/readyz?verified',
  '/mcp/fs 1',
  '\\mcp\\fs-1',
  '//evil.example/mcp/fs-1',
  'http://other.example/mcp/fs-1?x#y',
  'http://[::1',
  '/mcp/é',
  '',
];

describe('requestTarget', () => {
  it('reads every target as URL does, the first time and when kept', () => {
    for (const target of tricky) {
      assert.deepEqual(requestTarget(target) && { ...requestTarget(target) }, byUrl(target), target);
      assert.deepEqual(requestTarget(target) && { ...requestTarget(target) }, byUrl(target), `${target} (kept)`);
    }
    assert.deepEqual({ ...requestTarget(undefined) }, byUrl('/'));
  });

  it('keeps agreeing with URL over generated targets, past the table starting again', () => {
    const segment = fc.stringMatching(/^[a-zA-Z0-9._~%!$&'()*+,;=:@ ?#\\é-]{0,8}$/);
    fc.assert(
      fc.property(fc.array(segment, { minLength: 0, maxLength: 4 }), (segments) => {
        const target = `/${segments.join('/')}`;
        const answer = requestTarget(target);
        assert.deepEqual(answer && { ...answer }, byUrl(target));
      }),
      { numRuns: 2000 },
    );
  });

  it('gives one frozen answer: a caller cannot change what the next request reads', () => {
    const first = requestTarget('/mcp/frozen');
    assert.ok(first && Object.isFrozen(first));
    assert.throws(() => {
      (first as { pathname: string }).pathname = '/healthz';
    }, TypeError);
    assert.equal(requestTarget('/mcp/frozen')?.pathname, '/mcp/frozen');
  });

  it('keeps at most KEPT targets, none longer than LONGEST_KEPT, and answers each as URL does all the same', () => {
    for (let i = 0; i < KEPT * 3; i++) requestTarget(`/mcp/bound-${i}`);
    assert.ok(keptTargets() <= KEPT, `${keptTargets()} targets kept`);
    const before = keptTargets();
    const long = `/mcp/${'<'.repeat(LONGEST_KEPT)}`;
    assert.deepEqual({ ...requestTarget(long) }, byUrl(long));
    assert.equal(keptTargets(), before, 'a target longer than LONGEST_KEPT was kept');
  });
});
