import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  accessOfScopes,
  callerOfClaims,
  parseOAuthConfig,
  scopesFor,
  scopesOfClaims,
  unknownScopeServers,
} from '../../src/serve/oauth-config.js';

const GOOD = `
issuer: https://auth.example.com/realms/platform
jwksUri: https://auth.example.com/realms/platform/certs
resource: https://HINTBOX.example.com/
scopes:
  mcp:all: {}
  mcp:filesystem: { servers: [filesystem] }
  mcp:k8s-read: { servers: [k8s], tags: [Read] }
  mcp:k8s-helm: { servers: [k8s], tags: [helm, read] }
`;

describe('OAuth settings of hintbox serve', () => {
  const config = parseOAuthConfig(GOOD, 'oauth.yaml');

  it('fills the defaults and makes the resource canonical', () => {
    assert.equal(config.resource, 'https://hintbox.example.com');
    assert.equal(config.clockToleranceSeconds, 30);
    assert.ok(config.algorithms.includes('RS256') && config.algorithms.includes('ES256'));
    assert.ok(config.algorithms.every((alg: string) => !alg.startsWith('HS') && alg !== 'none'));
    assert.equal(config.audience, undefined);
  });

  it('reports every problem, one line each, with the field path', () => {
    const bad = `
issuer: http://auth.example.com
jwksUri: not a url
resource: https://hintbox.example.com/base?x=1
algorithms: [HS256, none]
clockToleranceSeconds: 3600
scopes:
  "has space": {}
  ok: { servers: [], tags: [" "], extra: 1 }
unknown: 1
`;
    assert.throws(
      () => parseOAuthConfig(bad, 'o.yaml'),
      (error: Error) => {
        const lines = error.message.split('\n');
        assert.ok(
          lines.every((l) => l.startsWith('o.yaml: ')),
          error.message,
        );
        for (const expected of [
          /o\.yaml: issuer: expected an https URL \(http only on a loopback address\)/,
          /o\.yaml: jwksUri: expected a URL, got "not a url"/,
          /o\.yaml: resource: expected a URL without query/,
          /o\.yaml: resource: expected a base URL without a path/,
          /o\.yaml: algorithms\.0: /,
          /o\.yaml: algorithms\.1: /,
          /o\.yaml: clockToleranceSeconds: /,
          /o\.yaml: scopes\.has space: expected a scope name/,
          /o\.yaml: scopes\.ok: Unrecognized key/,
          /o\.yaml: scopes\.ok\.servers: expected at least one server/,
          /o\.yaml: scopes\.ok\.tags\.0: expected a tag name/,
          /o\.yaml: \(top\): Unrecognized key/,
        ]) {
          assert.match(error.message, expected);
        }
        return true;
      },
    );
    assert.throws(() => parseOAuthConfig('issuer: [', 'y.yaml'), /: y\.yaml: invalid YAML or JSON: /);
    assert.throws(
      () =>
        parseOAuthConfig(
          '{"issuer": "https://a", "jwksUri": "https://a/k", "resource": "https://h", "scopes": {}}',
          'j',
        ),
      /: j: scopes: expected at least one scope$/,
    );
  });

  it('takes http only on a loopback address (a local authorization server)', () => {
    const local = parseOAuthConfig(
      'issuer: http://127.0.0.1:9000\njwksUri: http://localhost:9000/jwks\nresource: http://[::1]:8931\nscopes: {s: {}}',
      'l.yaml',
    );
    assert.equal(local.resource, 'http://[::1]:8931');
  });

  it('names servers the scopes mention that are not served', () => {
    assert.deepEqual(unknownScopeServers(config, ['filesystem', 'k8s']), []);
    assert.deepEqual(unknownScopeServers(config, ['filesystem']), ['k8s']);
  });

  it('maps scopes to servers and tags: a union, every tool when one scope does not limit tags', () => {
    assert.deepEqual(scopesFor(config, 'k8s'), ['mcp:all', 'mcp:k8s-read', 'mcp:k8s-helm']);
    assert.deepEqual(accessOfScopes(config, ['mcp:filesystem'], 'filesystem'), {});
    assert.equal(accessOfScopes(config, ['mcp:filesystem'], 'k8s'), undefined);
    assert.equal(accessOfScopes(config, ['unknown', 'mcp:k8s-read'], 'filesystem'), undefined);
    assert.equal(accessOfScopes(config, [], 'k8s'), undefined);
    assert.deepEqual(accessOfScopes(config, ['mcp:k8s-read'], 'k8s'), { tags: ['read'] });
    assert.deepEqual(accessOfScopes(config, ['mcp:k8s-read', 'mcp:k8s-helm'], 'k8s'), { tags: ['read', 'helm'] });
    assert.deepEqual(accessOfScopes(config, ['mcp:k8s-read', 'mcp:all'], 'k8s'), {});
  });

  it('reads scopes from `scope` (space-separated) and `scp` (a list or a string)', () => {
    assert.deepEqual(scopesOfClaims({ scope: 'a  b' }), ['a', 'b']);
    assert.deepEqual(scopesOfClaims({ scp: ['a', 'c', 3] }), ['a', 'c']);
    assert.deepEqual(scopesOfClaims({ scope: 'a', scp: 'a b' }), ['a', 'b']);
    assert.deepEqual(scopesOfClaims({ scope: 7 }), []);
  });

  // proves: CALLER-IDENTITY
  it('names the caller by subject and client, two fields, refusing a part it cannot record whole', () => {
    assert.deepEqual(callerOfClaims({ sub: 'alice' }), { subject: 'alice' });
    assert.deepEqual(callerOfClaims({ sub: 'alice', client_id: 'ide' }), { subject: 'alice', client: 'ide' });
    assert.deepEqual(callerOfClaims({ sub: 'alice', azp: 'web' }), { subject: 'alice', client: 'web' });
    assert.deepEqual(callerOfClaims({ sub: 'alice', client_id: 'ide', azp: 'web' }), {
      subject: 'alice',
      client: 'ide',
    });
    // Kept as given, even when it is the subject again (a client's own token): never merged with no client.
    assert.deepEqual(callerOfClaims({ sub: 'bot', client_id: 'bot' }), { subject: 'bot', client: 'bot' });
    // Nothing dropped or shortened: what cannot be recorded whole refuses the token.
    const refused = (claims: Record<string, unknown>) => (callerOfClaims(claims) as { refused?: string }).refused;
    assert.match(refused({ sub: '' }) ?? '', /subject is not a non-empty string/);
    assert.match(refused({ sub: 'x'.repeat(257) }) ?? '', /subject is longer than 256 characters/);
    assert.match(refused({ client_id: 'ide' }) ?? '', /subject is not a non-empty string/);
    assert.match(refused({ sub: 'alice', client_id: 'x'.repeat(257) }) ?? '', /client id is longer than 256/);
    assert.deepEqual(callerOfClaims({ sub: 'alice', client_id: 'x'.repeat(256) }), {
      subject: 'alice',
      client: 'x'.repeat(256),
    });
    assert.match(refused({ sub: 'alice', client_id: 7 }) ?? '', /client id is not a non-empty string/);
    assert.match(refused({ sub: 'alice', client_id: '' }) ?? '', /client id is not a non-empty string/);
    assert.match(refused({ sub: 'alice', azp: ['web'] }) ?? '', /azp is not a non-empty string/);
    assert.match(refused({ sub: 'alice\nbob' }) ?? '', /subject holds control characters/);
    assert.match(refused({ sub: 'alice', client_id: 'ide\u2028' }) ?? '', /client id holds control characters/);
  });
});
