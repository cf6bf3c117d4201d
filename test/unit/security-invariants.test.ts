import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { SECURITY_INVARIANTS } from '../security-invariants.js';

const quoted = (title: string): string[] => [`'${title}'`, `"${title}"`, `\`${title}\``];

describe('security invariants', () => {
  it('have unique ids', () => {
    const ids = SECURITY_INVARIANTS.map((i) => i.id);
    assert.deepEqual(ids, [...new Set(ids)]);
  });

  for (const invariant of SECURITY_INVARIANTS) {
    it(`${invariant.id} is covered by tests that exist`, () => {
      assert.ok(invariant.tests.length > 0, `${invariant.id} has no test`);
      for (const { file, title } of invariant.tests) {
        const source = readFileSync(new URL(`../${file}`, import.meta.url), 'utf8');
        assert.ok(
          quoted(title).some((q) => source.includes(`it(${q}`)),
          `${invariant.id}: no it(${JSON.stringify(title)}) in test/${file}`,
        );
      }
    });
  }
});
