import assert from 'node:assert/strict';
import { appendFileSync, cpSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { ensureTestImages, LIAR_IMAGE } from './support/docker.js';
import { hintboxCommand, runHintbox, sandboxFolder, STATE_DIR, writeProfile } from './support/hintbox-process.js';

/**
 * The audit promise under the worst ending: hintbox killed with SIGKILL during a burst of
 * calls. Every call the server received (each writes a file of its own) must have its intent
 * in the log, the log's chains must verify, and a log with one line edited must not.
 */
integrationSuite(
  'the audit log when hintbox is killed (SIGKILL) during a burst of calls',
  { timeout: 300_000, images: [ensureTestImages] },
  () => {
    const name = `liar-crash-${process.pid}`;
    let workspace: string;
    let audited: Set<string>;
    let killedPid = 0;

    // proves: AUDIT
    it('every call the server received has its intent in the log', async () => {
      workspace = sandboxFolder();
      const file = writeProfile({
        name,
        server: { image: LIAR_IMAGE },
        trust: 'trusted',
        mounts: [{ source: workspace, target: '/data' }],
        // Calls that change something, allowed without a person: the burst runs unattended.
        tools: { unannotated_write: { approval: 'allow' } },
      });
      const hintbox = await runHintbox(file);
      const inFlight = 8;
      let next = 0;
      let answered = 0;
      const worker = async (): Promise<void> => {
        for (;;) {
          const i = next++;
          await hintbox.client.callTool({
            name: 'unannotated_write',
            arguments: { path: `/data/call-${i}.txt`, content: String(i) },
          });
          answered++;
        }
      };
      const workers = Array.from({ length: inFlight }, () => worker().catch(() => undefined));
      while (answered < 60) await new Promise((r) => setTimeout(r, 5));
      killedPid = hintbox.pid;
      process.kill(hintbox.pid, 'SIGKILL'); // calls in flight, intents and outcomes being appended
      await hintbox.exited;
      await Promise.all(workers);
      await hintbox.client.close().catch(() => undefined);
      // Its sandboxes outlive it (their owner is gone): the next hintbox start removes them.
      assert.equal((await hintboxCommand(['sweep'])).code, 0);

      const received = readdirSync(workspace).filter((f) => /^call-\d+\.txt$/.test(f));
      assert.ok(received.length >= 60, `the server received the burst (${received.length} files)`);
      const { code, stdout, stderr } = await hintboxCommand(['audit', '--server', name, '--all', '--json']);
      assert.equal(code, 0, stderr);
      const records = stdout
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { tool: string; arguments: { path?: string }; outcome: string | null });
      audited = new Set(records.map((r) => r.arguments.path ?? ''));
      const unrecorded = received.filter((f) => !audited.has(`/data/${f}`));
      assert.deepEqual(unrecorded, [], 'every call the server received was recorded before it was forwarded');
      assert.ok(
        records.every((r) => r.tool === 'unannotated_write'),
        'and nothing else of this server was recorded',
      );
    });

    // proves: AUDIT-CHAIN
    it('audit verify passes on the log of the killed run', async () => {
      const { code, stdout } = await hintboxCommand(['audit', 'verify']);
      assert.equal(code, 0, stdout);
      assert.match(stdout, /every chain holds/);
      assert.match(stdout, /not closed \(its process runs, or was killed\)/, 'the killed run left its chain open');
    });

    // proves: AUDIT-CHECKPOINTS, AUDIT-KEY
    it("an auditor with only the public key verifies a copy of the folder; the killed run's records after its last checkpoint are reported not yet covered", async () => {
      const key = await hintboxCommand(['audit', 'key', '--public']);
      assert.equal(key.code, 0, key.stderr);
      const auditor = scratchFolder('hintbox-auditor-');
      writeFileSync(path.join(auditor, 'hintbox.pub'), key.stdout);
      const copy = path.join(auditor, 'audit');
      cpSync(path.join(STATE_DIR, 'audit'), copy, { recursive: true });
      // The auditor's machine has no private key: a state folder of its own, empty.
      const env = { HINTBOX_AUDIT_DIR: copy, HINTBOX_STATE_DIR: path.join(auditor, 'state') };
      const withoutKey = await hintboxCommand(['audit', 'verify'], env);
      assert.equal(withoutKey.code, 1, 'no key, no proof');
      assert.match(withoutKey.stderr, /audit key .*: no such file/);
      const { code, stdout } = await hintboxCommand(
        ['audit', 'verify', '--public-key', path.join(auditor, 'hintbox.pub')],
        env,
      );
      assert.equal(code, 0, stdout);
      assert.match(stdout, /every chain holds and matches its checkpoints signed by sha256:/);
      assert.match(
        stdout,
        new RegExp(
          `-${killedPid}-[0-9a-f]{8}\\.\\d{6}\\.jsonl:\\d+: \\d+ record\\(s\\) from here on .*NOT YET COVERED`,
        ),
      );
    });

    it('audit verify prints a torn last line of the killed run apart, not as a break, and exits 0', async () => {
      const copy = path.join(scratchFolder('hintbox-audit-torn-'), 'audit');
      cpSync(path.join(STATE_DIR, 'audit'), copy, { recursive: true });
      const newest = readdirSync(copy)
        .filter((f) => f.includes(`-${killedPid}-`))
        .sort()
        .at(-1);
      assert.ok(newest, 'the killed run has a chain');
      const text = readFileSync(path.join(copy, newest), 'utf8');
      // What SIGKILL in the middle of a write leaves (if this run's kill did not already).
      if (text.endsWith('\n')) appendFileSync(path.join(copy, newest), text.split('\n')[1]!.slice(0, 50));
      const { code, stdout } = await hintboxCommand(['audit', 'verify'], { HINTBOX_AUDIT_DIR: copy });
      assert.equal(code, 0, stdout);
      assert.match(
        stdout,
        new RegExp(`${newest.replace(/\./g, '\\.')}:\\d+: torn, not a break: the last line is cut short`),
      );
      assert.match(
        stdout,
        /every chain holds and matches its checkpoints signed by \S+ \(\d+ torn by a crash or a failed write, see above\)/,
      );
    });

    // proves: AUDIT-CHAIN
    it('audit verify fails, naming the line, when one line of that log is edited', async () => {
      const copy = path.join(scratchFolder('hintbox-audit-copy-'), 'audit');
      cpSync(path.join(STATE_DIR, 'audit'), copy, { recursive: true });
      // The chain of the killed run: its intent of call-3, with other arguments.
      const target = readdirSync(copy)
        .map((f) => path.join(copy, f))
        .find((f) => readFileSync(f, 'utf8').includes('"/data/call-3.txt"'));
      assert.ok(target, 'the intent of call-3 is in the log');
      const lines = readFileSync(target, 'utf8').split('\n');
      const at = lines.findIndex((l) => l.includes('"call.intent"') && l.includes('"/data/call-3.txt"'));
      lines[at] = lines[at]!.replace('"/data/call-3.txt"', '"/data/innocent.txt"');
      writeFileSync(target, lines.join('\n'));
      const { code, stdout } = await hintboxCommand(['audit', 'verify'], { HINTBOX_AUDIT_DIR: copy });
      assert.equal(code, 1, stdout);
      assert.match(stdout, new RegExp(`${path.basename(target).replace(/\./g, '\\.')}:${at + 2}: prev does not match`));
      assert.match(stdout, /BROKEN/);
    });
  },
);
