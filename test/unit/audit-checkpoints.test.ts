import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { frameLine, lineHash } from '../../src/audit/audit-chain.js';
import { openAuditKey } from '../../src/audit/audit-key.js';
import { AuditLogWriter } from '../../src/audit/audit-log-writer.js';
import { verifyAuditLog } from '../../src/audit/audit-reader.js';
import type { AuditIntent, Clock } from '../../src/audit/audit-record.js';
import { silentLogger } from '../../src/util/logger.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { writeIntent } from '../support/audit-intent.js';

/**
 * The attacks of someone who can write the audit folder but does not hold hintbox's key: each
 * leaves a log whose hash chains still hold, so only the signed checkpoints can show it.
 */

const CHECKPOINTS = 'checkpoints.jsonl';
const keyPair = (): { privateKey: KeyObject; publicKey: KeyObject } => generateKeyPairSync('ed25519');
const hintbox = keyPair();

function steppingClock(start = Date.parse('2026-03-01T12:00:00.000Z')): Clock {
  let t = start;
  return { now: () => new Date((t += 1000)) };
}

const intent = (i: number): AuditIntent => writeIntent(i);

interface LogOptions {
  maxFileBytes?: number;
  key?: KeyObject;
  /** A checkpoint at least every this many records. */
  every?: number;
}

function openLog(dir: string, options: LogOptions = {}): AuditLogWriter {
  return AuditLogWriter.open({
    dir,
    log: silentLogger,
    clock: steppingClock(),
    checkpoints: { key: options.key ?? hintbox.privateKey, everyRecords: options.every ?? 1000, everySeconds: 3600 },
    ...(options.maxFileBytes ? { maxFileBytes: options.maxFileBytes } : {}),
  });
}

function calls(writer: AuditLogWriter, from: number, count: number): void {
  for (let i = from; i < from + count; i++) writer.appendOutcome(writer.appendIntent(intent(i)), { outcome: 'ok' });
}

/** A closed log of `count` calls; returns its chain's files, in order. */
function writeLog(dir: string, count: number, options: LogOptions = {}): string[] {
  const writer = openLog(dir, options);
  calls(writer, 0, count);
  writer.close();
  return chainFiles(dir);
}

const chainFiles = (dir: string): string[] =>
  readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl') && f !== CHECKPOINTS)
    .sort()
    .map((f) => path.join(dir, f));
const lines = (file: string): string[] => readFileSync(file, 'utf8').trimEnd().split('\n');
const write = (file: string, text: string[]): void => writeFileSync(file, text.length ? text.join('\n') + '\n' : '');

/** What verify reports as wrong (file:line: message), with the auditor's public key only. */
async function problems(dir: string, publicKeys = [hintbox.publicKey]): Promise<string> {
  return (await verifyAuditLog(dir, { publicKeys }))
    .flatMap((c) => c.breaks.map((b) => `${path.basename(b.file)}:${b.line}: ${b.message}`))
    .join('\n');
}

/** Cuts the last `count` lines of a chain, across its files (emptied files are deleted). */
function cutTail(files: string[], count: number): void {
  for (const file of [...files].reverse()) {
    if (count === 0) return;
    const text = lines(file);
    const keep = Math.max(0, text.length - count);
    count -= text.length - keep;
    if (keep === 0) rmSync(file);
    else write(file, text.slice(0, keep));
  }
}

