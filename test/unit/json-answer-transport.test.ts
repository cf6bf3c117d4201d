import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { takenRequest } from '../../src/serve/json-answer-transport.js';

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
});
