import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HEAD_CHARS, networkFailureIn, networkRefusal } from '../../src/policy/network-refusal.js';

const answer = (text: string, isError?: boolean) => ({
  content: [{ type: 'text', text }],
  ...(isError === undefined ? {} : { isError }),
});
const offline = { networked: false, claimed: {} };

describe('a network refusal read from an answer', () => {
  // proves: NETWORK-REFUSAL-AUDITED
  it('takes "fetch failed" and resolver errors of an open-world tool without a network, and nothing else', () => {
    for (const text of [
      'fetch failed',
      'Error: fetch failed (cause: getaddrinfo EAI_AGAIN example.invalid)',
      'getaddrinfo ENOTFOUND api.example.com',
      'HTTPConnectionPool: [Errno -3] Temporary failure in name resolution',
      'connect ENETUNREACH 192.0.2.1:443',
    ]) {
      assert.ok(networkFailureIn(answer(text)), text);
      assert.match(
        networkRefusal(offline, answer(text)) ?? '',
        /^network: the tool claims an open world but its sandbox has no network/,
      );
    }
    // Ordinary text, a refused connection (loopback answers it anywhere), an answer marked isError.
    for (const text of ['The fetch succeeded.', 'connect ECONNREFUSED 127.0.0.1:5432', 'fetched 3 failed builds'])
      assert.equal(networkFailureIn(answer(text)), undefined, text);
    assert.equal(networkFailureIn(answer('fetch failed', true)), undefined, 'isError: the server said so already');
    // Only the head of a text item, where an error message is: a page quoting one further down is a page.
    assert.equal(networkFailureIn(answer(`${'x'.repeat(HEAD_CHARS)} fetch failed`)), undefined);
    assert.equal(networkFailureIn({ content: [{ type: 'image', data: 'fetch failed' }] }), undefined);
    assert.equal(networkFailureIn('fetch failed'), undefined);
    // A tool with a network, or one that claims a closed world, is not read.
    assert.equal(networkRefusal({ networked: true, claimed: {} }, answer('fetch failed')), undefined);
    assert.equal(
      networkRefusal({ networked: false, claimed: { openWorldHint: false } }, answer('fetch failed')),
      undefined,
    );
    assert.equal(networkRefusal(undefined, answer('fetch failed')), undefined);
  });
});
