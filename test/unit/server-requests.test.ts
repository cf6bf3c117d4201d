import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';
import {
  isServerRequest,
  MAX_PARAMS_DEPTH,
  sampledParams,
  MAX_PENDING_SERVER_REQUESTS,
  markedElicitation,
  refusalOf,
  sandboxRoots,
  SERVER_REQUESTS,
  upstreamClientCapabilities,
  type ServerRequestMethod,
  type ServerRequestPolicy,
} from '../../src/gateway/server-requests.js';

const ALL: ServerRequestPolicy = { sampling: true, elicitation: true, urlElicitation: true, roots: true };
const NONE: ServerRequestPolicy = { sampling: false, elicitation: false, urlElicitation: false, roots: false };
const FULL_CLIENT: ClientCapabilities = { sampling: {}, elicitation: { form: {}, url: {} }, roots: {} };

describe('refusalOf', () => {
  const methods = Object.keys(SERVER_REQUESTS) as ServerRequestMethod[];

  it('covers the three requests a server may make of its client, and no other method', () => {
    assert.deepEqual(methods.sort(), ['elicitation/create', 'roots/list', 'sampling/createMessage']);
    for (const m of methods) assert.equal(isServerRequest(m), true, m);
    for (const m of ['tools/call', 'toString', '__proto__', 'constructor', 'hasOwnProperty', 42, null, undefined]) {
      assert.equal(isServerRequest(m), false, String(m));
    }
  });

  it('over every method × policy × client capability × binding', () => {
    for (const method of methods) {
      const feature = SERVER_REQUESTS[method];
      for (const allowed of [true, false]) {
        for (const clientHas of [true, false]) {
          for (const bound of [true, false]) {
            const policy = { ...ALL, [feature]: allowed };
            const client: ClientCapabilities = clientHas ? FULL_CLIENT : {};
            const label = `${method} allowed=${allowed} client=${clientHas} bound=${bound}`;
            const refusal = refusalOf(method, { message: 'q' }, policy, client, bound);
            let expected: string | undefined;
            if (!allowed) {
              expected = `the profile does not let this server use ${feature} (serverRequests.${feature})`;
            } else if (method === 'roots/list') {
              expected = undefined; // answered by hintbox: no binding, no client capability needed
            } else if (!bound) {
              expected = `${method} outside any tool call of the client: nothing to bind it to`;
            } else if (!clientHas) {
              expected = `the client does not support ${feature}`;
            }
            assert.equal(refusal, expected, label);
          }
        }
      }
    }
  });

  it('a policy that allows only one feature refuses the others', () => {
    assert.equal(refusalOf('sampling/createMessage', {}, { ...NONE, sampling: true }, FULL_CLIENT, true), undefined);
    assert.match(
      refusalOf('elicitation/create', {}, { ...NONE, sampling: true }, FULL_CLIENT, true) ?? '',
      /serverRequests\.elicitation/,
    );
    assert.match(
      refusalOf('roots/list', {}, { ...NONE, sampling: true }, FULL_CLIENT, true) ?? '',
      /serverRequests\.roots/,
    );
  });

  it('without any client capabilities (undefined) sampling and elicitation are refused, roots answered', () => {
    assert.equal(refusalOf('sampling/createMessage', {}, ALL, undefined, true), 'the client does not support sampling');
    assert.equal(
      refusalOf('elicitation/create', { message: 'q' }, ALL, undefined, true),
      'the client does not support elicitation',
    );
    assert.equal(refusalOf('roots/list', undefined, ALL, undefined, false), undefined);
  });

  it('elicitation modes: `{}` is form; URL mode needs elicitation.url; form mode needs form (or `{}`)', () => {
    const form = { mode: 'form', message: 'name?', requestedSchema: { type: 'object', properties: {} } };
    const legacy = { message: 'name?', requestedSchema: { type: 'object', properties: {} } };
    const url = { mode: 'url', message: 'sign in', url: 'https://example.invalid/', elicitationId: 'e1' };
    const cases: Array<[ClientCapabilities['elicitation'], unknown, string | undefined]> = [
      [{}, form, undefined],
      [{}, legacy, undefined],
      [{}, url, 'the client does not support URL elicitation'],
      [{ form: {} }, form, undefined],
      [{ form: {} }, url, 'the client does not support URL elicitation'],
      [{ url: {} }, url, undefined],
      [{ url: {} }, form, 'the client does not support form elicitation'],
      [{ url: {} }, legacy, 'the client does not support form elicitation'],
      [{ form: {}, url: {} }, form, undefined],
      [{ form: {}, url: {} }, url, undefined],
    ];
    for (const [elicitation, params, expected] of cases) {
      assert.equal(
        refusalOf('elicitation/create', params, ALL, { elicitation }, true),
        expected,
        `${JSON.stringify(elicitation)} ${JSON.stringify((params as { mode?: string }).mode)}`,
      );
    }
  });

  it('refuses sampling and elicitation beyond the requests already waiting for the client; roots are answered', () => {
    const all = ALL;
    const client: ClientCapabilities = { sampling: {}, elicitation: {} };
    const params = { message: 'm', requestedSchema: { type: 'object', properties: {} } };
    const below = MAX_PENDING_SERVER_REQUESTS - 1;
    assert.equal(refusalOf('sampling/createMessage', {}, all, client, true, below), undefined);
    assert.match(
      refusalOf('sampling/createMessage', {}, all, client, true, MAX_PENDING_SERVER_REQUESTS) ?? '',
      /already wait for the client/,
    );
    assert.match(
      refusalOf('elicitation/create', params, all, client, true, MAX_PENDING_SERVER_REQUESTS + 5) ?? '',
      /already wait for the client/,
    );
    assert.equal(refusalOf('roots/list', {}, all, client, true, 1000), undefined);
  });

  it('hostile params do not make URL mode pass a form-only client, nor throw', () => {
    for (const params of [undefined, null, 'url', ['url'], { mode: 'URL' }, { mode: ['url'] }]) {
      assert.doesNotThrow(() => refusalOf('elicitation/create', params, ALL, { elicitation: { form: {} } }, true));
    }
    assert.equal(
      refusalOf('elicitation/create', { mode: 'url', message: 'm' }, ALL, { elicitation: { form: {} } }, true),
      'the client does not support URL elicitation',
    );
  });
});

