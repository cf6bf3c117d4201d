import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Authenticator } from '../../src/serve/authenticator.js';
import { coversAccess } from '../../src/serve/authenticator.js';
import {
  COMBINED,
  combinedAuthenticator,
  hiddenServers,
  memberOf,
  membersOf,
} from '../../src/serve/combined-endpoint.js';

/** The combined endpoint's names and credentials (`hintbox serve --one-endpoint`). Pure. */
describe('one endpoint', () => {
  it('finds the server of a prefixed tool name, and none where two servers could have made it', () => {
    assert.deepEqual(memberOf('fs__read_file', ['fs', 'db']), { server: 'fs', tool: 'read_file' });
    assert.deepEqual(memberOf('fs__a__b', ['fs', 'db']), { server: 'fs', tool: 'a__b' });
    assert.equal(memberOf('a__b__c', ['a', 'a__b']), undefined, '"a" + "b__c" or "a__b" + "c"');
    assert.equal(memberOf('fs__', ['fs']), undefined);
    assert.equal(memberOf('other__x', ['fs']), undefined);
    assert.equal(memberOf('fsx__y', ['fs']), undefined);
  });

  it('names each server whose tools another would hide (x__y beside x), and no other', () => {
    assert.deepEqual(hiddenServers(['x', 'x__y', 'x_y', 'xx__y', 'a__b', 'x__y__z']), [
      { server: 'x__y', by: 'x' },
      { server: 'x__y__z', by: 'x' },
      { server: 'x__y__z', by: 'x__y' },
    ]);
    assert.deepEqual(hiddenServers(['a__b', 'fs', 'db']), [], 'a name with __ alone is reachable');
    // What the check stands for: no tool of x__y is served beside x.
    assert.equal(memberOf('x__y__read', ['x', 'x__y']), undefined);
  });

  it('lets the credentials use at /mcp exactly the servers each check allows, with their tags', async () => {
    const inner: Authenticator = {
      description: 'test',
      challenge: (_d, server) => `Bearer server="${server}"`,
      authenticate: (headers, server) =>
        Promise.resolve(
          headers.authorization !== 'Bearer ok'
            ? { allowed: false, status: 401, reason: 'unknown token', caller: null }
            : server === 'db'
              ? { allowed: false, status: 403, reason: 'not db', caller: { subject: 'bob' } }
              : { allowed: true, caller: { subject: 'bob' }, ...(server === 'fs' ? { tags: ['read'] } : {}) },
        ),
    };
    const auth = combinedAuthenticator(inner, () => ['fs', 'db', 'web']);
    const ok = await auth.authenticate({ authorization: 'Bearer ok' }, COMBINED);
    assert.ok(ok.allowed);
    assert.deepEqual(
      [...(ok.servers ?? [])],
      [
        ['fs', ['read']],
        ['web', undefined],
      ],
    );
    assert.deepEqual(
      [...membersOf(ok, ['fs', 'db', 'web'])],
      [
        ['fs', { caller: { subject: 'bob' }, tags: ['read'] }],
        ['web', { caller: { subject: 'bob' } }],
      ],
    );
    const bad = await auth.authenticate({}, COMBINED);
    assert.deepEqual(bad, { allowed: false, status: 401, reason: 'unknown token', caller: null });
    // /mcp is an endpoint of its own (OAuth: a resource with its own metadata), not its first server's.
    assert.equal(auth.challenge({ status: 401, reason: 'x', caller: null }, COMBINED), 'Bearer server="*"');
    // A session keeps what it was opened with: credentials allowing fewer servers may not ride on it.
    const fewer = { caller: { subject: 'bob' }, servers: new Map([['web', undefined]]) };
    assert.equal(coversAccess(fewer, ok), false);
    assert.equal(coversAccess(ok, ok), true);
    // Without credentials: every server, as at its own path.
    assert.deepEqual(
      [...membersOf(null, ['fs', 'db'])],
      [
        ['fs', null],
        ['db', null],
      ],
    );
  });
});
