import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ProfileSchema } from '../../src/profile/profile-schema.js';

function parse(network: unknown) {
  return ProfileSchema.safeParse({ name: 'x', server: { image: 'i' }, ...(network === undefined ? {} : { network }) });
}

function network(value: unknown): unknown {
  const result = parse(value);
  assert.ok(result.success, `network ${JSON.stringify(value)} is accepted: ${JSON.stringify(result.error?.issues)}`);
  return result.data.network;
}

function issues(value: unknown): { path: string; message: string }[] {
  const result = parse(value);
  assert.equal(result.success, false, `network ${JSON.stringify(value)} is refused`);
  return result.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
}

describe('profile network', () => {
  it('defaults to none; takes none and open', () => {
    assert.equal(network(undefined), 'none');
    assert.equal(network('none'), 'none');
    assert.equal(network('open'), 'open');
  });

  it('takes the hosts form, lower-cased, a missing list empty', () => {
    assert.deepEqual(network({ allow: ['API.Example.com:443', '*.Example.COM:443'], backend: ['DB.internal:5432'] }), {
      allow: ['api.example.com:443', '*.example.com:443'],
      backend: ['db.internal:5432'],
    });
    assert.deepEqual(network({ backend: ['[2001:DB8::1]:5432'] }), { allow: [], backend: ['[2001:db8::1]:5432'] });
    assert.deepEqual(network({ allow: ['198.51.100.7:80'] }), { allow: ['198.51.100.7:80'], backend: [] });
  });

  it('a bad entry is named by its path', () => {
    const found = issues({ allow: ['api.example.com:0'] });
    assert.equal(found.length, 1);
    assert.equal(found[0]!.path, 'network.allow.0');
    assert.match(found[0]!.message, /port 0/);
    const second = issues({ allow: ['ok.example.com:443'], backend: ['ok:1', '256.0.0.1:80'] });
    assert.deepEqual(
      second.map((i) => i.path),
      ['network.backend.1'],
    );
  });

  it('refuses an empty hosts form', () => {
    for (const value of [{ allow: [] }, {}, { allow: [], backend: [] }]) {
      const found = issues(value);
      assert.equal(found[0]!.path, 'network');
      assert.match(found[0]!.message, /at least one host/);
    }
  });

  it('refuses an unknown key in the hosts form', () => {
    const found = issues({ allow: ['a.example.com:443'], alow: ['b.example.com:443'] });
    assert.equal(found[0]!.path, 'network');
    assert.match(found[0]!.message, /alow/);
  });

  it('refuses other values', () => {
    for (const value of ['bridge', 'host', true, 1, null, ['api.example.com:443']]) {
      const found = issues(value);
      assert.equal(found[0]!.path, 'network', JSON.stringify(value));
      assert.match(found[0]!.message, /none, open/);
    }
    assert.equal(issues({ allow: 'api.example.com:443' })[0]!.path, 'network.allow');
  });
});