describe('what a server may send with its requests', () => {
  it('refuses a link for the person unless the profile allows it, whatever the client supports', () => {
    const url = { mode: 'url', message: 'sign in', url: 'https://example.invalid/?d=secret', elicitationId: 'e1' };
    assert.match(
      refusalOf('elicitation/create', url, { ...ALL, urlElicitation: false }, FULL_CLIENT, true) ?? '',
      /serverRequests\.urlElicitation/,
    );
    assert.equal(refusalOf('elicitation/create', url, ALL, FULL_CLIENT, true), undefined);
  });

  it('refuses params that are not an object, an elicitation without a string message, and odd field names', () => {
    for (const params of [undefined, null, 'x', ['hintbox asks: allow?']]) {
      assert.match(refusalOf('sampling/createMessage', params, ALL, FULL_CLIENT, true) ?? '', /must be an object/);
      assert.match(refusalOf('elicitation/create', params, ALL, FULL_CLIENT, true) ?? '', /must be an object/);
    }
    assert.match(
      refusalOf('elicitation/create', { message: ['x'] }, ALL, FULL_CLIENT, true) ?? '',
      /message must be a string/,
    );
    const schema = (name: string) => ({
      message: 'q',
      requestedSchema: { type: 'object', properties: { [name]: { type: 'string' } } },
    });
    assert.equal(refusalOf('elicitation/create', schema('first_name.2-x'), ALL, FULL_CLIENT, true), undefined);
    for (const name of ['a b', 'hintbox asks:\nallow', 'x\u202e', '', 'x'.repeat(65)]) {
      assert.match(
        refusalOf('elicitation/create', schema(name), ALL, FULL_CLIENT, true) ?? '',
        /field name that is not plain/,
        JSON.stringify(name),
      );
    }
  });

  it("never asks for the context of the client's other servers", () => {
    assert.deepEqual(sampledParams({ maxTokens: 1, includeContext: 'allServers' }), {
      maxTokens: 1,
      includeContext: 'thisServer',
    });
    const own = { maxTokens: 1, includeContext: 'thisServer' };
    assert.deepEqual(sampledParams(own), own);
  });

  it("passes a sampling request's own members only: no task, no _meta, nothing unknown", () => {
    const params = {
      messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }],
      maxTokens: 5,
      task: { ttl: 60000 },
      _meta: { progressToken: 0 },
      extra: 'x',
    };
    assert.deepEqual(sampledParams(params), { messages: params.messages, maxTokens: 5 });
  });

  it('refuses params nested deeper than the limit', () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < MAX_PARAMS_DEPTH + 2; i++) deep = { nested: deep };
    const params = { message: 'q', requestedSchema: { type: 'object', properties: { f: deep } } };
    assert.match(refusalOf('elicitation/create', params, ALL, FULL_CLIENT, true) ?? '', /nested deeper than/);
    assert.match(
      refusalOf('sampling/createMessage', { messages: [deep] }, ALL, FULL_CLIENT, true) ?? '',
      /nested deeper/,
    );
  });

  it('renders every string of the form: choices, their titles, defaults, the top title', () => {
    const marked = markedElicitation('files', {
      message: 'm',
      requestedSchema: {
        type: 'object',
        title: 'Top\nhintbox asks:',
        properties: {
          pick: { type: 'string', enum: ['a\u001b[2K'], enumNames: ['A\u2028'], default: 'd\u202e' },
          many: { type: 'array', items: { anyOf: [{ const: 'x', title: 'X\n' }] } },
        },
      },
    });
    const strings: string[] = [];
    const walk = (v: unknown): void => {
      if (typeof v === 'string') strings.push(v);
      else if (v && typeof v === 'object') Object.values(v).forEach(walk);
    };
    walk(marked.requestedSchema);
    assert.ok(strings.length >= 8);
    for (const text of strings) {
      for (const raw of ['\n', '\u001b', '\u2028', '\u202e']) assert.equal(text.includes(raw), false, text);
    }
    assert.ok(strings.includes('Top\\u000ahintbox asks:'), strings.join(' | '));
  });
});

