import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { lockFilePath } from '../../src/approvals/lock-file.js';
import { LABEL_CLASS } from '../../src/engine/sandbox-labels.js';
import { containersOf, docker, ensureTestImages, eventually, LIAR_IMAGE } from './support/docker.js';
import {
  hintboxCommand,
  outcomeOf,
  runHintbox,
  writeProfile,
  type Confirmations,
  auditOf,
} from './support/hintbox-process.js';

interface AuditRow {
  server: string;
  tool: string;
  decision: string;
  decidedBy: string;
  outcome: string | null;
  arguments: unknown;
  pin: string | null;
  attempts: number | null;
}

/**
 * Approval, pins and the audit trail through the whole stack: `hintbox approve`, `hintbox run`
 * driven by a real SDK client that answers (or does not answer) confirmations, `hintbox audit`.
 */
integrationSuite(
  'approval, pins and audit under hintbox run',
  { timeout: 300_000, images: [ensureTestImages] },
  (suite) => {
    const workspace = suite.workspace;

    let n = 0;
    const untrustedLiar = (extra: Record<string, unknown> = {}) => {
      const name = `liar-approval-${process.pid}-${n++}`;
      return {
        name,
        file: writeProfile({
          name,
          server: { image: LIAR_IMAGE },
          trust: 'untrusted',
          mounts: [{ source: workspace, target: '/data' }],
          approval: { timeout: 1 },
          ...extra,
        }),
      };
    };

    // proves: APPROVAL-UNTRUSTED
    it("hides and blocks an untrusted server's tools until they are approved", async () => {
      const { name, file } = untrustedLiar();
      {
        await using hintbox = await runHintbox(file);
        assert.deepEqual((await hintbox.client.listTools()).tools, [], 'nothing is served before approval');
        const blocked = await hintbox.client.callTool({ name: 'identity', arguments: {} });
        assert.equal(blocked.isError, true);
        assert.match(JSON.stringify(blocked.content), /has not been approved[\s\S]*hintbox approve/);
        assert.equal(hintbox.asked.length, 0, 'a blocked call asks nobody');
      }
      const approve = await hintboxCommand(['approve', file, '--all', '--yes']);
      assert.equal(approve.code, 0, approve.stderr);
      assert.match(approve.stdout, /identity: never approved/);
      await using hintbox = await runHintbox(file);
      assert.equal((await hintbox.client.listTools()).tools.length, 11);
      assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'identity', arguments: {} })).ok, true);
      assert.equal(hintbox.asked.length, 1, "an untrusted server's read-only call is still confirmed");
      const audit = await auditOf<AuditRow>(name);
      assert.deepEqual(
        audit.map((r) => [r.tool, r.decision, r.decidedBy, r.outcome]),
        [
          ['identity', 'allowed', 'person', 'ok'],
          ['identity', 'blocked', 'pin', 'not-run'],
        ],
      );
    });

    it('serves a tool approved while the run is live, from its next call on, and tells the client', async () => {
      const { name, file } = untrustedLiar();
      await using hintbox = await runHintbox(file);
      let listChanged = 0;
      hintbox.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        listChanged++;
      });
      const blocked = await hintbox.client.callTool({ name: 'identity', arguments: {} });
      assert.match(JSON.stringify(blocked.content), /has not been approved/);

      const approve = await hintboxCommand(['approve', file, 'identity', '--yes']);
      assert.equal(approve.code, 0, approve.stderr);
      assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'identity', arguments: {} })).ok, true);
      assert.equal(hintbox.asked.length, 1, 'still an untrusted server: the call was confirmed');
      await eventually(async () => listChanged > 0, 5000, 'tools/list_changed');
      assert.deepEqual(
        (await hintbox.client.listTools()).tools.map((t) => t.name),
        ['identity'],
        'the approved tool is listed; the others stay hidden',
      );
      const audit = await auditOf<AuditRow>(name);
      assert.deepEqual(
        audit.map((r) => [r.tool, r.decision, r.decidedBy, r.outcome]),
        [
          ['identity', 'allowed', 'person', 'ok'],
          ['identity', 'blocked', 'pin', 'not-run'],
        ],
      );
    });

    it('keeps every approval of concurrent hintbox approve runs (none overwrites another)', async () => {
      const { file } = untrustedLiar();
      const tools = ['identity', 'resolve', 'hang', 'crash'];
      // Four processes at once, each reading, listing (a discovery sandbox) and writing the lock.
      const runs = await Promise.all(tools.map((tool) => hintboxCommand(['approve', file, tool, '--yes'])));
      for (const run of runs) assert.equal(run.code, 0, run.stderr);
      const lock = JSON.parse(readFileSync(lockFilePath(file), 'utf8')) as { tools: Record<string, unknown> };
      assert.deepEqual(Object.keys(lock.tools).sort(), [...tools].sort());
      assert.equal(existsSync(`${lockFilePath(file)}.lock`), false, 'the lock of the lock file is gone');
    });

    const outcomes: [Confirmations, RegExp, string][] = [
      ['deny', /declined/, 'person'],
      ['never', /nobody answered the confirmation within 1 s/, 'timeout'],
      [
        'unsupported',
        /cannot be asked \(no MCP elicitation\)[\s\S]*untrusted server always need a person/,
        'no-elicitation',
      ],
    ];
    for (const [confirmations, message, decidedBy] of outcomes) {
      it(`does not run a call whose confirmation is ${confirmations === 'unsupported' ? 'impossible' : confirmations === 'never' ? 'never answered' : 'denied'}, and records why`, async () => {
        const { name, file } = untrustedLiar();
        assert.equal((await hintboxCommand(['approve', file, 'unannotated_write', '--yes'])).code, 0);
        const target = path.join(workspace, `${name}.txt`);
        await using hintbox = await runHintbox(file, { confirmations });
        const result = await hintbox.client.callTool({
          name: 'unannotated_write',
          arguments: { path: `/data/${name}.txt`, content: 'should not be written' },
        });
        assert.equal(result.isError, true);
        assert.match(JSON.stringify(result.content), message);
        assert.equal(existsSync(target), false, 'the file was not written');
        if (confirmations !== 'unsupported') {
          const asked = hintbox.asked[0]?.message ?? '';
          assert.match(asked, /WARNING: This operation may be irreversible[\s\S]*"content": "should not be written"/);
          assert.match(asked, /^hintbox asks: /, "hintbox's own question, from its first words");
          assert.doesNotMatch(asked, /Data may leave/, 'its sandbox has no network (the profile has none)');
        }
        await hintbox[Symbol.asyncDispose]();
        const [record] = await auditOf<AuditRow>(name);
        assert.deepEqual([record?.decision, record?.decidedBy, record?.outcome], ['denied', decidedBy, 'not-run']);
        assert.deepEqual(record?.arguments, { path: `/data/${name}.txt`, content: 'should not be written' });
      });
    }

    // proves: PINS
    it('blocks a tool whose description changed, names the change, and serves it again once re-approved', async () => {
      const { name, file } = untrustedLiar();
      assert.equal((await hintboxCommand(['approve', file, '--all', '--yes'])).code, 0);
      const lock = lockFilePath(file);
      assert.ok(existsSync(lock), 'approve wrote the lock file beside the profile');
      const changed = untrustedLiar({ env: { LIAR_VARIANT: 'changed-description' } });
      // Same profile file and server name, a server that now lists another definition.
      writeFileSync(file, readFileSync(changed.file, 'utf8').replace(changed.name, name));
      const approved = readFileSync(lock, 'utf8');
      {
        await using hintbox = await runHintbox(file);
        // A call waits until the server is verified against the lock file (cold start): then
        // the changed tool is refused, and hidden from the list.
        const refused = await hintbox.client.callTool({
          name: 'write_mounted',
          arguments: { path: '/data/x', content: 'x' },
        });
        assert.equal(refused.isError, true);
        assert.match(JSON.stringify(refused.content), /definition changed[\s\S]*- description/);
        assert.doesNotMatch(JSON.stringify(refused.content), /uploads your files/, 'never the new, unapproved text');
        const names = (await hintbox.client.listTools()).tools.map((t) => t.name);
        assert.equal(names.includes('write_mounted'), false, 'the changed tool is hidden');
        assert.equal(names.includes('identity'), true, 'unchanged tools are still served');
      }
      assert.equal(readFileSync(lock, 'utf8'), approved, 'a run never writes the lock file');
      const reapprove = await hintboxCommand(['approve', file, 'write_mounted', '--yes']);
      assert.equal(reapprove.code, 0, reapprove.stderr);
      assert.match(reapprove.stdout, /write_mounted: changed since it was approved/);
      assert.match(reapprove.stdout, /description: .*uploads your files/);
      assert.match(readFileSync(lock, 'utf8'), /Now also uploads your files/, 'the lock holds the new definition');
      await using hintbox = await runHintbox(file);
      assert.ok(
        (await hintbox.client.listTools()).tools.some((t) => t.name === 'write_mounted'),
        'served again',
      );
    });

    // proves: PINS
    it('serves a tool whose hints only narrowed without a person, in the stricter sandbox, and audits it (the lock file is not written)', async () => {
      const { name, file } = untrustedLiar();
      assert.equal((await hintboxCommand(['approve', file, '--all', '--yes'])).code, 0);
      const before = JSON.parse((await hintboxCommand(['plan', file, '--json'])).stdout) as {
        tools: { name: string; sandbox: string }[];
      };
      assert.equal(before.tools.find((t) => t.name === 'unannotated_write')?.sandbox, 'rw-offline');
      const approved = readFileSync(lockFilePath(file), 'utf8');
      const changed = untrustedLiar({ env: { LIAR_VARIANT: 'changed-hints' } });
      writeFileSync(file, readFileSync(changed.file, 'utf8').replace(changed.name, name));
      {
        await using hintbox = await runHintbox(file);
        assert.ok(
          (await hintbox.client.listTools()).tools.some((t) => t.name === 'unannotated_write'),
          'still served',
        );
        const result = outcomeOf(
          await hintbox.client.callTool({
            name: 'unannotated_write',
            arguments: { path: `/data/${name}-hints.txt`, content: 'x' },
          }),
        );
        assert.equal(result.ok, false, 'now read-only, it runs where it cannot write');
        assert.equal(result.error, 'EROFS');
      }
      assert.equal(existsSync(path.join(workspace, `${name}-hints.txt`)), false);
      assert.equal(readFileSync(lockFilePath(file), 'utf8'), approved, 'a run never writes the lock file');
      const events = await hintboxCommand(['audit', '--server', name, '--events', '--json']);
      const narrowed = events.stdout
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { type?: string; fields?: { tool?: string; changes?: string[] } })
        .filter((e) => e.type === 'pin.narrowed');
      assert.equal(narrowed[0]?.fields?.tool, 'unannotated_write');
      assert.deepEqual(narrowed[0]?.fields?.changes, [
        'annotations.readOnlyHint: false → true',
        'annotations.openWorldHint: true → false',
      ]);
    });

    it('lists again when the server says its tools changed: a changed tool is hidden and blocked, one whose hints only narrowed is served and re-planned', async () => {
      const { name, file } = untrustedLiar({ trust: 'trusted' }); // no lock file: trusted on first use for the run
      await using hintbox = await runHintbox(file);
      const changes: number[] = [];
      hintbox.client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changes.push(Date.now()));
      const listed = async () => (await hintbox.client.listTools()).tools.map((t) => t.name);
      assert.ok((await listed()).includes('write_mounted'), 'served at first');

      assert.equal(
        outcomeOf(await hintbox.client.callTool({ name: 'mutate', arguments: { change: 'changed-description' } })).ok,
        true,
      );
      await eventually(async () => changes.length > 0, 10_000, "hintbox's own tools/list_changed");
      assert.equal((await listed()).includes('write_mounted'), false, 'the changed tool is hidden');
      const refused = await hintbox.client.callTool({
        name: 'write_mounted',
        arguments: { path: '/data/x', content: 'x' },
      });
      assert.match(JSON.stringify(refused.content), /definition changed[\s\S]*- description/);
      assert.doesNotMatch(JSON.stringify(refused.content), /uploads your files/, 'never the new, unapproved text');

      // The other change: unannotated_write now claims readOnlyHint (and a closed world): hints
      // that only narrow need no person. It stays served, planned again into the read-only sandbox.
      assert.equal(
        outcomeOf(await hintbox.client.callTool({ name: 'mutate', arguments: { change: 'changed-hints' } })).ok,
        true,
      );
      await eventually(
        async () =>
          (await hintbox.client.listTools()).tools.find((t) => t.name === 'unannotated_write')?.annotations
            ?.readOnlyHint === true,
        10_000,
        'unannotated_write listed with its new hints',
      );
      const result = outcomeOf(
        await hintbox.client.callTool({
          name: 'unannotated_write',
          arguments: { path: `/data/${name}-relisted.txt`, content: 'x' },
        }),
      );
      assert.deepEqual([result.ok, result.error], [false, 'EROFS'], 're-planned into the read-only sandbox');
      assert.equal(existsSync(path.join(workspace, `${name}-relisted.txt`)), false);
    });

    // proves: PINS
    it('hides every tool when the lock file cannot be read at a re-listing (fail closed), audits it, and serves an approved tool again once it reads', async () => {
      const { name, file } = untrustedLiar();
      assert.equal((await hintboxCommand(['approve', file, '--all', '--yes'])).code, 0);
      const approved = readFileSync(lockFilePath(file), 'utf8');
      await using hintbox = await runHintbox(file);
      const changes: number[] = [];
      hintbox.client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changes.push(Date.now()));
      assert.equal((await hintbox.client.listTools()).tools.length, 11);
      // A call waits until the server is verified against the (still good) lock file.
      assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'identity', arguments: {} })).ok, true);

      writeFileSync(lockFilePath(file), approved.slice(0, 100)); // a merge gone wrong, an editor mid-save
      // The server changes one tool's hints and announces it: hintbox lists again and reads the lock.
      assert.equal(
        outcomeOf(await hintbox.client.callTool({ name: 'mutate', arguments: { change: 'changed-hints' } })).ok,
        true,
      );
      await eventually(async () => changes.length > 0, 10_000, "hintbox's own tools/list_changed");
      assert.deepEqual((await hintbox.client.listTools()).tools, [], 'nothing is served on approvals it cannot read');
      const refused = await hintbox.client.callTool({ name: 'identity', arguments: {} });
      assert.equal(refused.isError, true);
      assert.match(JSON.stringify(refused.content), /lock file .*cannot be read[\s\S]*not JSON/);
      assert.match(hintbox.stderr(), /cannot read the lock file/);
      const { stdout } = await hintboxCommand(['audit', '--server', name, '--events', '--json']);
      assert.match(stdout, /"type":"approvals\.unreadable"/);

      writeFileSync(lockFilePath(file), approved);
      assert.equal(outcomeOf(await hintbox.client.callTool({ name: 'identity', arguments: {} })).ok, true);
    });

    // proves: LIES-RECORDED
    it('records a read-only tool caught writing (EROFS) as a hint violation, and distrusts the server from then on', async () => {
      const { name, file } = untrustedLiar({ trust: 'trusted' });
      {
        await using hintbox = await runHintbox(file);
        const first = outcomeOf(await hintbox.client.callTool({ name: 'identity', arguments: {} }));
        assert.equal(first.ok, true);
        assert.equal(hintbox.asked.length, 0, 'a trusted read-only tool runs without asking');
        const lie = outcomeOf(
          await hintbox.client.callTool({ name: 'write_mounted', arguments: { path: '/data/lie.txt', content: 'x' } }),
        );
        assert.deepEqual([lie.ok, lie.error], [false, 'EROFS']);
        await hintbox.client.callTool({ name: 'identity', arguments: {} });
        assert.equal(hintbox.asked.length, 1, 'after the lie, even its read-only tools need a confirmation');
        assert.match(hintbox.stderr(), /hint violation: server liar-approval-\d+-\d+, tool write_mounted/);
      }
      const records = await auditOf<AuditRow>(name);
      const lie = records.find((r) => r.tool === 'write_mounted');
      assert.match(String((lie as { hintViolation?: string } | undefined)?.hintViolation), /readOnlyHint/);
      assert.equal(existsSync(path.join(workspace, 'lie.txt')), false);
    });

    // proves: AUDIT
    it('records a call whose sandbox is killed in the middle as sandbox-died', async () => {
      const { name, file } = untrustedLiar();
      assert.equal((await hintboxCommand(['approve', file, '--all', '--yes'])).code, 0);
      {
        await using hintbox = await runHintbox(file);
        const pending = hintbox.client.callTool({ name: 'hang', arguments: { why: 'to be killed' } });
        const { docker: d } = await docker();
        for (let i = 0; i < 50 && hintbox.asked.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
        await new Promise((r) => setTimeout(r, 300));
        // `hang` claims to be read-only: it runs in the read-only sandbox.
        const container = (await containersOf(hintbox.pid, false)).find((c) => c.Labels[LABEL_CLASS] === 'ro-offline');
        assert.ok(container, 'the read-only sandbox runs');
        await d.getContainer(container.Id).kill();
        assert.equal((await pending).isError, true);
      }
      const [record] = await auditOf<AuditRow>(name);
      assert.deepEqual([record?.tool, record?.decision, record?.outcome], ['hang', 'allowed', 'sandbox-died']);
      assert.match(String(record?.pin), /^[0-9a-f]{64}$/);
    });
  },
);
