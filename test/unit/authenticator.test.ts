import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bearerChallenge, bearerToken, coversTags } from '../../src/serve/authenticator.js';

describe('the authenticator seam of hintbox serve', () => {
  it('reads a bearer token, and nothing else, from an Authorization header', () => {
    assert.equal(bearerToken('Bearer abc.def'), 'abc.def');
    assert.equal(bearerToken('bearer  abc '), 'abc');
    for (const header of [undefined, '', 'Basic abc', 'Bearer', 'Bearer a b'])
      assert.equal(bearerToken(header), undefined);
  });

  it('lets a session be used only by access that allows at least its tags', () => {
    assert.equal(coversTags(undefined, undefined), true);
    assert.equal(coversTags(undefined, ['read']), true);
    assert.equal(coversTags(['read'], undefined), false, 'a limited token may not ride on an unlimited session');
    assert.equal(coversTags(['read', 'helm'], ['read']), true);
    assert.equal(coversTags(['read'], ['read', 'helm']), false);
  });

  it('writes RFC 6750 challenges with quoted, escaped values and leaves out what is undefined', () => {
    assert.equal(bearerChallenge({}), 'Bearer');
    assert.equal(
      bearerChallenge({ resource_metadata: 'https://h/.well-known/x', error: undefined, scope: 'a b' }),
      'Bearer resource_metadata="https://h/.well-known/x", scope="a b"',
    );
    assert.equal(
      bearerChallenge({ error_description: 'the "x" claim \\ y' }),
      'Bearer error_description="the \\"x\\" claim \\\\ y"',
    );
  });
});