describe('markedElicitation', () => {
  it("prefixes the server's name and renders the message's control characters, bidi overrides and U+2028 as escapes", () => {
    const params = {
      message: 'Continue?\nhintbox: this is hintbox asking\u001b[2K\u202eevil\u2028next',
      requestedSchema: { type: 'object', properties: {} },
    };
    const marked = markedElicitation('files', params);
    assert.equal(
      marked.message,
      'The MCP server "files" asks (its own question, not hintbox\'s): ' +
        'Continue?\\u000ahintbox: this is hintbox asking\\u001b[2K\\u202eevil\\u2028next',
    );
    assert.doesNotMatch(String(marked.message), /[\n\u001b\u202e\u2028]/, 'no raw character survives'); // eslint-disable-line no-control-regex
  });

  it("renders the form fields' titles and descriptions, keeps the form's own members only", () => {
    const params = {
      mode: 'form',
      message: 'Who?',
      _meta: { 'x-vendor': 1 },
      requestedSchema: {
        type: 'object',
        required: ['name'],
        properties: {
          name: { type: 'string', title: 'Name\u001b[31m', description: 'yours\nhintbox: approved', minLength: 1 },
          age: { type: 'number', title: 'Age' },
          odd: 'not an object',
        },
      },
    };
    const marked = markedElicitation('files', params);
    assert.deepEqual(marked, {
      mode: 'form',
      message: 'The MCP server "files" asks (its own question, not hintbox\'s): Who?',
      requestedSchema: {
        type: 'object',
        required: ['name'],
        properties: {
          name: {
            type: 'string',
            title: 'Name\\u001b[31m',
            description: 'yours\\u000ahintbox: approved',
            minLength: 1,
          },
          age: { type: 'number', title: 'Age' },
          odd: 'not an object',
        },
      },
    });
  });

  it('never changes the request it was given', () => {
    const params = {
      message: 'a\nb',
      requestedSchema: { type: 'object', properties: { f: { type: 'string', title: 't\u001b' } } },
    };
    const before = structuredClone(params);
    const marked = markedElicitation('s', params);
    assert.deepEqual(params, before);
    assert.notEqual(marked.requestedSchema, params.requestedSchema);
  });

  it('a form field named __proto__ stays a field, rendered like the others', () => {
    const params = JSON.parse(
      '{"message":"m","requestedSchema":{"type":"object","properties":{"__proto__":{"type":"string","title":"x\\u001by"}}}}',
    ) as Record<string, unknown>;
    const marked = markedElicitation('s', params);
    const properties = (marked.requestedSchema as { properties: Record<string, unknown> }).properties;
    assert.ok(Object.hasOwn(properties, '__proto__'), 'an own field');
    assert.equal(Object.getPrototypeOf(properties), Object.prototype, 'the prototype is untouched');
    assert.equal(
      JSON.stringify(marked.requestedSchema),
      '{"type":"object","properties":{"__proto__":{"type":"string","title":"x\\\\u001by"}}}',
    );
  });

  it('a message that is not a string becomes an empty question, still marked', () => {
    for (const message of [undefined, 42, { text: 'x' }]) {
      assert.equal(
        markedElicitation('s', { message }).message,
        'The MCP server "s" asks (its own question, not hintbox\'s): ',
      );
    }
  });
});

describe('upstreamClientCapabilities', () => {
  it('declares exactly what the policy allows', () => {
    assert.deepEqual(upstreamClientCapabilities(ALL), {
      sampling: {},
      elicitation: { form: {}, url: {} },
      roots: {},
    });
    assert.deepEqual(upstreamClientCapabilities(NONE), {});
    assert.deepEqual(
      upstreamClientCapabilities({ sampling: false, elicitation: true, urlElicitation: false, roots: true }),
      { elicitation: { form: {} }, roots: {} },
      'a link for the person only when the profile allows it',
    );
    assert.deepEqual(
      upstreamClientCapabilities({ sampling: true, elicitation: false, urlElicitation: true, roots: false }),
      { sampling: {} },
    );
  });
});

describe('sandboxRoots', () => {
  it('answers the mount targets as file URIs, never a host path', () => {
    assert.deepEqual(
      sandboxRoots([
        { target: '/workspace', source: '/home/me/secret-project' } as { target: string },
        { target: '/data/ro' },
      ]),
      [
        { uri: 'file:///workspace', name: '/workspace' },
        { uri: 'file:///data/ro', name: '/data/ro' },
      ],
    );
    assert.deepEqual(sandboxRoots([]), []);
  });

  it('percent-encodes a target that would not be a URI as written (space, #, ?, %)', () => {
    const roots = sandboxRoots([{ target: '/my files/a#b?c%d' }]);
    assert.deepEqual(roots, [{ uri: 'file:///my%20files/a%23b%3Fc%25d', name: '/my files/a#b?c%d' }]);
    assert.equal(decodeURIComponent(new URL(roots[0]!.uri).pathname), '/my files/a#b?c%d', 'the path reads back');
  });
});
