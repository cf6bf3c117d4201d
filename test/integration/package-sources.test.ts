import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chownSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { docker, FIXTURES, mountsOfClass, sandboxOfClass } from './support/docker.js';
import { hintboxCommand, runHintbox, sandboxFolder, writeProfile } from './support/hintbox-process.js';
import { scratchFolder } from '../support/scratch-folder.js';

const MEMORY = '@modelcontextprotocol/server-memory@2026.8.31';
const MEMORY_IMAGE = 'hintbox/npm.modelcontextprotocol.server.memory:2026.8.31';
const PYNOTES_IMAGE = 'hintbox/pypi.pynotes:1.0.0';

async function removeImage(image: string): Promise<void> {
  const { docker: d } = await docker();
  await d
    .getImage(image)
    .remove({ force: true })
    .catch(() => undefined);
}

/** Servers given as packages: no Dockerfile, no image registry; hintbox builds them onto its bases. */
integrationSuite('package sources', { timeout: 600_000 }, () => {
  // proves: PACKAGE-PINS
  it('runs an npm package with only server.npm; its read tool lands in a read-only sandbox', async () => {
    await removeImage(MEMORY_IMAGE);
    const data = sandboxFolder('hintbox-memory-');
    const profile = writeProfile({
      name: 'memory',
      server: { npm: MEMORY },
      mounts: [{ source: data, target: '/data' }],
      env: { MEMORY_FILE_PATH: '/data/memory.jsonl' },
    });
    const lockFile = path.join(path.dirname(profile), 'profile.npm-lock.json');

    const approve = await hintboxCommand(['approve', profile, '--all', '--yes']);
    assert.equal(approve.code, 0, approve.stderr);
    assert.match(approve.stderr, /wrote .*profile\.npm-lock\.json/, 'the package lock is written beside the profile');
    // Said before the build, not after it: a person (or a client's log) sees at once why the start takes a while.
    const notice = approve.stderr.indexOf(`image ${MEMORY_IMAGE} is not built yet: building it now`);
    assert.ok(notice >= 0, approve.stderr);
    assert.ok(notice < approve.stderr.search(new RegExp(`built image ${MEMORY_IMAGE} in \\d+ s`)), approve.stderr);
    const hintbox = await runHintbox(profile);
    try {
      const lock = JSON.parse(readFileSync(lockFile, 'utf8')) as {
        packages: Record<string, { version?: string; integrity?: string }>;
      };
      const entry = lock.packages['node_modules/@modelcontextprotocol/server-memory'];
      assert.equal(entry?.version, '2026.8.31');
      assert.match(entry?.integrity ?? '', /^sha512-/, 'every tarball is pinned by its hash');

      const created = await hintbox.client.callTool({
        name: 'create_entities',
        arguments: { entities: [{ name: 'hintbox', entityType: 'tool', observations: ['runs packages'] }] },
      });
      assert.notEqual(created.isError, true, JSON.stringify(created));
      const graph = await hintbox.client.callTool({ name: 'read_graph', arguments: {} });
      assert.match(JSON.stringify(graph.content), /runs packages/);
      assert.match(readFileSync(path.join(data, 'memory.jsonl'), 'utf8'), /runs packages/, 'the write landed');

      assert.deepEqual(await mountsOfClass(hintbox.pid, 'ro-offline'), { '/data': true }, 'read_graph: read-only');
      assert.deepEqual(await mountsOfClass(hintbox.pid, 'rw-offline'), { '/data': false });
      for (const sandboxClass of ['ro-offline', 'rw-offline']) {
        // The package was installed on the host: its server starts with no network at all.
        assert.equal((await sandboxOfClass(hintbox.pid, sandboxClass)).HostConfig.NetworkMode, 'none', sandboxClass);
      }
    } finally {
      await hintbox[Symbol.asyncDispose]();
    }

    // The next start reads the lock as it is: resolved once, then reproducible.
    const before = readFileSync(lockFile, 'utf8');
    const plan = await hintboxCommand(['plan', profile]);
    assert.equal(plan.code, 0, plan.stderr);
    assert.doesNotMatch(plan.stderr, /resolving|wrote/);
    assert.equal(readFileSync(lockFile, 'utf8'), before);
  });

  // proves: PACKAGE-PINS
  it('refuses to build from an npm lock whose hash the registry tarball does not match', async () => {
    const profile = writeProfile({ name: 'memory', server: { npm: MEMORY } });
    const lockFile = path.join(path.dirname(profile), 'profile.npm-lock.json');
    const build = await hintboxCommand(['images', 'build', profile]);
    assert.equal(build.code, 0, build.stderr);
    await removeImage(MEMORY_IMAGE);
    // A lock edited to pin other bytes (as a tampered lock or a swapped tarball would look).
    const lock = JSON.parse(readFileSync(lockFile, 'utf8')) as { packages: Record<string, { integrity?: string }> };
    const entry = lock.packages['node_modules/@modelcontextprotocol/server-memory']!;
    entry.integrity = `sha512-${Buffer.alloc(64, 7).toString('base64')}`;
    writeFileSync(lockFile, JSON.stringify(lock, null, 2));

    const refused = await hintboxCommand(['images', 'build', profile]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /EINTEGRITY|integrity/i);
    const { docker: d } = await docker();
    await assert.rejects(d.getImage(MEMORY_IMAGE).inspect(), 'no image was built');
  });

  describe('a PyPI package from a private index (a local folder of wheels)', () => {
    let wheels: string;
    let pip: Record<string, string>;
    before(() => {
      wheels = scratchFolder('hintbox-wheels-');
      execFileSync('python3', [path.join(FIXTURES, 'pynotes', 'make_wheels.py'), wheels]);
      pip = { PIP_NO_INDEX: '1', PIP_FIND_LINKS: wheels };
    });

    it('runs server.pypi with its dependency, pinned by hash; the read tool reads in a read-only sandbox', async () => {
      await removeImage(PYNOTES_IMAGE);
      const workspace = sandboxFolder('hintbox-notes-');
      writeFileSync(path.join(workspace, 'note.txt'), 'from the host');
      if (process.getuid?.() === 0) chownSync(path.join(workspace, 'note.txt'), 10001, 10001);
      const profile = writeProfile({
        name: 'pynotes',
        server: { pypi: 'pynotes==1.0.0' },
        mounts: [{ source: workspace, target: '/workspace' }],
      });
      const approve = await hintboxCommand(['approve', profile, '--all', '--yes'], pip);
      assert.equal(approve.code, 0, approve.stderr);
      const hintbox = await runHintbox(profile, { env: pip });
      try {
        const read = await hintbox.client.callTool({ name: 'read_note', arguments: {} });
        // "[pynotes] " comes from the dependency (pynotes-text): it was resolved and installed.
        assert.deepEqual(read.content, [{ type: 'text', text: '[pynotes] from the host' }]);
        assert.deepEqual(await mountsOfClass(hintbox.pid, 'ro-offline'), { '/workspace': true });
        const write = await hintbox.client.callTool({ name: 'write_note', arguments: { text: 'from the server' } });
        assert.notEqual(write.isError, true, JSON.stringify(write));
        assert.equal(readFileSync(path.join(workspace, 'note.txt'), 'utf8'), 'from the server');
      } finally {
        await hintbox[Symbol.asyncDispose]();
      }
      const lock = readFileSync(path.join(path.dirname(profile), 'profile.pip-lock.txt'), 'utf8');
      assert.match(lock, /^pynotes==1\.0\.0 --hash=sha256:[0-9a-f]{64}$/m);
      assert.match(lock, /^pynotes-text==1\.0\.0 --hash=sha256:[0-9a-f]{64}$/m);
    });

    // proves: PACKAGE-PINS
    it('refuses a wheel whose bytes changed under the same version', async () => {
      const profile = writeProfile({ name: 'pynotes', server: { pypi: 'pynotes==1.0.0' } });
      const first = await hintboxCommand(['images', 'build', profile], pip);
      assert.equal(first.code, 0, first.stderr);
      await removeImage(PYNOTES_IMAGE);
      // The index now serves other bytes as pynotes-text 1.0.0 (a compromised or re-uploaded file).
      const dependency = readdirSync(wheels).find((f) => f.startsWith('pynotes_text-'))!;
      const bytes = readFileSync(path.join(wheels, dependency));
      writeFileSync(path.join(wheels, dependency), Buffer.concat([bytes, Buffer.from('tampered')]));

      const refused = await hintboxCommand(['images', 'build', profile], pip);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /hash/i);
      const { docker: d } = await docker();
      await assert.rejects(d.getImage(PYNOTES_IMAGE).inspect(), 'no image was built');
    });
  });
});
