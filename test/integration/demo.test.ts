import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import os from 'node:os';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { ensureTestImages } from './support/docker.js';
import { hintboxCommand } from './support/hintbox-process.js';

const scratch = (): string[] => readdirSync(os.tmpdir()).filter((name) => name.startsWith('hintbox-demo-'));

/** The README's main command, end to end: it runs, shows what it promises, and leaves nothing. */
integrationSuite('hintbox demo', { timeout: 240_000, images: [ensureTestImages] }, () => {
  it('runs the filesystem server under hintbox, writes what was approved, keeps what was declined, and cleans up', async () => {
    const before = new Set(scratch());
    const { code, stdout, stderr } = await hintboxCommand(['demo']);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /-> on the host: "written by the server\\n"/);
    assert.match(stdout, /hintbox denied move_file: the confirmation was declined; notes\.txt is still there/);
    assert.match(stdout, /7\. client disconnected: 0 container\(s\) of the session left/);
    assert.match(stdout, /filesystem\/move_file {2}denied by person {2}not-run/);
    assert.match(stdout, /filesystem\/write_file {2}allowed by person {2}ok/);
    assert.deepEqual(
      scratch().filter((name) => !before.has(name)),
      [],
      'the scratch workspace and state folder are removed',
    );
  });
});
