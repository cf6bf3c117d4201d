import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BearerTokens, hashToken } from '../../src/serve/bearer-tokens.js';
import { isLoopbackHost } from '../../src/serve/serve-address.js';

const ALICE = 'alice-secret-token';
const BOT = 'bot-secret-token';
const FILE = `
- name: alice
  sha256: ${hashToken(ALICE).toUpperCase()}
- name: ci-bot
  sha256: ${hashToken(BOT)}
  servers: [filesystem]
`;

describe('bearer tokens', () => {
  const tokens = BearerTokens.parse(FILE, 'tokens.yaml');

  it('hashes a token as sha256sum does', () => {
    assert.equal(hashToken('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('admits a known token for its servers and names its holder', () => {
    assert.deepEqual(tokens.check(`Bearer ${ALICE}`, 'everything'), { allowed: true, caller: { subject: 'alice' } });
    assert.deepEqual(tokens.check(`bearer ${BOT}`, 'filesystem'), { allowed: true, caller: { subject: 'ci-bot' } });
  });

  it('refuses no token, another scheme and an unknown token with 401; a token of other servers with 403', () => {
    assert.deepEqual(tokens.check(undefined, 'filesystem'), {
      allowed: false,
      status: 401,
      reason: 'no token',
      caller: null,
    });
    assert.equal(tokens.check(`Basic ${ALICE}`, 'filesystem').allowed, false);
    assert.deepEqual(tokens.check(`Bearer ${ALICE}x`, 'filesystem'), {
      allowed: false,
      status: 401,
      reason: 'unknown token',
      caller: null,
    });
    assert.deepEqual(tokens.check(`Bearer ${BOT}`, 'everything'), {
      allowed: false,
      status: 403,
      reason: 'token not allowed for everything',
      caller: { subject: 'ci-bot' },
    });
  });

  it('reports every problem of a tokens file, one line each', () => {
    const bad = `
- name: a
  sha256: nothex
- name: a
  sha256: ${hashToken('x')}
  extra: 1
- name: b
  sha256: ${hashToken('x')}
`;
    assert.throws(
      () => BearerTokens.parse(bad, 't.yaml'),
      (error: Error) => {
        const lines = error.message.split('\n');
        assert.ok(
          lines.every((l) => l.startsWith('t.yaml: ')),
          error.message,
        );
        assert.match(error.message, /0\.sha256: expected 64 hex digits/);
        assert.match(error.message, /1: Unrecognized key/i);
        return true;
      },
    );
    assert.throws(
      () =>
        BearerTokens.parse(
          `[{"name": "a", "sha256": "${hashToken('x')}"}, {"name": "b", "sha256": "${hashToken('x')}"}]`,
          'j.json',
        ),
      /1\.sha256: the same token as entry 0/,
    );
    assert.throws(() => BearerTokens.parse('[]', 'e.yaml'), /no tokens/);
  });

  // proves: METRICS-ACCESS
  it('lets only a token with metrics (true, or only: no server) read /metrics', () => {
    const withScraper = BearerTokens.parse(
      `${FILE}- name: prometheus\n  sha256: ${hashToken('scrape')}\n  metrics: only\n`,
      'tokens.yaml',
    );
    assert.deepEqual(withScraper.checkMetrics('Bearer scrape'), { allowed: true, caller: { subject: 'prometheus' } });
    assert.deepEqual(withScraper.checkMetrics(`Bearer ${ALICE}`), {
      allowed: false,
      status: 403,
      reason: 'token not allowed for /metrics',
      caller: { subject: 'alice' },
    });
    assert.equal(withScraper.checkMetrics(undefined).allowed, false);
    assert.deepEqual(withScraper.checkMetrics('Bearer nope'), {
      allowed: false,
      status: 401,
      reason: 'unknown token',
      caller: null,
    });
    // metrics: only opens no server; metrics: true keeps the token's servers.
    assert.equal(withScraper.check('Bearer scrape', 'filesystem').allowed, false);
    const both = BearerTokens.parse(`[{"name": "ops", "sha256": "${hashToken('o')}", "metrics": true}]`, 'o.json');
    assert.deepEqual(
      [both.checkMetrics('Bearer o').allowed, both.check('Bearer o', 'filesystem').allowed],
      [true, true],
    );
  });

  it("gives a token's tags (normalized) with its caller; refuses empty lists of tags and servers", () => {
    const tagged = BearerTokens.parse(
      `[{"name": "reader", "sha256": "${hashToken('r')}", "tags": [" Read ", "files"]}]`,
      'tags.json',
    );
    assert.deepEqual(tagged.check('Bearer r', 'filesystem'), {
      allowed: true,
      caller: { subject: 'reader' },
      tags: ['read', 'files'],
    });
    assert.throws(
      () =>
        BearerTokens.parse(
          `[{"name": "a", "sha256": "${hashToken('a')}", "tags": [], "servers": []}, {"name": "b", "sha256": "${hashToken('b')}", "tags": [" "]}]`,
          'e.json',
        ),
      (error: Error) => {
        assert.deepEqual(error.message.split('\n').sort(), [
          'e.json: 0.servers: Too small: expected array to have >=1 items',
          'e.json: 0.tags: Too small: expected array to have >=1 items',
          'e.json: 1.tags.0: expected a tag name',
        ]);
        return true;
      },
    );
  });

  it('answers 401 with an RFC 6750 challenge, and 403 with none', () => {
    assert.equal(tokens.challenge({ status: 401, reason: 'no token', caller: null }), 'Bearer realm="hintbox"');
    assert.equal(
      tokens.challenge({ status: 401, reason: 'unknown token', caller: null }),
      'Bearer realm="hintbox", error="invalid_token"',
    );
    assert.equal(tokens.challenge({ status: 403, reason: 'x', caller: { subject: 'a' } }), undefined);
  });

  it('names servers the tokens mention that are not served', () => {
    assert.deepEqual(tokens.unknownServers(['filesystem']), []);
    assert.deepEqual(tokens.unknownServers(['everything']), ['filesystem']);
  });
});

describe('serve address', () => {
  it('knows loopback hosts', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', 'localhost']) assert.equal(isLoopbackHost(host), true, host);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', 'example.com']) assert.equal(isLoopbackHost(host), false, host);
  });
});
