import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { isJSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import { plainRequest, takenRequest } from '../../src/serve/json-answer-transport.js';

const SESSION = 'session-1';
const request = (headers: Record<string, string> = {}, method = 'POST') =>
  ({
    method,
    headers: {
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      'mcp-session-id': SESSION,
      'mcp-protocol-version': '2025-06-18',
      ...headers,
    },
  }) as unknown as IncomingMessage;
const call = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'read', arguments: {} } };

describe('which requests serve answers itself (JSON unless something comes first)', () => {
  it('takes one well-formed request of the open session', () => {
    assert.deepEqual(takenRequest(request(), call, SESSION), call);
    assert.deepEqual(takenRequest(request({ 'content-type': 'application/json; charset=utf-8' }), call, SESSION), call);
  });

  it("leaves to the SDK's transport everything it would answer otherwise or refuse", () => {
    const cases: [string, IncomingMessage, unknown, string | undefined][] = [
      ['a GET', request({}, 'GET'), call, SESSION],
      ['no session yet', request(), call, undefined],
      ["another session's id", request({ 'mcp-session-id': 'other' }), call, SESSION],
      ['an Accept without event streams', request({ accept: 'application/json' }), call, SESSION],
      ['a Content-Type that is not JSON', request({ 'content-type': 'text/plain' }), call, SESSION],
      ['an unsupported protocol version', request({ 'mcp-protocol-version': '1999-01-01' }), call, SESSION],
      ['a batch', request(), [call], SESSION],
      ['a notification', request(), { jsonrpc: '2.0', method: 'notifications/initialized' }, SESSION],
      ['an answer', request(), { jsonrpc: '2.0', id: 1, result: {} }, SESSION],
      ['initialize', request(), { ...call, method: 'initialize', params: {} }, SESSION],
      ['a key the SDK refuses', request(), { ...call, extra: true }, SESSION],
      ['an id that is no id', request(), { ...call, id: null }, SESSION],
    ];
    for (const [what, req, body, session] of cases) assert.equal(takenRequest(req, body, session), undefined, what);
  });

  it("the quick check of a request's shape accepts nothing the SDK's check refuses, and the usual call", () => {
    assert.equal(plainRequest(call), true);
    assert.equal(plainRequest({ jsonrpc: '2.0', id: 'a', method: 'tools/list' }), true);
    // Each of these is the SDK's to judge (false here; takenRequest then asks the SDK's check).
    const unknown = [
      '{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":1.5}}}',
      '{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":1}}}',
      '{"jsonrpc":"2.0","id":1.5,"method":"m"}',
      '{"jsonrpc":"2.0","id":1e300,"method":"m"}',
      '{"jsonrpc":"2.0","id":1,"method":"m","params":[]}',
      '{"jsonrpc":"2.0","id":1,"method":"m","params":null}',
      '{"jsonrpc":"2.0","id":1,"method":"m","__proto__":{}}',
      '{"jsonrpc":"2.0","id":1,"method":"m","extra":1}',
      '{"jsonrpc":"1.0","id":1,"method":"m"}',
      '{"jsonrpc":"2.0","id":1,"method":2}',
    ];
    for (const text of unknown) assert.equal(plainRequest(JSON.parse(text)), false, text);
    assert.equal(
      takenRequest(request(), JSON.parse(unknown[1]!), SESSION)?.method,
      'm',
      "a _meta the SDK's check accepts",
    );
    assert.equal(takenRequest(request(), JSON.parse(unknown[0]!), SESSION), undefined, 'one it refuses');
    // Generated messages, as JSON.parse gives them: wherever the quick check says yes, the SDK's does.
    const value = fc.jsonValue({ maxDepth: 3 });
    const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
    const message = fc
      .record({
        jsonrpc: maybe(fc.constantFrom<unknown>('2.0', '1.0', 2, null)),
        id: maybe(fc.oneof(fc.string(), fc.integer(), fc.double(), fc.constant(null), value)),
        method: maybe(fc.oneof(fc.string(), value)),
        params: maybe(
          fc.oneof(
            value,
            fc.dictionary(fc.constantFrom('name', 'arguments', '_meta', '__proto__', 'x'), value, { maxKeys: 3 }),
          ),
        ),
        extra: maybe(
          fc
            .oneof(fc.constantFrom('extra', '__proto__', 'result'), fc.string())
            .chain((k) => fc.tuple(fc.constant(k), value)),
        ),
      })
      .map(({ extra, ...fields }) => {
        const text = JSON.stringify({ ...fields, ...(extra ? { [extra[0]]: extra[1] } : {}) });
        return JSON.parse(text.replace('"extra":', '"__proto__":')) as unknown;
      });
    let accepted = 0;
    fc.assert(
      fc.property(message, (body) => {
        if (!plainRequest(body)) return true;
        accepted++;
        return isJSONRPCRequest(body);
      }),
      { numRuns: Number(process.env.HINTBOX_FUZZ_RUNS ?? 2000), seed: Number(process.env.HINTBOX_FUZZ_SEED ?? 34) },
    );
    assert.ok(accepted > 0, 'some generated messages passed the quick check');
  });
});
