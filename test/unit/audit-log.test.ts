import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  appendFileSync,
  closeSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ChainVerifier, frameLine, lineHash, parseAuditFileName } from '../../src/audit/audit-chain.js';
import { AuditLogWriter } from '../../src/audit/audit-log-writer.js';
import {
  newestAuditEntries,
  scanAuditLog,
  verifyAuditLog,
  type AuditCallRecord,
} from '../../src/audit/audit-reader.js';
import type { AuditIntent, Clock } from '../../src/audit/audit-record.js';
import { CallGuard, type ClientChannel } from '../../src/gateway/call-guard.js';
import { auditFilter } from '../../src/cli/audit-command.js';
import { traceIdOf } from '../../src/gateway/gateway.js';
import { effectiveHints } from '../../src/policy/hints.js';
import { silentLogger } from '../../src/util/logger.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { guardedTool } from './support/guarded-tool.js';

function newDir(): string {
  return path.join(scratchFolder('hintbox-audit-test-'), 'audit');
}

/** A clock that moves 1 ms per reading, from a fixed start. */
function steppingClock(start = Date.parse('2026-03-01T12:00:00.000Z')): Clock {
  let t = start;
  return { now: () => new Date(t++) };
}

function counterIds(prefix = 'r'): () => string {
  let n = 0;
  return () => `${prefix}${++n}`;
}

function intent(partial: Partial<AuditIntent> = {}): AuditIntent {
  return {
    session: 's1',
    server: 'fs',
    tool: 'read_file',
    tags: [
      { name: ' Files ', source: 'profile' },
      { name: 'reader', source: 'server' },
    ],
    claimedHints: { readOnlyHint: true },
    effectiveHints: effectiveHints({ readOnlyHint: true }),
    sandbox: 'ro-offline',
    decision: 'allowed',
    decidedBy: 'auto',
    arguments: { path: '/w/a' },
    pinHash: 'a'.repeat(64),
    ...partial,
  };
}

function open(dir: string, maxFileBytes?: number): AuditLogWriter {
  return AuditLogWriter.open({
    dir,
    log: silentLogger,
    clock: steppingClock(),
    ids: counterIds(),
    ...(maxFileBytes ? { maxFileBytes } : {}),
  });
}

/** Writes `calls` calls (intent and outcome) and closes the log; returns its files, in order. */
function writeCalls(dir: string, calls: number, maxFileBytes?: number): string[] {
  const writer = open(dir, maxFileBytes);
  for (let i = 0; i < calls; i++) {
    const id = writer.appendIntent(intent({ arguments: { path: `/w/${i}` } }));
    writer.appendOutcome(id, { outcome: 'ok' });
  }
  writer.close();
  return readdirSync(dir)
    .sort()
    .map((f) => path.join(dir, f));
}

const lines = (file: string): string[] => readFileSync(file, 'utf8').trimEnd().split('\n');
const write = (file: string, text: string[]): void => writeFileSync(file, text.join('\n') + '\n');

async function breaks(dir: string): Promise<string[]> {
  return (await verifyAuditLog(dir)).flatMap((c) =>
    c.breaks.map((b) => `${path.basename(b.file)}:${b.line}: ${b.message}`),
  );
}

describe('audit chain (pure)', () => {
  it('links each line to the SHA-256 of the exact text of the line before', () => {
    const first = frameLine(
      { v: 1, id: 'a', time: '2026-03-01T12:00:00.000Z', type: 'log.open', chain: 'c', seq: 0 },
      null,
    );
    const second = frameLine({ v: 1, id: 'b', time: '2026-03-01T12:00:00.001Z', type: 'log.close' }, lineHash(first));
    assert.equal(JSON.parse(second).prev, lineHash(first));
    assert.match(lineHash(first), /^[0-9a-f]{64}$/);
    const verifier = new ChainVerifier('c');
    verifier.startFile('c.000000.jsonl', 0);
    verifier.line(first);
    verifier.line(second);
    const summary = verifier.end();
    assert.deepEqual(summary.breaks, []);
    assert.equal(summary.head, lineHash(second));
    assert.equal(summary.closed, true);
  });

  it('names files <chain>.<seq>.jsonl and ignores other names', () => {
    assert.deepEqual(parseAuditFileName('20260301T120000Z-42-0123abcd.000007.jsonl'), {
      chain: '20260301T120000Z-42-0123abcd',
      seq: 7,
    });
    assert.equal(parseAuditFileName('notes.txt'), undefined);
    assert.equal(parseAuditFileName('20260301T120000Z-42-0123abcd.7.jsonl'), undefined);
  });
});

