import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { SessionCap } from '../../src/serve/session-cap.js';
import { callerFields, callerKey, callerText, sameCaller, type Caller } from '../../src/util/caller-identity.js';
import { fuzzParameters } from './support/fuzz.js';

/** A caller is the pair (subject, client): its key tells every two pairs apart, and the cap counts by it. */

/** Texts meant to collide: the joined display form's pieces, JSON's own quotes and separators. */
const piece = fc.oneof(
  fc.string(),
  fc.constantFrom('alice', 'ide', 'alice (client ide)', ' (client ', ')', '"', '","', '\\', 'null', '[', ']', ''),
);
const caller: fc.Arbitrary<Caller | null> = fc.oneof(
  fc.constant(null),
  fc.record({ subject: piece }),
  fc.record({ subject: piece, client: piece }),
);
const same = (a: Caller | null, b: Caller | null): boolean =>
  a === null || b === null ? a === b : a.subject === b.subject && a.client === b.client;

describe('caller identity', () => {
  // proves: CALLER-IDENTITY
  it('maps two distinct (subject, client) pairs to two distinct keys, and a pair always to the same one', () => {
    fc.assert(
      fc.property(caller, caller, (a, b) => {
        assert.equal(callerKey(a) === callerKey(b), same(a, b), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
        assert.equal(sameCaller(a, b), same(a, b));
      }),
      fuzzParameters(2000),
    );
    // The attack's pair, spelled out: the joined text that both would read as.
    const pair = { subject: 'alice', client: 'ide' };
    const lookalike = { subject: 'alice (client ide)' };
    assert.equal(callerText(pair), callerText(lookalike), 'the same text to read…');
    assert.notEqual(callerKey(pair), callerKey(lookalike), '…never the same key');
    assert.equal(sameCaller({ subject: 'bot', client: 'bot' }, { subject: 'bot' }), false);
    assert.equal(sameCaller(null, undefined), true);
  });

  it("writes an audit record's caller and client as two fields, none for nobody", () => {
    assert.deepEqual(callerFields({ subject: 'alice', client: 'ide' }), { caller: 'alice', client: 'ide' });
    assert.deepEqual(callerFields({ subject: 'alice (client ide)' }), { caller: 'alice (client ide)' });
    assert.deepEqual(callerFields(null), {});
  });
});

describe('the session cap', () => {
  // proves: SESSION-CAP
  it("counts each caller's sessions by weight (a /mcp session one per server), apart for each pair", () => {
    const cap = new SessionCap(4);
    const alice = { subject: 'alice', client: 'ide' };
    const combined = cap.reserve(alice, 3);
    assert.ok('release' in combined);
    assert.match(
      (cap.reserve(alice, 3) as { refused: string }).refused,
      /^too many sessions: alice \(client ide\) holds 3, this one would hold 3, at most 4/,
    );
    // Another pair, however it is spelled, has a cap of its own.
    assert.ok('release' in cap.reserve({ subject: 'alice (client ide)' }, 4));
    assert.ok('release' in cap.reserve({ subject: 'alice' }, 4));
    const one = cap.reserve(alice, 1);
    assert.ok('release' in one);
    assert.equal(cap.heldBy(alice), 4);
    assert.ok('refused' in cap.reserve(alice, 1));
    combined.release();
    combined.release(); // given back once, however often
    assert.equal(cap.heldBy(alice), 1);
    one.release();
    assert.equal(cap.heldBy(alice), 0);
    assert.ok('refused' in cap.reserve(null, 5), 'a session heavier than the cap is refused outright');
  });
});
