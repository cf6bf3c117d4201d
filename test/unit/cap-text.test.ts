import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { capText } from '../../src/util/cap-text.js';

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

describe('capText', () => {
  it('keeps text that fits, whole and without a hash', () => {
    assert.deepEqual(capText('', 0), { kept: '' });
    assert.deepEqual(capText('abc', 3), { kept: 'abc' });
    assert.deepEqual(capText('é'.repeat(5), 10), { kept: 'é'.repeat(5) });
  });

  it('keeps a prefix of at most the limit, and the size and SHA-256 of the whole', () => {
    const whole = `boom ${'x'.repeat(1_000_000)}`;
    const capped = capText(whole, 100);
    assert.equal(capped.kept, whole.slice(0, 100));
    assert.deepEqual(capped.whole, { bytes: 1_000_005, sha256: sha256(whole) });
  });

  it('never cuts inside a character', () => {
    for (const [text, max, kept] of [
      ['aé', 2, 'a'], // é is 2 bytes
      ['a€', 3, 'a'], // € is 3 bytes
      ['a😀', 4, 'a'], // 😀 is 4 bytes (a surrogate pair)
      ['😀😀', 5, '😀'],
      ['€€', 0, ''],
    ] as const) {
      const capped = capText(text, max);
      assert.equal(capped.kept, kept, `${text} at ${max}`);
      assert.equal(capped.whole?.bytes, Buffer.byteLength(text));
      assert.ok(!capped.kept.includes('\ufffd'));
    }
  });
});
