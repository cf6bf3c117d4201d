import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { deniedHostPaths, denyReason } from '../../src/profile/host-path-denylist.js';

const HOME = '/home/alice';

describe('host path denylist', () => {
  it('lists the system paths and the secrets under the given home', () => {
    const denied = deniedHostPaths(HOME);
    for (const p of ['/var/run/docker.sock', '/run/docker.sock', '/proc', '/sys', '/dev', '/etc', '/var/lib/docker']) {
      assert.ok(denied.includes(p), p);
    }
    for (const s of ['.ssh', '.aws', '.docker', '.gnupg', '.kube']) assert.ok(denied.includes(`${HOME}/${s}`), s);
    assert.equal(new Set(denied).size, denied.length);
  });

  it('refuses a denied path, anything inside one, and anything that contains one', () => {
    const cases: Array<[string, RegExp]> = [
      ['/etc', /\/etc is on the denylist/],
      ['/etc/', /on the denylist/],
      ['/etc/ssl/certs', /inside \/etc/],
      ['/var/run/docker.sock', /denylist/],
      ['/var/run', /contains \/var\/run\/docker\.sock/],
      ['/', /contains/],
      ['/proc/self', /inside \/proc/],
      [`${HOME}/.ssh`, /denylist/],
      [`${HOME}/.ssh/id_rsa`, /inside/],
      [`${HOME}/.config/gcloud/creds`, /inside/],
      [HOME, /contains \/home\/alice\/\.ssh/],
      ['/home', /contains/],
      [`${HOME}/projects/../.aws`, /denylist/],
    ];
    for (const [source, reason] of cases) {
      const got = denyReason(source, HOME);
      assert.ok(got, `${source} is refused`);
      assert.match(got, reason, source);
    }
  });

  it('allows ordinary folders, including look-alike names', () => {
    for (const source of [
      `${HOME}/projects`,
      `${HOME}/.sshfoo`,
      '/etcetera',
      '/srv/data',
      '/devices',
      '/tmp/x',
      '/var/lib/dockerish',
      `${HOME}/.config`.concat('/app'),
    ]) {
      assert.equal(denyReason(source, HOME), undefined, source);
    }
  });

  it('uses the given home, not the process one', () => {
    assert.match(denyReason('/home/bob/.ssh', '/home/bob') ?? '', /denylist/);
    assert.equal(denyReason('/home/bob/.ssh', HOME), undefined);
  });

  it('refuses a path inside a denied folder whose name starts with two dots', () => {
    assert.ok(denyReason('/etc/..hidden', HOME), "denyReason('/etc/..hidden', HOME)");
    assert.ok(denyReason(`${HOME}/.ssh/..keys`, HOME), 'denyReason(`${HOME}/.ssh/..keys`, HOME)');
  });
});
