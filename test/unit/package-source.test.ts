import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { chooseCommand } from '../../src/engine/docker/package-commands.js';
import {
  normalizePypiName,
  packageImageName,
  packageLockPath,
  parseNpmSpec,
  parsePypiSpec,
} from '../../src/packages/package-source.js';
import { ServerSchema } from '../../src/profile/profile-schema.js';

describe('package sources', () => {
  it('parses npm specs, scoped or not, with or without a version', () => {
    assert.deepEqual(parseNpmSpec('@modelcontextprotocol/server-memory@2026.8.31'), {
      kind: 'npm',
      name: '@modelcontextprotocol/server-memory',
      version: '2026.8.31',
      spec: '@modelcontextprotocol/server-memory@2026.8.31',
    });
    assert.equal(parseNpmSpec('@scope/name').version, 'latest');
    assert.deepEqual(
      [parseNpmSpec('mcp-fetch-server@^1').name, parseNpmSpec('mcp-fetch-server@^1').version],
      ['mcp-fetch-server', '^1'],
    );
  });

  it('parses PyPI requirements and normalises names as PEP 503 does', () => {
    const fetch = parsePypiSpec('mcp-server-fetch == 2025.4.7');
    assert.deepEqual([fetch.name, fetch.version], ['mcp-server-fetch', '==2025.4.7']);
    assert.deepEqual(
      [parsePypiSpec('pkg[cli]>=1,<2').name, parsePypiSpec('pkg[cli]>=1,<2').version],
      ['pkg[cli]', '>=1,<2'],
    );
    assert.equal(normalizePypiName('Mcp_Server.Fetch[cli]'), 'mcp-server-fetch');
  });

  it('names images and locks after the package', () => {
    assert.equal(
      packageImageName(parseNpmSpec('@modelcontextprotocol/server-memory@2026.8.31')),
      'hintbox/npm.modelcontextprotocol.server.memory:2026.8.31',
    );
    assert.equal(packageImageName(parseNpmSpec('x@^1.2')), 'hintbox/npm.x:_1.2');
    assert.equal(
      packageImageName(parsePypiSpec('Mcp_Server_Fetch==2025.4.7')),
      'hintbox/pypi.mcp.server.fetch:2025.4.7',
    );
    assert.equal(packageImageName(parsePypiSpec('pynotes')), 'hintbox/pypi.pynotes:any');
    assert.equal(packageLockPath('/p/memory.yaml', 'npm'), '/p/memory.npm-lock.json');
    assert.equal(packageLockPath('/p/fetch.yml', 'pypi'), '/p/fetch.pip-lock.txt');
  });

  it('picks the command: the one asked for, the only one, or the one named like the package', () => {
    const source = parseNpmSpec('@scope/tool@1');
    assert.deepEqual(chooseCommand(source, { a: 'a.js' }, undefined), ['a', 'a.js']);
    assert.deepEqual(chooseCommand(source, { tool: 't.js', other: 'o.js' }, undefined), ['tool', 't.js']);
    assert.deepEqual(chooseCommand(source, { tool: 't.js', other: 'o.js' }, 'other'), ['other', 'o.js']);
    assert.throws(
      () => chooseCommand(source, { a: 'a.js', b: 'b.js' }, undefined),
      /several commands \(a, b\): name one with server\.bin/,
    );
    assert.throws(
      () => chooseCommand(source, { a: 'a.js' }, 'nope'),
      /no command nope \(server\.bin\); its commands: a/,
    );
    assert.throws(() => chooseCommand(source, {}, undefined), /no command to run/);
    // Only the package's own entries: a name from Object.prototype is no command.
    assert.throws(() => chooseCommand(source, { a: 'a.js' }, 'constructor'), /no command constructor/);
  });

  /** The schema's problems with a `server` section, as `path: message`. */
  const problems = (server: unknown): string[] => {
    const result = ServerSchema.safeParse(server);
    return result.success ? [] : result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };

  it('takes exactly one source', () => {
    assert.deepEqual(problems({ npm: 'a@1' }), []);
    assert.deepEqual(problems({ pypi: 'a==1', image: 'mine/a:1' }), []);
    assert.deepEqual(problems({ npm: 'a@1', pypi: 'a==1' }), ['pypi: expected one of npm or pypi, not both']);
    assert.deepEqual(problems({ npm: 'a@1', build: '.' }), ['build: not with npm: hintbox builds the image']);
    assert.deepEqual(problems({}), ['image: expected an image, or a package to run (npm or pypi)']);
    assert.deepEqual(problems({ image: 'a', bin: 'x' }), ['bin: only with npm or pypi (else: command)']);
    assert.match(problems({ npm: 'a b' }).join(), /expected an npm package/);
    assert.match(problems({ pypi: 'a; rm -rf /' }).join(), /expected a PyPI requirement/);
  });

  it('takes Debian packages for an npm package only, by plain name', () => {
    assert.deepEqual(problems({ npm: 'a@1', debian: ['chromium', 'fonts-liberation', 'libstdc++6'] }), []);
    assert.deepEqual(problems({ image: 'a', debian: ['git'] }), [
      'debian: only with npm (else: a Dockerfile of your own)',
    ]);
    assert.deepEqual(problems({ pypi: 'a==1', debian: ['git'] }), [
      'debian: only with npm (else: a Dockerfile of your own)',
    ]);
    // Nothing that apt-get would read as an option or a second word, nor a version or a release.
    for (const name of ['-oAPT::x=1', 'git curl', 'git;id', 'git=1:2.39', 'git/trixie', 'Git', '']) {
      assert.match(problems({ npm: 'a@1', debian: [name] }).join(), /debian\.0: expected a Debian package name/, name);
    }
  });
});
