import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  parseLockFile,
  serializeLockFile,
  standingAnswerOf,
  withStandingAnswer,
} from '../../src/approvals/lock-file.js';
import { lockOf, writeTool } from './support/lock-fixtures.js';
import { describeStanding, standingVerdict, type StandingAnswer } from '../../src/policy/standing-answer.js';

const PIN = 'a'.repeat(64);
const answer = (args: StandingAnswer['arguments']): StandingAnswer => ({
  sha256: PIN,
  arguments: args,
  by: 'alice',
  at: '2026-12-03T17:00:00.000Z',
});

describe('standingVerdict', () => {
  it('applies to every call of the tool when it lists no argument, while the definition is the one it was given for', () => {
    assert.equal(standingVerdict(answer({}), PIN, {}), 'applies');
    assert.equal(standingVerdict(answer({}), PIN, undefined), 'applies');
    assert.equal(standingVerdict(answer({}), 'b'.repeat(64), {}), 'voided');
  });

  // proves: STANDING-ANSWERS
  it('asks again for arguments outside the patterns: a missing argument, a walk out of the folder, a partial regex match', () => {
    const under = answer({ path: { under: '/workspace/notes' } });
    assert.equal(standingVerdict(under, PIN, { path: '/workspace/notes/a.md' }), 'applies');
    assert.equal(standingVerdict(under, PIN, { path: '/workspace/notes/../secret' }), 'outside');
    assert.equal(standingVerdict(under, PIN, { path: '/workspace/notes' }), 'outside');
    assert.equal(standingVerdict(under, PIN, { path: '/workspace/notesx/a' }), 'outside');
    assert.equal(standingVerdict(under, PIN, {}), 'outside');
    const regex = answer({ query: 'SELECT [a-z ]+' });
    assert.equal(standingVerdict(regex, PIN, { query: 'SELECT name from t' }), 'applies');
    assert.equal(standingVerdict(regex, PIN, { query: 'SELECT x; DROP TABLE t' }), 'outside');
    // A changed definition voids it before any argument is looked at.
    assert.equal(standingVerdict(regex, 'c'.repeat(64), { query: 'SELECT x' }), 'voided');
  });

  it('describes its scope, who gave it and for which definition', () => {
    assert.equal(
      describeStanding(answer({ path: { under: '/w' }, q: 'a|b' })),
      `calls where path under /w and q matches /a|b/ (given by alice at 2026-12-03T17:00:00.000Z, for definition ${PIN.slice(0, 12)})`,
    );
    assert.match(describeStanding(answer({})), /^every call \(given by alice/);
  });
});

describe('the lock file keeps standing answers', () => {
  it('writes them only when there are some, reads them back, and refuses a hand edit that is not one', () => {
    const lock = lockOf(writeTool);
    assert.doesNotMatch(serializeLockFile(lock), /standing/, 'older lock files read and write the same');
    const pin = lock.tools.write_file!.sha256;
    const given = withStandingAnswer(lock, 'write_file', answer({ path: { under: '/w' } }));
    const text = serializeLockFile({
      ...given,
      standing: { write_file: { ...given.standing.write_file!, sha256: pin } },
    });
    assert.equal(standingAnswerOf(parseLockFile(text, 'x.lock.json', 'fs'), 'write_file')?.sha256, pin);
    assert.equal(
      serializeLockFile(withStandingAnswer(parseLockFile(text, 'x', 'fs'), 'write_file', undefined)),
      serializeLockFile(lock),
    );
    const edited = (entry: unknown) => {
      const value = JSON.parse(text) as { standing: Record<string, unknown> };
      value.standing.write_file = entry;
      return () => parseLockFile(JSON.stringify(value), 'x.lock.json', 'fs');
    };
    const base = { sha256: pin, arguments: {}, by: 'a', at: 't' };
    assert.throws(
      edited({ ...base, sha256: 'nope' }),
      /x\.lock\.json: standing\.write_file\.sha256: expected a SHA-256/,
    );
    assert.throws(
      edited({ ...base, arguments: { q: '(' } }),
      /standing\.write_file\.arguments\.q: not a regular expression/,
    );
    assert.throws(edited({ ...base, arguments: { p: { under: 'rel' } } }), /standing\.write_file\.arguments\.p/);
    assert.throws(edited({ ...base, extra: true }), /standing\.write_file/);
  });
});
