import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { SECURITY_INVARIANTS } from '../security-invariants.js';
import { renderSecurityDoc, SECURITY_DOC, SECURITY_DOC_SOURCE } from '../support/security-doc.js';

const read = (file: string): string => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

describe('docs/security.md', () => {
  it('is what npm run docs makes of the invariants and the source page today', () => {
    const expected = renderSecurityDoc(read(SECURITY_DOC_SOURCE), SECURITY_INVARIANTS);
    assert.ok(read(SECURITY_DOC) === expected, `${SECURITY_DOC} is out of date: run npm run docs`);
  });

  it('lists every invariant with each of its tests', () => {
    const page = read(SECURITY_DOC);
    for (const { id, tests } of SECURITY_INVARIANTS) {
      assert.ok(page.includes(`| \`${id}\` |`), `${id} is not on the page`);
      for (const { file } of tests) assert.ok(page.includes(`](../test/${file})`), `${id}: ${file} is not on the page`);
    }
  });

  it('refuses a source without exactly one place for the invariants', () => {
    assert.throws(() => renderSecurityDoc('# page\n', SECURITY_INVARIANTS), /needs the line <!-- invariants -->/);
  });
});