describe('AuditLogWriter', () => {
  // proves: AUDIT
  it('writes intents and outcomes as chained lines that verify; the folder and files are owner-only', async () => {
    const dir = newDir();
    const [file, ...more] = writeCalls(dir, 3);
    assert.equal(more.length, 0);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.equal(statSync(file!).mode & 0o777, 0o600);
    const records = lines(file!).map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(
      records.map((r) => r.type),
      [
        'log.open',
        'call.intent',
        'call.outcome',
        'call.intent',
        'call.outcome',
        'call.intent',
        'call.outcome',
        'log.close',
      ],
    );
    const firstIntent = records[1]!;
    assert.deepEqual(
      { ...firstIntent, prev: undefined },
      {
        v: 1,
        id: 'r2',
        time: '2026-03-01T12:00:00.002Z',
        type: 'call.intent',
        session: 's1',
        server: 'fs',
        tool: 'read_file',
        tags: ['files'],
        claimedTags: ['reader'],
        claimedHints: { readOnlyHint: true },
        effectiveHints: { readOnlyHint: true, destructiveHint: true, idempotentHint: false, openWorldHint: true },
        sandbox: 'ro-offline',
        decision: 'allowed',
        decidedBy: 'auto',
        arguments: { path: '/w/0' },
        pin: 'a'.repeat(64),
        traceId: null,
        caller: null,
        client: null,
        prev: undefined,
      },
    );
    assert.deepEqual(Object.keys(firstIntent).at(-1), 'prev', 'prev is the last field');
    assert.equal(records[2]!.callId, 'r2');
    assert.equal(records[2]!.durationMs, 1);
    assert.deepEqual(await breaks(dir), []);
  });

  it('rotates by size: the first line of each file links to the last line of the one before', async () => {
    const dir = newDir();
    const files = writeCalls(dir, 40, 2000);
    assert.ok(files.length >= 3, `rotated into ${files.length} files`);
    for (let i = 1; i < files.length; i++) {
      const head = JSON.parse(lines(files[i]!)[0]!) as { type: string; seq: number; prev: string };
      assert.equal(head.type, 'log.open');
      assert.equal(head.seq, i);
      assert.equal(head.prev, lineHash(lines(files[i - 1]!).at(-1)!));
      assert.ok(statSync(files[i]!).size <= 2000);
    }
    const [summary] = await verifyAuditLog(dir);
    assert.equal(summary?.files, files.length);
    assert.equal(
      summary?.lines,
      files.reduce((n, f) => n + lines(f).length, 0),
    );
    assert.deepEqual(summary?.breaks, []);
  });

  it('writes each line as JSON.stringify writes its fields (built as text, hashed as written)', async () => {
    const dir = newDir();
    const writer = open(dir);
    const odd = 'a "quote" \\ \u0000 \ud800 \u2028 é 😀';
    const id = await writer.recordIntent(
      intent({ tool: odd, server: odd, arguments: { [odd]: [odd, 1.5, null, { n: -0 }] }, traceId: odd }),
    );
    await writer.recordOutcome(id, { outcome: 'tool-error', detail: odd, hintViolation: odd, attempts: 2 });
    const other = await writer.recordIntent(intent({ tags: [], arguments: undefined, pinHash: null }));
    await writer.recordOutcome(other, { outcome: 'ok' });
    writer.recordEvent({ type: 'sandbox.stop', session: 's1', server: odd, sandbox: 'ro', container: 'c' });
    writer.close();
    const [file] = readdirSync(dir).map((f) => path.join(dir, f));
    const written = lines(file!);
    assert.equal(written.length, 7);
    for (const line of written) assert.equal(JSON.stringify(JSON.parse(line)), line);
    assert.equal(lineHash(odd), createHash('sha256').update(odd, 'utf8').digest('hex'));
    assert.deepEqual(await breaks(dir), []);
  });

  it('writes the records of one turn of the event loop in one go; when that write fails, none of its intents is admitted', async () => {
    const dir = newDir();
    const writer = open(dir);
    const fileOf = (): string => path.join(dir, readdirSync(dir).sort().at(-1)!);
    const first = [writer.recordIntent(intent()), writer.recordIntent(intent())];
    assert.equal(lines(fileOf()).length, 1, 'nothing of this turn is written yet: only log.open');
    const ids = await Promise.all(first);
    assert.equal(lines(fileOf()).length, 3);
    // A write that fails (ENOSPC): both intents of the turn are refused.
    const fields = writer as unknown as { fd: number };
    const real = fields.fd;
    fields.fd = openSync('/dev/full', 'w');
    const failed = await Promise.allSettled([writer.recordIntent(intent()), writer.recordIntent(intent())]);
    assert.deepEqual(
      failed.map((r) => r.status),
      ['rejected', 'rejected'],
    );
    assert.match(String((failed[0] as PromiseRejectedResult).reason), /ENOSPC/);
    closeSync(real);
    // The next record starts a new file, linked to the last line written whole.
    for (const id of ids) await writer.recordOutcome(id, { outcome: 'ok' });
    writer.close();
    assert.equal(readdirSync(dir).length, 2);
    assert.deepEqual(await breaks(dir), []);
  });

  it('refuses an outcome without an intent in flight, a second outcome, and one that contradicts the decision', () => {
    const writer = open(newDir());
    assert.throws(() => writer.appendOutcome('nope', { outcome: 'ok' }), /no call nope in flight/);
    const id = writer.appendIntent(intent());
    writer.appendOutcome(id, { outcome: 'ok' });
    assert.throws(() => writer.appendOutcome(id, { outcome: 'ok' }), /in flight/);
    const denied = writer.appendIntent(intent({ decision: 'denied', decidedBy: 'person' }));
    assert.throws(() => writer.appendOutcome(denied, { outcome: 'ok' }), /contradicts decision denied/);
    assert.throws(
      () => writer.appendIntent(intent({ decision: 'blocked', decidedBy: 'auto' })),
      /decidedBy of a blocked call/,
    );
    writer.close();
  });

  // proves: AUDIT
  it('fails closed: an intent that cannot be appended throws, and the call guard refuses the call', async () => {
    const dir = newDir();
    const writer = open(dir, 600);
    writer.appendIntent(intent());
    rmSync(dir, { recursive: true }); // the next append must start a new file, in a folder that is gone
    assert.throws(() => writer.appendIntent(intent({ arguments: { big: 'x'.repeat(700) } })), /ENOENT/);

    const claimed = { readOnlyHint: true, openWorldHint: false };
    const guard = new CallGuard({
      server: 'fs',
      session: 's1',
      trust: 'trusted',
      tools: new Map([['read_file', guardedTool('read_file', claimed, { sandbox: 'ro-offline' })]]),
      preApprovals: [],
      audit: writer,
      approvalTimeoutMs: 1000,
      profileFile: 'fs.yaml',
      log: silentLogger,
    });
    const nobody: ClientChannel = { canElicit: () => false, elicit: () => Promise.reject(new Error('no')) };
    const admission = await guard.admit('read_file', { path: '/w/a'.repeat(200) }, nobody);
    assert.equal(admission.allowed, false);
    assert.match(JSON.stringify(admission), /the audit trail cannot record it/);
  });
});

