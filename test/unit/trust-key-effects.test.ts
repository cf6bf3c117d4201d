import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ineffectiveKeys } from '../../src/profile/trust-key-effects.js';

describe('ineffectiveKeys', () => {
  // proves: TRUST-KEYS-HAVE-EFFECT
  it('refuses approval: allow and pre-approvals on an untrusted profile, and nothing on a trusted one', () => {
    const profile = {
      tools: {
        read_file: { approval: 'allow' as const },
        'a.b': { approval: 'allow' as const },
        w: { approval: 'confirm' as const },
      },
      preApprove: [{ tool: 'read_file' }],
    };
    const found = ineffectiveKeys({ ...profile, trust: 'untrusted' });
    assert.deepEqual(
      found.map((k) => k.at),
      [
        ['tools', 'read_file', 'approval'],
        ['tools', 'a.b', 'approval'],
        ['preApprove', 0],
      ],
    );
    for (const key of found)
      assert.match(key.message, /no effect here: every call of an untrusted server is confirmed/);
    assert.deepEqual(ineffectiveKeys({ ...profile, trust: 'trusted' }), []);
    assert.deepEqual(ineffectiveKeys({ trust: 'untrusted', tools: { w: { approval: 'deny' } }, preApprove: [] }), []);
  });
});