describe('signed checkpoints: what a person who can write the audit folder, without the key, cannot hide', () => {
  it('an untouched log verifies with the public key alone', async () => {
    const dir = path.join(scratchFolder('hintbox-cp-'), 'audit');
    writeLog(dir, 600, { maxFileBytes: 50_000, every: 100 });
    assert.equal(await problems(dir), '');
  });

  // proves: AUDIT-CHECKPOINTS
  it('the last record of a closed log cut off', async () => {
    const dir = path.join(scratchFolder('hintbox-cp-'), 'audit');
    cutTail(writeLog(dir, 5), 1);
    assert.match(await problems(dir), /covers \d+ records in 1 file\(s\), the chain has \d+ in 1: its tail was cut/);
  });

  // proves: AUDIT-CHECKPOINTS
  it('the last 1,000 records cut off', async () => {
    const dir = path.join(scratchFolder('hintbox-cp-'), 'audit');
    cutTail(writeLog(dir, 1500, { maxFileBytes: 100_000, every: 100 }), 1000);
    assert.match(await problems(dir), /its tail was cut/);
  });

  // proves: AUDIT-CHECKPOINTS
  it('the newest file of a chain deleted', async () => {
    const dir = path.join(scratchFolder('hintbox-cp-'), 'audit');
    const files = writeLog(dir, 300, { maxFileBytes: 20_000 });
    assert.ok(files.length > 2);
    rmSync(files.at(-1)!);
    assert.match(await problems(dir), /its tail was cut/);
  });

  // proves: AUDIT-CHECKPOINTS
  it('a whole chain rewritten with its hashes recomputed', async () => {
    const dir = path.join(scratchFolder('hintbox-cp-'), 'audit');
    const files = writeLog(dir, 50, { maxFileBytes: 5_000 });
    let prev: string | null = null;
    for (const file of files) {
      write(
        file,
        lines(file).map((text) => {
          const fields = JSON.parse(text) as Record<string, unknown>;
          delete fields.prev;
          if (JSON.stringify(fields.arguments) === '{"path":"/w/7"}') fields.arguments = { path: '/w/innocent' };
          const line = frameLine(fields, prev);
          prev = lineHash(line);
          return line;
        }),
      );
    }
    const found = await problems(dir);
    assert.match(found, /does not match checkpoint/);
  });

  // proves: AUDIT-CHECKPOINTS
  it('a forged chain added (with checkpoints signed by a key of its own)', async () => {
    const dir = path.join(scratchFolder('hintbox-cp-'), 'audit');
    writeLog(dir, 3);
    const forger = keyPair();
    const forgedDir = path.join(scratchFolder('hintbox-cp-forged-'), 'audit');
    writeLog(forgedDir, 3, { key: forger.privateKey });
    for (const file of chainFiles(forgedDir)) copyFileSync(file, path.join(dir, path.basename(file)));
    // its checkpoints appended to the real file, as a forger who can write the folder would
    const forged = readFileSync(path.join(forgedDir, CHECKPOINTS), 'utf8');
    writeFileSync(path.join(dir, CHECKPOINTS), readFileSync(path.join(dir, CHECKPOINTS), 'utf8') + forged);
    assert.match(await problems(dir), /signed by key \S+, not one given/);

    // and without checkpoints at all
    const bare = path.join(scratchFolder('hintbox-cp-'), 'audit');
    writeLog(bare, 3);
    for (const file of chainFiles(forgedDir)) copyFileSync(file, path.join(bare, path.basename(file)));
    assert.match(await problems(bare), /no signed checkpoint covers this chain/);
  });

  // proves: AUDIT-CHECKPOINTS
  it('the checkpoints file deleted', async () => {
    const dir = path.join(scratchFolder('hintbox-cp-'), 'audit');
    writeLog(dir, 3);
    rmSync(path.join(dir, CHECKPOINTS), { force: true });
    assert.match(await problems(dir), /no signed checkpoint covers this chain/);
  });

  // proves: AUDIT-CHECKPOINTS
  it('an old checkpoints file put back (replayed)', async () => {
    const dir = path.join(scratchFolder('hintbox-cp-'), 'audit');
    const old = path.join(scratchFolder('hintbox-cp-old-'), CHECKPOINTS);
    const writer = openLog(dir, { every: 10 });
    calls(writer, 0, 20);
    await new Promise((resolve) => setTimeout(resolve, 20)); // the interval checkpoint is written
    assert.ok(existsSync(path.join(dir, CHECKPOINTS)));
    copyFileSync(path.join(dir, CHECKPOINTS), old);
    calls(writer, 20, 20);
    writer.close();
    copyFileSync(old, path.join(dir, CHECKPOINTS));
    assert.match(await problems(dir), /log\.close is not covered by a checkpoint/);
  });

  // proves: AUDIT-CHECKPOINTS
  it('a checkpoint line edited (its count raised to cover a cut), or removed from the middle', async () => {
    const dir = path.join(scratchFolder('hintbox-cp-'), 'audit');
    const writer = openLog(dir, { every: 10 });
    for (let round = 0; round < 3; round++) {
      calls(writer, round * 10, 10);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    writer.close();
    const file = path.join(dir, CHECKPOINTS);
    const text = lines(file);
    assert.ok(text.length >= 4, text.join('\n'));
    write(file, [
      text[0]!,
      text[1]!.replace(/"records":(\d+)/, (_, n) => `"records":${Number(n) + 1}`),
      ...text.slice(2),
    ]);
    assert.match(await problems(dir), new RegExp(`${CHECKPOINTS}:2: the signature does not match`));
    write(file, [text[0]!, ...text.slice(2)]);
    assert.match(await problems(dir), new RegExp(`${CHECKPOINTS}:2: prev does not match the checkpoint before it`));
  });
});

describe('a crash window: records after the last checkpoint', () => {
  // proves: AUDIT-CHECKPOINTS
  it('are reported as not covered, and everything up to the last checkpoint verifies', async () => {
    const dir = path.join(scratchFolder('hintbox-cp-'), 'audit');
    const writer = openLog(dir, { every: 100_000 });
    calls(writer, 0, 5); // never closed: a process killed
    const [chain] = await verifyAuditLog(dir, { publicKeys: [hintbox.publicKey] });
    assert.deepEqual(chain!.breaks, []);
    assert.equal(chain!.uncovered?.records, 10);
    assert.equal(chain!.uncovered?.line, 2);
    writer.close();
  });
});

describe('the audit signing key', () => {
  // proves: AUDIT-KEY
  it('is made owner-only at first use, and refused when others can read it, inside the audit folder, or a symlink', () => {
    const state = scratchFolder('hintbox-key-');
    const auditDir = path.join(state, 'audit');
    const file = path.join(state, 'audit-key.pem');
    const made = openAuditKey(file, { auditDir, create: true });
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(openAuditKey(file, { auditDir, create: false }).id, made.id, 'the same key read back');
    const before = readFileSync(file);

    chmodSync(file, 0o640);
    assert.throws(() => openAuditKey(file, { auditDir, create: true }), /can be read by others \(mode 0640\)/);
    assert.deepEqual(readFileSync(file), before, 'the key was not replaced');
    chmodSync(file, 0o600);

    mkdirSync(auditDir, { recursive: true });
    assert.throws(
      () => openAuditKey(path.join(auditDir, 'k.pem'), { auditDir, create: true }),
      /inside the audit folder/,
    );
    assert.ok(!existsSync(path.join(auditDir, 'k.pem')), 'no key made there');

    const link = path.join(state, 'link.pem');
    symlinkSync(file, link);
    assert.throws(() => openAuditKey(link, { auditDir, create: true }), /symbolic link/);
    assert.throws(() => openAuditKey(path.join(state, 'none.pem'), { auditDir, create: false }), /no such file/);
  });
});