describe('trace ids', () => {
  it("takes the trace id of a W3C traceparent in the call's _meta, and records it with the intent", () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    assert.equal(traceIdOf({ traceparent }), '4bf92f3577b34da6a3ce929d0e0e4736');
    for (const meta of [
      undefined,
      {},
      { traceparent: 'nonsense' },
      { traceparent: `00-${'0'.repeat(32)}-00f067aa0ba902b7-01` },
    ]) {
      assert.equal(traceIdOf(meta), undefined, JSON.stringify(meta));
    }
    const dir = newDir();
    const writer = open(dir);
    writer.appendIntent(intent({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736' }));
    writer.close();
    const [file] = readdirSync(dir).map((f) => path.join(dir, f));
    assert.equal((JSON.parse(lines(file!)[1]!) as { traceId: string }).traceId, '4bf92f3577b34da6a3ce929d0e0e4736');
  });
});

describe('audit verify finds tampering', () => {
  // proves: AUDIT-CHAIN
  it('a changed line: the line after it breaks', async () => {
    const dir = newDir();
    const [file] = writeCalls(dir, 3);
    const text = lines(file!);
    text[3] = text[3]!.replace('/w/1', '/w/X');
    write(file!, text);
    assert.deepEqual(
      (await breaks(dir)).map((b) => b.split(': ')[0]),
      [`${path.basename(file!)}:5`],
    );
  });

  // proves: AUDIT-CHAIN
  it('a removed line, two lines swapped, a line added', async () => {
    const removed = newDir();
    const [a] = writeCalls(removed, 3);
    write(
      a!,
      lines(a!).filter((_, i) => i !== 2),
    );
    assert.match((await breaks(removed)).join('\n'), /:3: prev does not match/);

    const swapped = newDir();
    const [b] = writeCalls(swapped, 3);
    const t = lines(b!);
    [t[3], t[5]] = [t[5]!, t[3]!];
    write(b!, t);
    assert.ok((await breaks(swapped)).length >= 2);

    const added = newDir();
    const [c] = writeCalls(added, 2);
    const u = lines(c!);
    u.splice(2, 0, u[1]!); // a copy of a real line, with a valid prev of its own
    write(c!, u);
    assert.match((await breaks(added)).join('\n'), /:3: prev does not match/);
  });

  // proves: AUDIT-CHAIN
  it('a file removed from the middle or the start of a chain', async () => {
    const middle = newDir();
    const files = writeCalls(middle, 40, 2000);
    rmSync(files[1]!);
    assert.match((await breaks(middle)).join('\n'), /files 1…1 of the chain are missing/);

    const start = newDir();
    rmSync(writeCalls(start, 40, 2000)[0]!);
    assert.match((await breaks(start)).join('\n'), /files 0…0 of the chain are missing/);
  });

  it('a line that is not a record, and a line after log.close', async () => {
    const dir = newDir();
    const [file] = writeCalls(dir, 1);
    const text = lines(file!);
    write(file!, [...text.slice(0, 2), 'not json', ...text.slice(2)]);
    assert.match((await breaks(dir)).join('\n'), /:3: not a valid record/);
  });
});

describe('audit verify tells a torn last line (a crash, a failed write) from tampering', () => {
  const torn = async (dir: string): Promise<string[]> =>
    (await verifyAuditLog(dir)).flatMap((c) => c.torn.map((t) => `${path.basename(t.file)}:${t.line}: ${t.message}`));
  /** A chain of a process killed mid-write: no log.close, and the first bytes of one more line. */
  const killedMidWrite = (dir: string, maxFileBytes?: number): string[] => {
    const writer = open(dir, maxFileBytes);
    for (let i = 0; i < 30; i++) writer.appendOutcome(writer.appendIntent(intent()), { outcome: 'ok' });
    const files = readdirSync(dir)
      .sort()
      .map((f) => path.join(dir, f));
    const last = files.at(-1)!;
    const whole = readFileSync(last, 'utf8');
    appendFileSync(last, whole.split('\n')[1]!.slice(0, 40)); // no newline
    return files;
  };

  it('a last line without its newline in the newest file: torn by a crash, not a break; not part of the chain', async () => {
    const dir = newDir();
    const files = killedMidWrite(dir);
    const wholeLines = lines(files.at(-1)!).length - 1;
    assert.deepEqual(await breaks(dir), []);
    assert.deepEqual(
      (await torn(dir)).map((t) => t.split(': ')[0]),
      [`${path.basename(files.at(-1)!)}:${wholeLines + 1}`],
    );
    assert.match((await torn(dir))[0]!, /cut short .*40 bytes.*crash/);
    const [summary] = await verifyAuditLog(dir);
    assert.equal(summary?.lines, wholeLines, 'the torn line is not counted');
    assert.equal(summary?.head, lineHash(lines(files.at(-1)!)[wholeLines - 1]!), 'the head is the last whole line');
    const { skipped } = await scanAuditLog(dir, {}, () => undefined);
    assert.equal(skipped, 0, 'hintbox audit does not count it as an invalid record');
  });

  it('an empty newest file (killed right after creating it) is torn, not a break', async () => {
    const dir = newDir();
    const files = writeCalls(dir, 40, 2000);
    writeFileSync(files.at(-1)!, '');
    assert.deepEqual(await breaks(dir), []);
    assert.match((await torn(dir)).join('\n'), /is empty/);
  });

  it('a torn last line of an earlier file is a failed write when the next file goes on from the line before it', async () => {
    const dir = newDir();
    const files = writeCalls(dir, 40, 2000);
    appendFileSync(files[1]!, '{"v":1,"id":"r99","ti'); // what a short write leaves
    assert.deepEqual(await breaks(dir), []);
    assert.match(
      (await torn(dir)).join('\n'),
      new RegExp(`^${path.basename(files[1]!).replace(/\./g, '\\.')}:\\d+: .*failed`),
    );
  });

  // proves: AUDIT-CHAIN
  it('a whole last line cut short (its newline gone) is a break where the next file links to it', async () => {
    const dir = newDir();
    const files = writeCalls(dir, 40, 2000);
    const text = readFileSync(files[1]!, 'utf8');
    writeFileSync(files[1]!, text.slice(0, -10));
    assert.match(
      (await breaks(dir)).join('\n'),
      new RegExp(`${path.basename(files[2]!).replace(/\./g, '\\.')}:1: prev does not match`),
    );
  });

  it('a line without a newline after log.close is a break', async () => {
    const dir = newDir();
    const [file] = writeCalls(dir, 2);
    appendFileSync(file!, '{"v":1,');
    assert.match((await breaks(dir)).join('\n'), /after log\.close/);
  });
});

describe('reading the audit log', () => {
  it('joins intents and outcomes, filters, and keeps the newest N newest first', async () => {
    const dir = newDir();
    const writer = open(dir);
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const id = writer.appendIntent(intent({ tool: i % 2 ? 'write_file' : 'read_file', arguments: { i } }));
      ids.push(id);
      if (i !== 9) writer.appendOutcome(id, { outcome: i === 4 ? 'tool-error' : 'ok', attempts: 1 });
    }
    const denied = writer.appendIntent(intent({ decision: 'denied', decidedBy: 'person' }));
    writer.appendOutcome(denied, { outcome: 'not-run', detail: 'declined' });
    writer.recordEvent({
      type: 'approval.asked',
      session: 's1',
      server: 'fs',
      tool: 'write_file',
      reasons: ['writes'],
    });
    writer.close();

    const all: AuditCallRecord[] = [];
    await scanAuditLog(dir, {}, (e) => {
      if (e.kind === 'call') all.push(e);
    });
    assert.equal(all.length, 11);
    const running = all.find((c) => c.id === ids[9]);
    assert.equal(running?.outcome, null, 'an intent without its outcome is given, without one');
    assert.match(all[0]!.subject ?? '', /uid/);

    const { entries } = await newestAuditEntries(dir, { tool: 'write_file' }, 3);
    assert.deepEqual(
      entries.map((e) => (e.kind === 'call' ? e.arguments : null)),
      [{ i: 9 }, { i: 7 }, { i: 5 }],
    );
    const errors = await newestAuditEntries(dir, { outcome: 'tool-error' }, 100);
    assert.deepEqual(
      errors.entries.map((e) => e.id),
      [ids[4]],
    );
    const none = await newestAuditEntries(dir, { outcome: null }, 100);
    assert.deepEqual(
      none.entries.map((e) => e.id),
      [ids[9]],
    );
    const deniedOnly = await newestAuditEntries(dir, { decision: 'denied' }, 100);
    assert.equal(deniedOnly.entries.length, 1);
    const tagged = await newestAuditEntries(dir, { tag: 'FILES' }, 100);
    assert.equal(tagged.entries.length, 11);
    const withEvents = await newestAuditEntries(dir, { events: true }, 100);
    assert.ok(withEvents.entries.some((e) => e.kind === 'event' && e.type === 'approval.asked'));
  });

  it('reads flags into a filter; bad values are usage errors', () => {
    const now = new Date('2026-03-01T12:00:00.000Z');
    assert.deepEqual(auditFilter({ tool: 't', outcome: 'none', since: '2h' }, now), {
      tool: 't',
      outcome: null,
      since: new Date('2026-03-01T10:00:00.000Z'),
    });
    assert.throws(() => auditFilter({ decision: 'maybe' }), /--decision/);
    assert.throws(() => auditFilter({ since: 'yesterday' }), /--since/);
  });
});
