import assert from 'node:assert/strict';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { allHintboxContainers, ensureTestImages, LIAR_IMAGE } from './support/docker.js';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { scratchFolder } from '../support/scratch-folder.js';
import { hintboxCommand, sandboxFolder, writeProfile } from './support/hintbox-process.js';

/** Failures are one clear message, a non-zero exit, and nothing left started. */
integrationSuite('hintbox fails closed', { timeout: 180_000, images: [ensureTestImages] }, () => {
  const idsOfOurs = async () => new Set((await allHintboxContainers()).map((c) => c.Id));

  it('says where it looked when Docker is not reachable', async () => {
    const profile = writeProfile({ name: 'nodocker', server: { image: LIAR_IMAGE } });
    const { code, stderr } = await hintboxCommand(['run', profile], {
      DOCKER_HOST: 'unix:///tmp/hintbox-no-such.sock',
    });
    assert.equal(code, 1);
    assert.match(stderr, /Docker is not reachable at unix:\/\/\/tmp\/hintbox-no-such\.sock \(from DOCKER_HOST\)/);
  });

  // proves: FAIL-CLOSED
  it('rejects a bad profile with one line per problem and exit code 2, starting nothing', async () => {
    const before = await idsOfOurs();
    const profile = writeProfile({
      name: 'Bad Name',
      server: { image: LIAR_IMAGE, user: '0' },
      mounts: [{ source: '/etc', target: 'relative' }],
      network: 'sometimes',
      surprise: true,
    });
    const { code, stderr } = await hintboxCommand(['run', profile]);
    assert.equal(code, 2);
    const lines = stderr.trim().split('\n');
    assert.ok(lines.length >= 5, stderr);
    for (const line of lines) assert.match(line, /^\/\S+profile\.yaml: \S+: .+/);
    assert.match(stderr, /: mounts\[0\]\.target: /);
    assert.match(stderr, /: server\.user: /);
    assert.match(stderr, /: surprise: unknown key/);
    assert.deepEqual(await idsOfOurs(), before);
  });

  // proves: OPERATOR-OUT-OF-REACH
  it('refuses a profile that its server could rewrite (inside a read-write mount), starting nothing', async () => {
    const before = await idsOfOurs();
    const workspace = sandboxFolder();
    const profile = path.join(workspace, 'profile.yaml');
    const text = stringify({
      name: 'selfedit',
      server: { image: LIAR_IMAGE },
      mounts: [{ source: '.', target: '/data' }],
    });
    writeFileSync(profile, text);
    // A profile its server could rewrite is refused at load, by plan too (it is where the
    // lock file would be written), not only by run.
    for (const command of ['run', 'plan']) {
      const { code, stderr } = await hintboxCommand([command, profile]);
      assert.equal(code, 2, `${command}: ${stderr}`);
      assert.deepEqual(stderr.trim().split('\n'), [
        `${profile}: mounts[0].source: ${workspace} may be written by the server and holds the profile file (${profile}) and the lock file of approved definitions (${path.join(workspace, 'profile.lock.json')}): move it out, or make the mount mode: ro`,
      ]);
    }
    assert.equal(readFileSync(profile, 'utf8'), text);
    assert.deepEqual(await idsOfOurs(), before);
  });

  it('refuses a read-write workspace the sandbox user cannot write (root-owned, as root): one line, exit 2, nothing started (plan: a warning)', async () => {
    const before = await idsOfOurs();
    // As root the sandboxes run as 10001: a root-owned folder is theirs to read, not to write.
    const workspace = scratchFolder('hintbox-rootowned-');
    chmodSync(workspace, 0o555);
    const profile = writeProfile({
      name: 'rootowned',
      server: { image: LIAR_IMAGE },
      mounts: [{ source: workspace, target: '/data' }],
    });
    {
      // plan lists in a read-only sandbox: it warns with the same line and goes on.
      const { code, stderr } = await hintboxCommand(['plan', profile]);
      assert.equal(code, 0, stderr);
      assert.match(
        stderr,
        /hintbox run will refuse: .*: mounts\[0\]\.source: .* cannot be written by the sandbox user/,
      );
    }
    for (const command of ['run']) {
      const { code, stderr } = await hintboxCommand([command, profile]);
      assert.equal(code, 2, `${command}: ${stderr}`);
      // Its one line, besides hintbox's own notes (`hintbox: no lock file …`).
      const lines = stderr
        .trim()
        .split('\n')
        .filter((line) => !line.startsWith('hintbox: '));
      assert.equal(lines.length, 1, stderr);
      assert.match(
        lines[0] ?? '',
        /: mounts\[0\]\.source: .* cannot be written by the sandbox user \d+:\d+ \(sandboxes never run as root\): chown -R /,
      );
    }
    assert.deepEqual(await idsOfOurs(), before);
  });

  it('stops at a malformed lock file before anything starts: no audit chain, no sink, no container', async () => {
    const before = await idsOfOurs();
    const profile = writeProfile({ name: 'badlock', server: { image: LIAR_IMAGE } });
    writeFileSync(path.join(path.dirname(profile), 'profile.lock.json'), '{ "lockfileVersion": 1, ');
    const audit = path.join(sandboxFolder(), 'audit');
    const { code, stderr } = await hintboxCommand(['run', profile], {
      HINTBOX_AUDIT_DIR: audit,
      // Nothing listens here: a sink started anyway would say so on stderr.
      HINTBOX_DATABASE_URL: 'postgres://hintbox@127.0.0.1:9/none',
    });
    assert.equal(code, 2, stderr);
    assert.match(stderr, /profile\.lock\.json: \(file\): not JSON/);
    assert.doesNotMatch(stderr, /audit log shipped|audit sink/, 'the sink was never started');
    assert.equal(existsSync(audit), false, 'no audit chain was opened (and left without log.close)');
    assert.deepEqual(await idsOfOurs(), before);
  });

  it('fails audit verify on an audit folder that does not exist, rather than saying every chain holds', async () => {
    const missing = path.join(sandboxFolder(), 'no-audit-here');
    const { code, stdout, stderr } = await hintboxCommand(['audit', 'verify'], { HINTBOX_AUDIT_DIR: missing });
    assert.equal(code, 1, stdout);
    assert.match(stderr, new RegExp(`audit log ${missing} does not exist: nothing to verify`));
    assert.doesNotMatch(stdout, /every chain holds/);
  });

  // proves: FAIL-CLOSED
  it('reports an image that is missing and cannot be built', async () => {
    const before = await idsOfOurs();
    const profile = writeProfile({ name: 'noimage', server: { image: 'hintbox-test/absent:never' } });
    const { code, stderr } = await hintboxCommand(['run', profile]);
    assert.equal(code, 1);
    assert.match(stderr, /image hintbox-test\/absent:never is not present, cannot be pulled/);
    assert.deepEqual(await idsOfOurs(), before);
  });

  // proves: FAIL-CLOSED
  it('shows the stderr tail of a server that fails initialize, and removes its container', async () => {
    const before = await idsOfOurs();
    const profile = writeProfile({
      name: 'noinit',
      server: { image: LIAR_IMAGE, command: ['sh', '-c', 'echo "boom: the server gave up" >&2; exit 7'] },
    });
    const { code, stderr } = await hintboxCommand(['run', profile]);
    assert.equal(code, 1);
    assert.match(stderr, /failed to initialize/);
    assert.match(stderr, /boom: the server gave up/);
    assert.deepEqual(await idsOfOurs(), before);
  });
});
