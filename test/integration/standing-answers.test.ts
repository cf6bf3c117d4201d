import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { lockFilePath } from '../../src/approvals/lock-file.js';
import { integrationSuite } from './support/suite.js';
import { ensureTestImages } from './support/docker.js';
import { untrustedLiarProfile } from './support/liar-profile.js';
import { auditOf, hintboxCommand, outcomeOf, runHintbox } from './support/hintbox-process.js';

interface AuditRow {
  tool: string;
  decision: string;
  decidedBy: string;
  arguments: unknown;
}

/**
 * The person's standing answers ("allow always", `hintbox approve --always`) and what a client
 * is told when it sees no tools, through the whole stack: `hintbox approve`, `hintbox run`
 * driven by a real SDK client, the lying test server in real Docker, `hintbox audit`.
 */
integrationSuite(
  'standing answers and the client told why',
  { timeout: 300_000, images: [ensureTestImages] },
  (suite) => {
    const workspace = suite.workspace;
    const untrustedLiar = (env: Record<string, string> = {}, name?: string) =>
      untrustedLiarProfile(workspace, { prefix: 'liar-standing', ...(name ? { name } : {}), extra: { env } });
    const text = (result: unknown) => JSON.stringify((result as { content?: unknown }).content);

    // proves: CLIENT-TOLD-WHY
    it('tells a client that sees no tools why, in the initialize instructions, naming hintbox approve', async () => {
      const { file } = untrustedLiar();
      await using hintbox = await runHintbox(file, { confirmations: 'unsupported' });
      assert.deepEqual((await hintbox.client.listTools()).tools, []);
      const instructions = hintbox.client.getInstructions() ?? '';
      assert.match(
        instructions,
        /^hintbox: 11 of 11 tool\(s\) of liar-standing-\S+ are hidden until a person approves/,
      );
      assert.ok(instructions.includes(`hintbox approve ${file} --all`), instructions);
      const blocked = await hintbox.client.callTool({ name: 'identity', arguments: {} });
      assert.equal(blocked.isError, true);
      assert.match(text(blocked), /has not been approved[\s\S]*hintbox approve/);
    });

    // proves: STANDING-ANSWERS
    it('runs calls on a standing answer given with approve --always, only inside its pattern; never creates one from a form; revoked at once; voided by a definition change', async () => {
      const { name, file } = untrustedLiar();
      const lock = lockFilePath(file);
      mkdirSync(path.join(workspace, 'notes'), { recursive: true });
      chmodSync(path.join(workspace, 'notes'), 0o777); // the sandbox user writes in it
      assert.equal((await hintboxCommand(['approve', file, '--all', '--yes'])).code, 0);

      // A client that accepts every form, with extra fields asking for "always": the call runs
      // (it was approved), and nothing standing is created: the lock file is byte-identical.
      const approved = readFileSync(lock, 'utf8');
      {
        await using hintbox = await runHintbox(file, {
          onElicit: () => ({ action: 'accept', content: { approve: true, always: true, allowAlways: true } }),
        });
        const ran = await hintbox.client.callTool({ name: 'identity', arguments: {} });
        assert.equal(outcomeOf(ran).ok, true);
        const again = await hintbox.client.callTool({ name: 'identity', arguments: {} });
        assert.equal(outcomeOf(again).ok, true);
        assert.equal(hintbox.asked.length, 2, 'asked for each call: no form answer stands');
        assert.match(
          String(hintbox.asked[0]?.message),
          /Only you can allow this tool always, in a terminal: hintbox approve/,
        );
      }
      assert.equal(readFileSync(lock, 'utf8'), approved, 'a form answer never writes a standing answer');

      const given = await hintboxCommand([
        'approve',
        file,
        '--always',
        'unannotated_write',
        '--under',
        'path=/data/notes',
      ]);
      assert.equal(given.code, 0, given.stderr);
      assert.match(
        given.stdout,
        /unannotated_write: standing answer given: calls where path under \/data\/notes \(given by /,
      );
      for (const tool of ['identity', 'write_mounted']) {
        const always = await hintboxCommand(['approve', file, '--always', tool]);
        assert.equal(always.code, 0, always.stderr);
      }
      {
        // A client that can be asked nothing: only the standing answers let calls run.
        await using hintbox = await runHintbox(file, { confirmations: 'unsupported' });
        const inside = await hintbox.client.callTool({
          name: 'unannotated_write',
          arguments: { path: '/data/notes/inside.txt', content: 'ok' },
        });
        assert.equal(outcomeOf(inside).ok, true, text(inside));
        assert.equal(readFileSync(path.join(workspace, 'notes', 'inside.txt'), 'utf8'), 'ok');
        for (const outside of ['/data/outside.txt', '/data/notes/../outside.txt']) {
          const refused = await hintbox.client.callTool({
            name: 'unannotated_write',
            arguments: { path: outside, content: 'no' },
          });
          assert.equal(refused.isError, true, outside);
          assert.match(text(refused), /needs a person's confirmation/);
        }
        assert.equal(existsSync(path.join(workspace, 'outside.txt')), false, 'the calls outside the pattern never ran');
        assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'identity', arguments: {} })).ok, true);
        // Revoked while the run goes on: the very next call is asked again (here: denied).
        assert.equal((await hintboxCommand(['approve', file, '--revoke', 'identity'])).code, 0);
        const revoked = await hintbox.client.callTool({ name: 'identity', arguments: {} });
        assert.equal(revoked.isError, true);
      }
      const rows = await auditOf<AuditRow>(name);
      assert.deepEqual(
        rows.slice(0, 5).map((r) => [r.tool, r.decision, r.decidedBy]),
        [
          ['identity', 'denied', 'no-elicitation'],
          ['identity', 'allowed', 'standing'],
          ['unannotated_write', 'denied', 'no-elicitation'],
          ['unannotated_write', 'denied', 'no-elicitation'],
          ['unannotated_write', 'allowed', 'standing'],
        ],
      );

      // The server changes write_mounted's definition: the call is blocked (not run on the old
      // answer), and approving the new definition voids the answer given for the old one.
      const changed = untrustedLiar({ LIAR_VARIANT: 'changed-description' }, name);
      writeFileSync(file, readFileSync(changed.file, 'utf8'));
      {
        await using hintbox = await runHintbox(file, { confirmations: 'unsupported' });
        const blocked = await hintbox.client.callTool({
          name: 'write_mounted',
          arguments: { path: '/data/notes/changed.txt', content: 'x' },
        });
        assert.equal(blocked.isError, true);
        assert.match(text(blocked), /definition changed/);
      }
      const reapproved = await hintboxCommand(['approve', file, '--all', '--yes']);
      assert.equal(reapproved.code, 0, reapproved.stderr);
      assert.match(
        reapproved.stdout,
        /write_mounted: its standing answer was given for the definition before: voided \(removed\)/,
      );
      const standing = (JSON.parse(readFileSync(lock, 'utf8')) as { standing: Record<string, unknown> }).standing;
      assert.deepEqual(Object.keys(standing), ['unannotated_write'], 'only the changed tool lost its answer');
      {
        await using hintbox = await runHintbox(file, { confirmations: 'unsupported' });
        const asked = await hintbox.client.callTool({
          name: 'write_mounted',
          arguments: { path: '/data/notes/changed.txt', content: 'x' },
        });
        assert.equal(asked.isError, true);
        assert.match(text(asked), /needs a person's confirmation/);
      }
      assert.equal(existsSync(path.join(workspace, 'notes', 'changed.txt')), false, 'no call of the changed tool ran');
    });

    // The SDK's Server checks an accepted form's content against the form's schema (ajv, which
    // the bundle evaluates only when the first schema is validated: scripts/bundle.mjs): an
    // answer of the wrong type is refused there, before hintbox's own "approve ticked" check.
    it('refuses a form answer whose content does not match the form schema (the SDK validates it, in the bundle too)', async () => {
      const { file } = untrustedLiar();
      assert.equal((await hintboxCommand(['approve', file, '--all', '--yes'])).code, 0);
      await using hintbox = await runHintbox(file, {
        onElicit: () => ({ action: 'accept', content: { approve: 'yes' } }),
      });
      const refused = await hintbox.client.callTool({ name: 'identity', arguments: {} });
      assert.equal(refused.isError, true);
      assert.equal(hintbox.asked.length, 1);
      assert.doesNotMatch(text(refused), /submitted without/, 'refused by the schema, not read by hintbox as unticked');
      assert.match(hintbox.stderr(), /Elicitation response content does not match requested schema/);
    });
  },
);
