import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { META_KEY, MODERN_PROTOCOL_VERSION } from '../../src/protocol/protocol-era.js';
import { decodeHeaderValue, standardHeaderMismatch } from '../../src/serve/standard-headers.js';

const request = (method: string, params: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id: 1,
  method,
  params: { ...params, _meta: { [META_KEY.protocolVersion]: MODERN_PROTOCOL_VERSION } },
});
const headers = (method: string, name?: string) => ({
  'mcp-protocol-version': MODERN_PROTOCOL_VERSION,
  'mcp-method': method,
  ...(name !== undefined ? { 'mcp-name': name } : {}),
});

describe('the standard headers of a 2026 request (pure)', () => {
  it('passes headers that say what the body does, for named and unnamed methods', () => {
    assert.equal(standardHeaderMismatch(headers('tools/list'), request('tools/list')), undefined);
    assert.equal(
      standardHeaderMismatch(headers('tools/call', 'write'), request('tools/call', { name: 'write' })),
      undefined,
    );
    assert.equal(standardHeaderMismatch(headers('prompts/get', 'p'), request('prompts/get', { name: 'p' })), undefined);
    const uri = 'file:///data/a b.txt';
    assert.equal(standardHeaderMismatch(headers('resources/read', uri), request('resources/read', { uri })), undefined);
  });

  // proves: SERVE-STANDARD-HEADERS
  it('refuses each header missing or naming another call than the body, naming which', () => {
    const call = request('tools/call', { name: 'write' });
    const cases: [Record<string, string>, RegExp][] = [
      [headers('tools/list'), /Mcp-Method header \(tools\/list\) is not the request's method \(tools\/call\)/],
      [headers('tools/call', 'read'), /Mcp-Name header is not the request's name/],
      [headers('tools/call'), /Mcp-Name header is missing/],
      [{ 'mcp-protocol-version': MODERN_PROTOCOL_VERSION, 'mcp-name': 'write' }, /Mcp-Method header is missing/],
      [{ 'mcp-method': 'tools/call', 'mcp-name': 'write' }, /MCP-Protocol-Version header is missing/],
      [
        { ...headers('tools/call', 'write'), 'mcp-protocol-version': '2025-11-25' },
        /MCP-Protocol-Version header \(2025-11-25\)/,
      ],
    ];
    for (const [given, why] of cases) assert.match(standardHeaderMismatch(given, call) ?? 'passed', why);
  });

  it('decodes base64-wrapped names (non-ASCII), and a wrapped name must decode to the body', () => {
    const name = 'écrire';
    const wrapped = `=?base64?${Buffer.from(name).toString('base64')}?=`;
    assert.equal(decodeHeaderValue(wrapped), name);
    assert.equal(decodeHeaderValue('plain'), 'plain');
    assert.equal(standardHeaderMismatch(headers('tools/call', wrapped), request('tools/call', { name })), undefined);
    assert.match(
      standardHeaderMismatch(headers('tools/call', name.slice(1)), request('tools/call', { name })) ?? '',
      /Mcp-Name/,
    );
  });

  // proves: SERVE-STANDARD-HEADERS
  it('refuses an Mcp-Name whose base64 is not strict: other header bytes never decode to the same name (attack)', () => {
    // Before: Node's lenient decoder skipped what is not base64 and ignored what follows the
    // padding or its spare bits, so each of these headers passed for the name `delete_all`, while
    // a filter in front (that compares, or strictly decodes, the header) saw another value.
    const name = 'delete_all';
    const canonical = Buffer.from(name).toString('base64'); // ZGVsZXRlX2FsbA==
    const call = request('tools/call', { name });
    assert.equal(standardHeaderMismatch(headers('tools/call', `=?base64?${canonical}?=`), call), undefined);
    const lenient = [
      'ZGVs*ZXRlX2FsbA==', // a character outside the alphabet, skipped
      'ZGVs ZXRlX2FsbA==', // a space, skipped
      'ZGVsZXRl\tX2FsbA==', // a tab, skipped
      'ZGVsZXRlX2FsbA', // no padding
      'ZGVsZXRlX2FsbA=', // short padding
      'ZGVsZXRlX2FsbB==', // spare bits set (re-encodes as ZGVsZXRlX2FsbA==)
      'ZGVsZXRlX2FsbA==ZGVs', // data after the padding
      'ZGVsZXRlX2FsbA=====', // padding past the end
    ];
    // The spec's own example (`/` in its base64), in the URL-safe alphabet.
    const sentinel = '=?base64?literal?=';
    const cases = [
      ...lenient.map((payload) => ({ payload, named: name })),
      { payload: 'PT9iYXNlNjQ_bGl0ZXJhbD89', named: sentinel },
    ];
    for (const { payload, named } of cases) {
      const header = `=?base64?${payload}?=`;
      assert.equal(
        Buffer.from(payload, 'base64').toString('utf8'),
        named,
        `${payload}: a collision for a lenient decoder`,
      );
      assert.equal(decodeHeaderValue(header), undefined, payload);
      assert.match(
        standardHeaderMismatch(headers('tools/call', header), request('tools/call', { name: named })) ?? 'passed',
        /^the Mcp-Name header is not valid base64 \(=\?base64\?\.\.\.\?=\)$/,
        payload,
      );
    }
    // Bytes that are not UTF-8 decode to nothing, not to replacement characters (U+FFFD).
    const invalid = `=?base64?${Buffer.from([0x77, 0xff, 0x72]).toString('base64')}?=`;
    assert.equal(decodeHeaderValue(invalid), undefined);
    assert.match(
      standardHeaderMismatch(headers('tools/call', invalid), request('tools/call', { name: 'w\ufffdr' })) ?? 'passed',
      /not valid base64/,
    );
  });
});
