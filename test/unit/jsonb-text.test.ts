import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { jsonbString, jsonbText, MAX_JSONB_DEPTH } from '../../src/audit/jsonb-text.js';
import { hostileJson } from '../support/hostile-json.js';

// eslint-disable-next-line no-control-regex -- NUL is what is looked for
const REFUSED = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** The first key or string jsonb would refuse, with its path; undefined when none. */
function refused(value: unknown, where = '$'): string | undefined {
  if (typeof value === 'string') return REFUSED.test(value) ? where : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, v] of Object.entries(value)) {
    if (REFUSED.test(key)) return `${where} key ${JSON.stringify(key)}`;
    const inner = refused(v, `${where}.${key}`);
    if (inner) return inner;
  }
  return undefined;
}

/** Whether two keys of one object become one once cleaned (jsonbText keeps the last: documented). */
function keysMerge(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  const keys = Object.keys(value);
  return new Set(keys.map(jsonbString)).size < keys.length || Object.values(value).some(keysMerge);
}

function depth(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  return 1 + Math.max(0, ...Object.values(value).map(depth));
}

describe('jsonbText (the sink queryable copy of a record)', () => {
  it('two keys that differ only in what is cleaned read as one, the last (seen by the property test, seed -422999446)', () => {
    // Both are written; a reader of the text (JSON.parse, Postgres' jsonb) keeps the last.
    assert.deepEqual(JSON.parse(jsonbText({ '\u0000\\': {}, '\udfff\\': null })), { '\ufffd\\': null });
  });

  it('cleans keys as values, at any depth: nothing jsonb refuses is left', () => {
    const text = jsonbText({ 'a\u0000': { '\ud800': ['\udc00', { 'x\u0000y': 'v\u0000' }] }, ok: '\ud83d\ude00' });
    assert.equal(text, '{"a\ufffd":{"\ufffd":["\ufffd",{"x\ufffdy":"v\ufffd"}]},"ok":"\ud83d\ude00"}');
  });

  // proves: AUDIT-SINK-ANY-LINE
  it('property: any JSON value comes out as JSON with no key or string jsonb refuses, shaped as it was', () => {
    fc.assert(
      fc.property(hostileJson, (value) => {
        const text = jsonbText(value);
        assert.ok(!/\\u0000|\\ud[89a-f]/i.test(text), text);
        const back: unknown = JSON.parse(text);
        assert.equal(refused(back), undefined, text);
        // Keys that differ only in what is cleaned become one, the last: the shape may then shrink.
        if (keysMerge(value)) assert.ok(depth(back) <= depth(value), text);
        else assert.equal(depth(back), depth(value));
      }),
      { numRuns: 2000 },
    );
  });

  it('property: a value with nothing to clean comes out as JSON.stringify writes it', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        fc.pre(refused(value) === undefined);
        assert.equal(jsonbText(value), JSON.stringify(value));
      }),
      { numRuns: 2000 },
    );
  });

  it('cuts what is nested deeper than Postgres should parse, without a stack overflow', () => {
    let deep: unknown = 'bottom';
    for (let i = 0; i < 50_000; i++) deep = [deep];
    const back: unknown = JSON.parse(jsonbText({ args: deep }));
    assert.equal(depth(back), MAX_JSONB_DEPTH);
  });

  it('jsonbString leaves surrogate pairs and plain text alone', () => {
    assert.equal(jsonbString('a\ud83d\ude00b'), 'a\ud83d\ude00b');
    assert.equal(jsonbString('\ude00\ud83d'), '\ufffd\ufffd');
  });
});
