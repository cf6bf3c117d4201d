import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { writeIntent } from '../support/audit-intent.js';
import { AuditLogWriter } from '../../src/audit/audit-log-writer.js';
import { scanAuditLog, verifyAuditLog, type AuditCallRecord } from '../../src/audit/audit-reader.js';
import type { AuditIntent } from '../../src/audit/audit-record.js';
import type { Logger } from '../../src/util/logger.js';
import { fillFileSystem } from '../support/fill-disk.js';

/**
 * A call's outcome that cannot be appended (a full disk: a real tmpfs of 64 KiB) is kept and
 * written once the disk has room again; if it never has, the outcome is logged whole when the
 * log closes. Needs root (to mount the tmpfs).
 */
integrationSuite('an outcome that meets a full disk', { skip: process.getuid?.() !== 0 && 'needs root' }, (suite) => {
  let mount: string;
  before(() => {
    mount = scratchFolder('hintbox-full-disk-');
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,mode=0700', 'tmpfs', mount]);
    suite.defer(() => execFileSync('umount', [mount]));
  });

  const intent = (i: number): AuditIntent => writeIntent(i, { decidedBy: 'person', pinHash: null });
  const calls = async (dir: string): Promise<AuditCallRecord[]> => {
    const found: AuditCallRecord[] = [];
    await scanAuditLog(dir, {}, (e) => void (e.kind === 'call' && found.push(e)));
    return found;
  };
  const capture = (): Logger & { lines: string[] } => {
    const lines: string[] = [];
    const log: Logger & { lines: string[] } = {
      lines,
      debug: () => {},
      info: (m) => void lines.push(`info ${m}`),
      warn: (m) => void lines.push(`warn ${m}`),
      error: (m) => void lines.push(`error ${m}`),
      child: () => log,
    };
    return log;
  };
  // Past the slack of the file's last page: the write cannot fit.
  const bigDetail = 'e'.repeat(8000);

  // proves: AUDIT
  it('is kept and written once the disk has room again, into a new file linked past the torn line', async () => {
    const dir = path.join(mount, 'retry');
    mkdirSync(dir);
    const log = capture();
    const writer = AuditLogWriter.open({ dir, log });
    try {
      const id = await writer.recordIntent(intent(1));
      const filler = fillFileSystem(mount);
      await assert.rejects(
        writer.recordOutcome(id, { outcome: 'tool-error', detail: bigDetail }),
        /ENOSPC|short write/,
      );
      rmSync(filler);
      // No other record comes: the writer retries on its own.
      const deadline = Date.now() + 10_000;
      while ((await calls(dir))[0]?.outcome !== 'tool-error' && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
      }
      const [call] = await calls(dir);
      assert.equal(call?.outcome, 'tool-error', 'the outcome is in the log');
      assert.equal(call?.detail, bigDetail);
      assert.match(log.lines.join('\n'), /outcome of call .* written late/);
      writer.close();
      const [chain] = await verifyAuditLog(dir);
      assert.deepEqual(chain?.breaks, [], 'the chain holds: the new file links to the last whole line');
      assert.match(
        chain?.torn[0]?.message ?? '',
        /cut short.*a write that failed/,
        'the part the full disk took is torn',
      );
      assert.equal(chain?.closed, true);
      assert.ok(readdirSync(dir).length >= 2, 'the outcome went into a new file');
    } finally {
      writer.close();
    }
  });

  it('is logged whole when the log closes on a disk that is still full', async () => {
    const dir = path.join(mount, 'lost');
    mkdirSync(dir);
    const log = capture();
    const writer = AuditLogWriter.open({ dir, log });
    const id = await writer.recordIntent(intent(2));
    const filler = fillFileSystem(mount);
    try {
      await assert.rejects(writer.recordOutcome(id, { outcome: 'ok', detail: bigDetail }));
      writer.close();
    } finally {
      rmSync(filler);
    }
    const lost = log.lines.find((l) => l.startsWith('error ') && l.includes(id) && l.includes('"outcome":"ok"'));
    assert.ok(lost, `the outcome is in the log output:\n${log.lines.join('\n').slice(0, 2000)}`);
    assert.equal((await calls(dir))[0]?.outcome, null, 'and not in the file');
    const [chain] = await verifyAuditLog(dir);
    assert.deepEqual(chain?.breaks, [], 'what the full disk cut short is torn, not a break');
    assert.ok(chain?.torn.length, 'the outcome cut short is reported as torn');
  });
});
