import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, beforeEach, describe, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { docker, FIXTURES } from './support/docker.js';
import { hintboxCommand, writeProfile } from './support/hintbox-process.js';
import { guardedPipArgs, pipGuardLine } from '../../src/engine/docker/pip-guard.js';
import { packageImageName, parseNpmSpec } from '../../src/packages/package-source.js';
import { scratchFolder } from '../support/scratch-folder.js';

/**
 * Resolving, locking and installing a server's packages runs none of their code on the host.
 * Each attack is a package whose dependency would run code when prepared or installed: that code
 * appends to a marker file of the test's, which must never appear.
 */
integrationSuite('no package code on the host', { timeout: 600_000 }, () => {
  /** `hintbox images build` of a profile running `server`, in a temp folder of its own. */
  async function build(
    server: Record<string, string>,
    env: Record<string, string>,
  ): Promise<{ code: number | null; stderr: string; lockFile: string; tmp: string }> {
    const profile = writeProfile({ name: 'evil', server });
    const tmp = scratchFolder('hintbox-package-tmp-');
    const result = await hintboxCommand(['images', 'build', profile], { ...env, TMPDIR: tmp });
    const kind = server.npm ? 'npm-lock.json' : 'pip-lock.txt';
    return { ...result, lockFile: path.join(path.dirname(profile), `profile.${kind}`), tmp };
  }

  async function assertNoImage(image: string): Promise<void> {
    const { docker: d } = await docker();
    await assert.rejects(d.getImage(image).inspect(), `no image ${image}`);
  }

  describe('PyPI: only wheels from the index are prepared', () => {
    let wheels: string;
    let elsewhere: string;
    let marker: string;
    let pip: Record<string, string>;
    before(() => {
      const folder = scratchFolder('hintbox-evil-pypi-');
      wheels = path.join(folder, 'wheels');
      elsewhere = path.join(folder, 'elsewhere');
      marker = path.join(folder, 'backend-ran');
      execFileSync('python3', [path.join(FIXTURES, 'evilpypi', 'make_evil.py'), wheels, elsewhere, marker]);
      pip = { PIP_NO_INDEX: '1', PIP_FIND_LINKS: wheels };
    });
    // Each test sees only what its own run did.
    beforeEach(() => rmSync(marker, { force: true }));

    function assertBackendNeverRan(stderr: string): void {
      const ran = existsSync(marker) ? readFileSync(marker, 'utf8') : '';
      assert.equal(ran, '', `${ran}(the sdist's build backend ran on the host)\n${stderr}`);
    }

    /** The build of `spec` is refused with one line that names `refused` and the wheel that asked; nothing is left. */
    async function assertRefused(spec: string, refused: string, askedBy: string): Promise<void> {
      const result = await build({ pypi: spec }, pip);
      assert.notEqual(result.code, 0, result.stderr);
      assertBackendNeverRan(result.stderr);
      const line = result.stderr.split('\n').find((l) => l.includes(`refused ${refused}`));
      assert.ok(line, result.stderr);
      assert.ok(line.includes(`required by ${askedBy}`), line);
      assert.match(line, /not a wheel from the index/);
      assert.equal(existsSync(result.lockFile), false, 'no lock is written');
      assert.deepEqual(readdirSync(result.tmp), [], 'no temp folder is left');
      await assertNoImage(`hintbox/pypi.${spec.replace('==', ':')}`);
    }

    // proves: NO-HOST-PACKAGE-CODE
    it("refuses a wheel's direct-URL dependency (file://…sdist) before pip prepares it: its build backend never runs on the host", async () => {
      await assertRefused(
        'evilserver==1.0.0',
        `evildep @ file://${elsewhere}/evildep-1.0.tar.gz`,
        'evilserver-1.0.0-py3-none-any.whl',
      );
    });

    // proves: NO-HOST-PACKAGE-CODE
    it("refuses a wheel's VCS dependency (git+file://) before pip clones it: its build backend never runs on the host", async () => {
      await assertRefused(
        'evilvcs==1.0.0',
        `evildep @ git+file://localhost${elsewhere}/evildep-git`,
        'evilvcs-1.0.0-py3-none-any.whl',
      );
    });

    // proves: NO-HOST-PACKAGE-CODE
    it('refuses a dependency the index holds only as an sdist: nothing is built on the host', async () => {
      const result = await build({ pypi: 'evilsdist==1.0.0' }, pip);
      assert.notEqual(result.code, 0, result.stderr);
      assertBackendNeverRan(result.stderr);
      // --only-binary=:all: keeps the sdist from being a candidate at all (the guard would refuse it too).
      assert.match(result.stderr, /No matching distribution found for evilsdep==1\.0/);
      assert.equal(existsSync(result.lockFile), false, 'no lock is written');
      assert.deepEqual(readdirSync(result.tmp), [], 'no temp folder is left');
      await assertNoImage('hintbox/pypi.evilsdist:1.0.0');
    });

    // proves: NO-HOST-PACKAGE-CODE
    it('refuses a direct-URL line in the pip lock before pip prepares it (a lock edited to pull an sdist)', async () => {
      const tarball = path.join(elsewhere, 'evildep-1.0.tar.gz');
      const digest = createHash('sha256').update(readFileSync(tarball)).digest('hex');
      const profile = writeProfile({ name: 'evil', server: { pypi: 'evilsdist==1.0.0' } });
      const lockFile = path.join(path.dirname(profile), 'profile.pip-lock.txt');
      const lock = `# hintbox PyPI lock for: evilsdist==1.0.0\nevildep @ file://${tarball} --hash=sha256:${digest}\n`;
      writeFileSync(lockFile, lock);
      const tmp = scratchFolder('hintbox-package-tmp-');
      const result = await hintboxCommand(['images', 'build', profile], { ...pip, TMPDIR: tmp });
      assert.notEqual(result.code, 0, result.stderr);
      assertBackendNeverRan(result.stderr);
      assert.match(result.stderr, new RegExp(`refused evildep @ file://${tarball}, required by -r .*pip-lock\\.txt`));
      assert.equal(readFileSync(lockFile, 'utf8'), lock, 'the lock is left as it was');
      assert.deepEqual(readdirSync(tmp), [], 'no temp folder is left');
      await assertNoImage('hintbox/pypi.evilsdist:1.0.0');
    });

    // proves: NO-HOST-PACKAGE-CODE
    it('starts no Python interpreter from pip, whatever asks for one (the fence behind the wrapper)', () => {
      const folder = scratchFolder('hintbox-fence-');
      const ran = path.join(folder, 'ran');
      const python = path.join(folder, 'python3');
      writeFileSync(python, `#!/bin/sh\ntouch '${ran}'\n`, { mode: 0o755 });
      // pip's --python runs pip again under another interpreter: a new process, which no
      // preparation step sees (as a build backend or setup.py would be, were one to get past it).
      const result = spawnSync('python3', guardedPipArgs(['--python', python, 'list']), {
        cwd: folder,
        encoding: 'utf8',
      });
      assert.equal(result.status, 3, result.stderr);
      assert.equal(existsSync(ran), false, 'the interpreter ran');
      assert.match(pipGuardLine(result.stderr) ?? '', new RegExp(`^refused to start ${python} .*starts no Python`));
    });

    // proves: NO-HOST-PACKAGE-CODE
    it('does not run a pip that lacks the internals the guard wraps, and says so in one line', async () => {
      const fake = scratchFolder('hintbox-fake-pip-');
      mkdirSync(path.join(fake, 'pip'));
      writeFileSync(path.join(fake, 'pip', '__init__.py'), '__version__ = "99.0"\n');
      const result = await build({ pypi: 'evilserver==1.0.0' }, { ...pip, PYTHONPATH: fake });
      assert.notEqual(result.code, 0, result.stderr);
      assert.match(result.stderr, /pip 99\.0 on this host lacks the internals hintbox wraps .*hintbox does not run it/);
      assertBackendNeverRan(result.stderr);
      assert.equal(existsSync(result.lockFile), false, 'no lock is written');
      assert.deepEqual(readdirSync(result.tmp), [], 'no temp folder is left');
    });
  });

  describe('npm: no lifecycle script runs, no host path a publisher named is read', () => {
    let folder: string;
    /** A package folder as npm packs it: `package/` with a package.json, an index.js and `files`. */
    function pack(name: string, manifest: Record<string, unknown>, files: Record<string, string> = {}): string {
      const dir = path.join(folder, name, 'package');
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', ...manifest }, null, 2));
      writeFileSync(path.join(dir, 'index.js'), '#!/usr/bin/env node\n');
      for (const [file, text] of Object.entries(files)) writeFileSync(path.join(dir, file), text);
      const tarball = path.join(folder, `${name}-1.0.0.tgz`);
      execFileSync('tar', ['-czf', tarball, '-C', path.dirname(dir), 'package']);
      return tarball;
    }
    const SECRET = 'HOST-SECRET-f3a9c1';
    before(() => {
      folder = scratchFolder('hintbox-evil-npm-');
    });

    /** Removes the image of `spec` if a build made one; says what of the host's secret it holds. */
    async function imageSecret(spec: string): Promise<string> {
      const image = packageImageName(parseNpmSpec(spec));
      const { docker: d } = await docker();
      if (
        !(await d
          .getImage(image)
          .inspect()
          .then(
            () => true,
            () => false,
          ))
      )
        return '';
      const shown = spawnSync(
        'docker',
        ['run', '--rm', '--entrypoint', 'sh', image, '-c', 'cat /app/node_modules/*/secret.txt'],
        {
          encoding: 'utf8',
        },
      );
      await d.getImage(image).remove({ force: true });
      return `the image ${image} holds: ${shown.stdout.trim() || '(no secret)'}`;
    }

    /** The build of `spec` is refused in one line naming `refused` and `askedBy`; nothing is written. */
    async function assertRefused(
      spec: string,
      refused: string,
      askedBy: string,
      env: Record<string, string> = {},
    ): Promise<void> {
      const result = await build({ npm: spec }, env);
      const inImage = await imageSecret(spec);
      assert.equal(inImage, '', `${inImage}\n${result.stderr}`);
      assert.notEqual(result.code, 0, result.stderr);
      const line = result.stderr.split('\n').find((l) => l.includes(`refused ${refused}`));
      assert.ok(line, result.stderr);
      assert.ok(line.includes(`required by ${askedBy}`), line);
      assert.equal(existsSync(result.lockFile), false, 'no lock is written');
      assert.deepEqual(readdirSync(result.tmp), [], 'no temp folder is left');
    }

    // proves: NPM-HOST-PATHS
    it('refuses a dependency that is a file: tarball on this host before npm reads it: the host file reaches no lock and no image', async () => {
      const secret = pack('evilfile', {}, { 'secret.txt': SECRET });
      const server = pack('evilnpm', { bin: { evilnpm: 'index.js' }, dependencies: { evilfile: `file:${secret}` } });
      await assertRefused(`evilnpm@file:${server}`, `evilfile@file:${secret}`, 'evilnpm@1.0.0');
    });

    // proves: NPM-HOST-PATHS
    it('refuses a dependency that is a git+file: repository on this host before npm clones it', async () => {
      const repo = path.join(folder, 'evilrepo');
      mkdirSync(repo);
      writeFileSync(path.join(repo, 'package.json'), JSON.stringify({ name: 'evilgit', version: '1.0.0' }));
      writeFileSync(path.join(repo, 'secret.txt'), SECRET);
      const git = ['-C', repo, '-c', 'user.name=fixture', '-c', 'user.email=fixture@localhost'];
      execFileSync('git', ['-C', repo, 'init', '-q']);
      execFileSync('git', [...git, 'add', '.']);
      execFileSync('git', [...git, 'commit', '-qm', 'evil']);
      const server = pack('evilgitnpm', {
        bin: { evilgitnpm: 'index.js' },
        dependencies: { evilgit: `git+file://${repo}` },
      });
      await assertRefused(`evilgitnpm@file:${server}`, `evilgit@git+file://${repo}`, 'evilgitnpm@1.0.0');
    });

    // proves: NPM-HOST-PATHS
    it('refuses a file: dependency with an npm that has no allow-* settings (npm 10, as Node 20 ships): the guard alone', async () => {
      const prefix = path.join(folder, 'npm10');
      execFileSync('npm', ['install', '--prefix', prefix, '--no-audit', '--no-fund', '--loglevel=error', 'npm@10.9.2']);
      const bin = path.join(prefix, 'node_modules', '.bin');
      const env = { PATH: `${bin}:${process.env.PATH ?? ''}` };
      assert.equal(
        execFileSync(path.join(bin, 'npm'), ['config', 'get', 'allow-file'], { encoding: 'utf8' }).trim(),
        'undefined',
      );
      const secret = pack('evilfile10', {}, { 'secret.txt': SECRET });
      const server = pack('evilnpm10', {
        bin: { evilnpm10: 'index.js' },
        dependencies: { evilfile10: `file:${secret}` },
      });
      await assertRefused(`evilnpm10@file:${server}`, `evilfile10@file:${secret}`, 'evilnpm10@1.0.0', env);
    });

    // proves: NPM-HOST-PATHS
    it('refuses a package lock whose entry is a host path (resolved file:, link: true) before npm installs it', async () => {
      const secret = pack('evillock', {}, { 'secret.txt': SECRET });
      pack('evillink', {}, { 'secret.txt': SECRET });
      const linked = path.join(folder, 'evillink', 'package');
      const server = pack('lockednpm', { bin: { lockednpm: 'index.js' } });
      const spec = `lockednpm@file:${server}`;
      const profile = writeProfile({ name: 'evil', server: { npm: spec } });
      const lockFile = path.join(path.dirname(profile), 'profile.npm-lock.json');
      const base = {
        '': { name: 'hintbox-npm-server', dependencies: { lockednpm: `file:${server}` } },
        'node_modules/lockednpm': { version: '1.0.0', resolved: `file:${server}`, bin: { lockednpm: 'index.js' } },
      };
      // Each a lock edited to pull a host path npm ci would copy in: a tarball, a linked folder.
      const edits: [string, string, Record<string, unknown>][] = [
        ['evillock', `file:${secret}`, { version: '1.0.0', resolved: `file:${secret}` }],
        ['evillink', linked, { resolved: linked, link: true }],
      ];
      for (const [name, resolved, entry] of edits) {
        // lockednpm's entry asks for it, so npm ci installs it rather than prune it as extraneous.
        const asking = { ...base['node_modules/lockednpm'], dependencies: { [name]: '1.0.0' } };
        const packages = { ...base, 'node_modules/lockednpm': asking, [`node_modules/${name}`]: entry };
        const lock = `${JSON.stringify({ name: 'hintbox-npm-server', lockfileVersion: 3, requires: true, packages }, null, 2)}\n`;
        writeFileSync(lockFile, lock);
        const tmp = scratchFolder('hintbox-package-tmp-');
        const result = await hintboxCommand(['images', 'build', profile], { TMPDIR: tmp });
        const inImage = await imageSecret(spec);
        assert.equal(inImage, '', `${inImage}\n${result.stderr}`);
        assert.notEqual(result.code, 0, result.stderr);
        assert.ok(
          result.stderr.includes(`refused ${name}@${resolved}, required by lockednpm in the lock`),
          result.stderr,
        );
        assert.equal(readFileSync(lockFile, 'utf8'), lock, 'the lock is left as it was');
        assert.deepEqual(readdirSync(tmp), [], 'no temp folder is left');
      }
    });

    // proves: NO-HOST-PACKAGE-CODE
    it('runs no install script of the package the profile names on the host (a file: tarball)', async () => {
      const marker = path.join(folder, 'script-ran');
      // Every lifecycle npm would run on an install, each appending its name to the marker.
      const scripts = Object.fromEntries(
        ['preinstall', 'install', 'postinstall', 'prepare', 'prepack', 'postpack'].map((script) => [
          script,
          `node -e "require('fs').appendFileSync('${marker}', '${script} ran on the host\\n')"`,
        ]),
      );
      const server = pack('scriptnpm', { bin: { scriptnpm: 'index.js' }, scripts });
      const spec = `scriptnpm@file:${server}`;
      const image = packageImageName(parseNpmSpec(spec));
      try {
        const result = await build({ npm: spec }, {});
        const ran = existsSync(marker) ? readFileSync(marker, 'utf8') : '';
        assert.equal(ran, '', `${ran}(an install script ran on the host)\n${result.stderr}`);
        assert.equal(result.code, 0, result.stderr);
        assert.match(readFileSync(result.lockFile, 'utf8'), /"node_modules\/scriptnpm"/);
        assert.deepEqual(readdirSync(result.tmp), [], 'no temp folder is left');
      } finally {
        const { docker: d } = await docker();
        await d
          .getImage(image)
          .remove({ force: true })
          .catch(() => undefined);
      }
    });
  });
});
