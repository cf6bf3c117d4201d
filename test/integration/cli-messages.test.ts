import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { stringify } from 'yaml';
import { integrationSuite } from './support/suite.js';
import { docker, ensureTestImages } from './support/docker.js';
import { hintboxCommand } from './support/hintbox-process.js';
import { scratchFolder } from '../support/scratch-folder.js';

/**
 * What a new user reads in the first hour, from the shipped CLI: the text and the exit code of
 * each message issue 36 found unhelpful.
 */
integrationSuite("the CLI's messages", { timeout: 600_000, images: [ensureTestImages] }, (suite) => {
  it('an unknown command or flag: did you mean, exit 2', async () => {
    const command = await hintboxCommand(['instal', 'p.yaml']);
    assert.equal(command.code, 2);
    assert.equal(command.stderr, 'unknown command "instal" (did you mean install?) (see hintbox --help)\n');
    const flag = await hintboxCommand(['install', 'p.yaml', '--rebiuld']);
    assert.equal(flag.code, 2);
    assert.equal(
      flag.stderr,
      'install: unknown option --rebiuld (did you mean --rebuild?); see hintbox install --help\n',
    );
    const client = await hintboxCommand(['install', 'p.yaml', '--client', 'vs-code']);
    assert.equal(client.code, 2);
    assert.match(client.stderr, /^install: --client: expected one of .*, got "vs-code" \(did you mean vscode\?\)\n$/);
  });

  it('a missing profile file: plain words, exit 2', async () => {
    const { code, stderr } = await hintboxCommand(['plan', '/nonexistent/filesystem.yaml']);
    assert.equal(code, 2);
    assert.match(stderr, /^\/nonexistent\/filesystem\.yaml: no such file \(/);
    assert.doesNotMatch(stderr, /ENOENT/);
  });

  it('audit verify on a state folder that never recorded a call: nothing recorded yet, exit 0', async () => {
    const state = scratchFolder('hintbox-fresh-state-');
    const { code, stdout, stderr } = await hintboxCommand(['audit', 'verify'], { HINTBOX_STATE_DIR: state });
    assert.equal(code, 0, stderr);
    assert.match(stdout, /: nothing recorded yet/);
  });

  it('a build shows its steps, not their output, and no unconsumed build-arg warning; --verbose shows all', async () => {
    // A profile of its own per build (a rebuild would rebuild the shared bases too).
    const profileSaying = (marker: string): string => {
      const folder = scratchFolder('hintbox-quiet-build-');
      mkdirSync(path.join(folder, 'image'));
      // On the Node base, as the gallery's images are: hintbox passes it NODE_SERVER_IMAGE, never BASE_IMAGE.
      writeFileSync(
        path.join(folder, 'image', 'Dockerfile'),
        `ARG NODE_SERVER_IMAGE\nFROM \${NODE_SERVER_IMAGE}\nRUN echo said-${marker}\n`,
      );
      const image = `hintbox-test/${marker}:1`;
      suite.defer(async () => (await docker()).docker.getImage(image).remove({ force: true }));
      const profile = path.join(folder, 'quiet.yaml');
      writeFileSync(profile, stringify({ name: 'quiet', server: { image, build: 'image' } }));
      return profile;
    };
    const marker = `quiet-build-${randomBytes(4).toString('hex')}`;
    const quiet = await hintboxCommand(['images', 'build', profileSaying(marker)]);
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.match(quiet.stderr, new RegExp(`Step 3/\\d+ : RUN echo said-${marker}`));
    assert.doesNotMatch(quiet.stderr, new RegExp(`^(?!.*Step).*said-${marker}`, 'm'), 'the step ran quietly');
    assert.doesNotMatch(quiet.stderr, /were not consumed/);

    const loud = `verbose-build-${randomBytes(4).toString('hex')}`;
    const verbose = await hintboxCommand(['images', 'build', profileSaying(loud), '--verbose']);
    assert.equal(verbose.code, 0, verbose.stderr);
    assert.match(verbose.stderr, new RegExp(`debug: said-${loud}$`, 'm'), 'the step output, with --verbose');
    assert.doesNotMatch(verbose.stderr, /were not consumed/);
  });

  it("the demo prints no roots error of the preview's sandbox", async () => {
    const { code, stdout, stderr } = await hintboxCommand(['demo']);
    assert.equal(code, 0, stderr);
    assert.match(stdout + stderr, /Preview/);
    assert.doesNotMatch(stderr, /Failed to request initial roots|-32601/);
    assert.doesNotMatch(stderr, /were not consumed/);
  });
});
