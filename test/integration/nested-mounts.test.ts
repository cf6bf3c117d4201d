import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { allHintboxContainers, docker, ensureTestImages, LIAR_IMAGE } from './support/docker.js';
import { hintboxCommand, writeProfile } from './support/hintbox-process.js';

/**
 * Below Engine API 1.44 a read-only bind mount is read-only only at its top: a file system
 * mounted below it stays writable in the container. hintbox must refuse such a source there.
 * Mounting a tmpfs needs root, as CI has.
 */
integrationSuite(
  'nested mount points under a read-only source',
  {
    timeout: 120_000,
    skip: process.getuid?.() !== 0 && 'needs root to mount a tmpfs',
    images: [ensureTestImages],
  },
  (suite) => {
    let inner: string;
    before(() => {
      inner = path.join(suite.workspace, 'inner');
      mkdirSync(inner);
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'hintbox-test', inner]);
      suite.defer(() => execFileSync('umount', [inner]));
      writeFileSync(path.join(inner, 'kept.txt'), 'nested\n');
    });

    // proves: NESTED-MOUNTS
    it('are refused on an engine that cannot make them read-only, before any container starts', async (t) => {
      const { recursiveReadOnly, apiVersion } = await docker();
      if (recursiveReadOnly) return t.skip(`engine API ${apiVersion} makes read-only mounts recursive`);
      const before = (await allHintboxContainers()).length;
      const profile = writeProfile({
        name: 'nested',
        server: { image: LIAR_IMAGE },
        mounts: [{ source: suite.workspace, target: '/data' }],
      });
      const { code, stderr } = await hintboxCommand(['run', profile]);
      assert.equal(code, 2, 'a profile this engine cannot enforce is bad usage');
      assert.match(stderr, /mounts\[0\]\.source: .* has nested mount points \(.*inner\).*cannot make read-only/);
      assert.equal((await allHintboxContainers()).length, before);
      assert.equal(readFileSync(path.join(inner, 'kept.txt'), 'utf8'), 'nested\n');
    });
  },
);
