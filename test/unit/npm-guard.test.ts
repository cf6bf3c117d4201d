import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isHostPath, lockHostPath } from '../../src/engine/docker/npm-guard.js';
import { parseNpmSpec } from '../../src/packages/package-source.js';

describe('npm guard: host paths in a package lock', () => {
  const registry = (name: string): { version: string; resolved: string } => ({
    version: '1.0.0',
    resolved: `https://registry.npmjs.org/${name}/-/${name}-1.0.0.tgz`,
  });

  it('tells host paths from registry, remote and git URLs', () => {
    for (const spec of ['file:/abs/x.tgz', 'file:../x', 'git+file:///abs/repo', 'link:../x', '../x', '/abs/x']) {
      assert.equal(isHostPath(spec), true, spec);
    }
    for (const spec of ['https://registry.npmjs.org/a/-/a-1.0.0.tgz', 'git+ssh://git@github.com/a/b.git#abc']) {
      assert.equal(isHostPath(spec), false, spec);
    }
  });

  it("passes a lock of registry packages, and the profile's own package as the local spec it names", () => {
    const own = parseNpmSpec('server@file:/abs/server.tgz');
    const packages = {
      '': { dependencies: { server: 'file:/abs/server.tgz' } },
      'node_modules/server': { version: '1.0.0', resolved: 'file:/abs/server.tgz', dependencies: { a: '^1' } },
      'node_modules/a': registry('a'),
      'node_modules/a/node_modules/b': registry('b'),
    };
    assert.equal(lockHostPath(packages, own, 'x.json'), undefined);
  });

  it('refuses a nested file: entry, a link and a folder outside node_modules, naming what asked', () => {
    const source = parseNpmSpec('server@1.0.0');
    const base = { '': { dependencies: { server: '1.0.0' } }, 'node_modules/server': registry('server') };
    const asking = { ...registry('a'), dependencies: { evil: '1.0.0' } };
    const cases: [Record<string, object>, RegExp][] = [
      [
        { 'node_modules/a': asking, 'node_modules/a/node_modules/evil': { version: '1.0.0', resolved: 'file:/s.tgz' } },
        /^refused evil@file:\/s\.tgz, required by a in the lock x\.json/,
      ],
      [{ 'node_modules/a': asking, 'node_modules/evil': { resolved: '../s', link: true } }, /^refused evil@\.\.\/s/],
      [{ '../s': { name: 'evil', version: '1.0.0' } }, /^refused evil@\.\.\/s, required by nothing/],
      // The profile's package named by version may not come from this host either.
      [{ 'node_modules/server': { version: '1.0.0', resolved: 'file:/s.tgz' } }, /^refused server@file:\/s\.tgz/],
    ];
    for (const [entries, line] of cases) {
      assert.match(lockHostPath({ ...base, ...entries }, source, 'x.json') ?? '', line);
    }
  });
});
