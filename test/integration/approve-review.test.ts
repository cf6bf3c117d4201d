import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, readFileSync } from 'node:fs';
import { it } from 'node:test';
import { lockFilePath } from '../../src/approvals/lock-file.js';
import { integrationSuite } from './support/suite.js';
import { allHintboxContainers, ensureTestImages } from './support/docker.js';
import { untrustedLiarProfile } from './support/liar-profile.js';
import { HINTBOX_BIN, hintboxCommand, hintboxTestEnv } from './support/hintbox-process.js';
import { scratchFolder } from '../support/scratch-folder.js';

/**
 * `hintbox approve` as a review a person answers: asked y/N on a terminal, `--yes` for
 * scripts, and refused (nothing started, nothing written) for a script that said neither. And
 * approve and plan need nothing only a run needs (a token, a workspace the sandbox may write).
 */
integrationSuite(
  'approve asks, and lists without what only a run needs',
  { timeout: 300_000, images: [ensureTestImages] },
  (suite) => {
    const workspace = suite.workspace;
    const idsOfOurs = async (): Promise<string[]> => (await allHintboxContainers()).map((c) => c.Id).sort();

    /** `hintbox approve …` on a pseudo-terminal (script(1)), the person typing `typed`. */
    const onTerminal = (args: string[], typed: string): Promise<{ code: number | null; output: string }> =>
      new Promise((resolve, reject) => {
        const command = [HINTBOX_BIN, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
        const child = spawn('script', ['-qec', command, '/dev/null'], {
          env: hintboxTestEnv(),
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        let output = '';
        child.stdout.on('data', (chunk: Buffer) => {
          output += chunk.toString('utf8');
          // The answer once the question is on the screen, as a person would type it.
          if (/\[y\/N\] $/.test(output)) child.stdin.write(typed);
        });
        child.on('error', reject);
        child.on('close', (code) => resolve({ code, output }));
      });

    // proves: APPROVE-ASKS
    it('approve without a terminal and without --yes approves nothing: one line naming --yes, exit 2, no lock file, nothing started', async () => {
      const { file } = untrustedLiarProfile(workspace, { prefix: 'liar-review' });
      const before = await idsOfOurs();
      const approve = await hintboxCommand(['approve', file, '--all']);
      assert.equal(approve.code, 2, approve.stderr);
      assert.equal(
        approve.stderr,
        'approve: no terminal to ask y/N on (stdin is not a TTY): pass --yes to approve what it shows without asking\n',
      );
      assert.equal(approve.stdout, '');
      assert.equal(existsSync(lockFilePath(file)), false, 'no lock file written');
      assert.deepEqual(await idsOfOurs(), before, 'no container started');
    });

    // proves: APPROVE-ASKS
    it('approve on a terminal shows the review, then asks y/N: no writes nothing, y writes the lock', async () => {
      const { file } = untrustedLiarProfile(workspace, { prefix: 'liar-review' });
      const lock = lockFilePath(file);
      const no = await onTerminal(['approve', file, '--all'], 'n\r');
      assert.equal(no.code, 1, no.output);
      assert.match(no.output, /identity: never approved; its definition:[\s\S]*claims: [\s\S]*runs in: sandbox /);
      assert.match(no.output, /identity: to approve \([0-9a-f]{12}\)/);
      assert.match(no.output, /Approve the \d+ change\(s\) above into .*\.lock\.json\? \[y\/N\] /);
      assert.match(no.output, /nothing approved: .* unchanged/);
      assert.equal(existsSync(lock), false, 'answered no: no lock file');

      const yes = await onTerminal(['approve', file, '--all'], 'y\r');
      assert.equal(yes.code, 0, yes.output);
      assert.ok(existsSync(lock), yes.output);
      assert.ok(Object.keys((JSON.parse(readFileSync(lock, 'utf8')) as { tools: object }).tools).includes('identity'));
    });

    // proves: LISTING-NEEDS-NO-RUNTIME-INPUTS
    it('approve and plan list a server whose token is unset and whose workspace the sandbox user cannot write; run refuses both', async () => {
      const locked = scratchFolder('hintbox-unwritable-');
      chmodSync(locked, 0o555); // as root the sandboxes run as 10001: theirs to read, not to write
      const { file } = untrustedLiarProfile(locked, {
        prefix: 'liar-listing',
        extra: { env: { API_TOKEN: '${HINTBOX_TEST_UNSET_TOKEN}' } },
      });
      const plan = await hintboxCommand(['plan', file]);
      assert.equal(plan.code, 0, plan.stderr);
      assert.match(plan.stdout, /identity/);
      assert.match(
        plan.stderr,
        /env\.API_TOKEN: environment variable HINTBOX_TEST_UNSET_TOKEN is not set: the server is listed without it \(hintbox run will need it\)/,
      );
      assert.match(
        plan.stderr,
        /hintbox run will refuse: .*mounts\[0\]\.source: .* cannot be written by the sandbox user/,
      );
      const approve = await hintboxCommand(['approve', file, '--all', '--yes']);
      assert.equal(approve.code, 0, approve.stderr);
      assert.match(approve.stdout, /identity: approved \(/);
      assert.ok(existsSync(lockFilePath(file)));

      const run = await hintboxCommand(['run', file]);
      assert.equal(run.code, 2, run.stderr);
      assert.match(
        run.stderr,
        /env\.API_TOKEN: environment variable HINTBOX_TEST_UNSET_TOKEN is not set and has no default/,
      );
      const withToken = await hintboxCommand(['run', file], { HINTBOX_TEST_UNSET_TOKEN: 'set' });
      assert.equal(withToken.code, 2, withToken.stderr);
      assert.match(withToken.stderr, /mounts\[0\]\.source: .* cannot be written by the sandbox user/);
    });
  },
);
