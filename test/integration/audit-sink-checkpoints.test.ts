import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { cpSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import pg from 'pg';
import { AuditLogWriter } from '../../src/audit/audit-log-writer.js';
import { delay } from '../../src/util/delay.js';
import { silentLogger } from '../../src/util/logger.js';
import { writeIntent } from '../support/audit-intent.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { hintboxCommand } from './support/hintbox-process.js';
import { startPostgres, type StartedPostgres } from './support/postgres.js';
import { integrationSuite } from './support/suite.js';

/**
 * The signed checkpoints anchored in the Postgres sink: what a person who can write the audit
 * folder (not the key, not the database) does when the folder's own checkpoints cannot catch
 * it — a whole chain deleted with its checkpoint lines, the folder rolled back to an older copy
 * — is found by `hintbox audit verify --sink`, and the rows that prove it did not change.
 */
integrationSuite('signed checkpoints anchored in the Postgres sink', { timeout: 240_000 }, (suite) => {
  let postgres: StartedPostgres;
  let db: pg.Client;
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const publicKeyFile = path.join(scratchFolder('hintbox-anchor-key-'), 'hintbox.pub');
  writeFileSync(publicKeyFile, publicKey.export({ type: 'spki', format: 'pem' }).toString());
  before(async () => {
    postgres = await startPostgres();
    db = new pg.Client({ connectionString: postgres.adminUrl });
    await db.connect();
  });
  suite.defer(async () => {
    await db?.end();
    await postgres?.stop();
  });

  const openLog = (dir: string): AuditLogWriter =>
    AuditLogWriter.open({ dir, log: silentLogger, checkpoints: { key: privateKey, everyRecords: 10 } });
  const calls = (writer: AuditLogWriter, from: number, count: number): void => {
    for (let i = from; i < from + count; i++)
      writer.appendOutcome(writer.appendIntent(writeIntent(i)), { outcome: 'ok' });
  };
  const env = (dir: string): Record<string, string> => ({
    HINTBOX_AUDIT_DIR: dir,
    HINTBOX_DATABASE_URL: postgres.adminUrl,
  });
  const ship = async (dir: string): Promise<void> => {
    const shipped = await hintboxCommand(['audit', 'ship'], env(dir));
    assert.equal(shipped.code, 0, shipped.stderr);
  };
  const verify = (dir: string, ...args: string[]) =>
    hintboxCommand(['audit', 'verify', '--public-key', publicKeyFile, ...args], env(dir));
  /** The sink's checkpoint rows (every folder's), as the database holds them. */
  const sinkRows = async (): Promise<string[]> => {
    const exists = await db.query<{ t: string | null }>(`SELECT to_regclass('hintbox.audit_checkpoints') AS t`);
    if (exists.rows[0]?.t === null) return [];
    return (await db.query<{ text: string }>('SELECT text FROM hintbox.audit_checkpoints ORDER BY hash')).rows.map(
      (r) => r.text,
    );
  };
  const checkpointLines = (dir: string): string[] =>
    readFileSync(path.join(dir, 'checkpoints.jsonl'), 'utf8').split('\n').filter(Boolean);

  // proves: AUDIT-SINK-ANCHOR
  it('the newest chain deleted together with its checkpoint lines: the folder verifies, the sink names the chain (attack)', async () => {
    const dir = path.join(scratchFolder('hintbox-anchor-'), 'audit');
    const older = openLog(dir);
    calls(older, 0, 5);
    older.close();
    const newest = openLog(dir);
    calls(newest, 0, 30); // the calls the intruder wants gone
    newest.close();
    await ship(dir);
    const rowsBefore = await sinkRows();
    const linesBefore = checkpointLines(dir);

    // The intruder: the chain's files and every checkpoint line naming it, gone.
    for (const file of readdirSync(dir).filter((f) => f.startsWith(newest.chain))) rmSync(path.join(dir, file));
    writeFileSync(
      path.join(dir, 'checkpoints.jsonl'),
      checkpointLines(dir)
        .filter((line) => !line.includes(newest.chain))
        .map((line) => `${line}\n`)
        .join(''),
    );
    const folderOnly = await verify(dir);
    assert.equal(folderOnly.code, 0, `the folder alone cannot tell: ${folderOnly.stdout}${folderOnly.stderr}`);

    assert.ok(
      linesBefore.every((line) => rowsBefore.includes(line)),
      'every checkpoint of the folder was in the sink before the intruder came',
    );
    await ship(dir); // a later pass ships nothing that undoes it
    const anchored = await verify(dir, '--sink');
    assert.equal(anchored.code, 1, anchored.stdout + anchored.stderr);
    assert.match(anchored.stdout, new RegExp(`chain ${newest.chain} has no files left: deleted`));
    assert.match(
      anchored.stdout,
      new RegExp(`checkpoint line\\(s\\) of chain ${newest.chain} that the sink holds are not in checkpoints\\.jsonl`),
    );
    assert.doesNotMatch(anchored.stdout + anchored.stderr, /hintbox-test-admin/, 'never the password');
    assert.deepEqual(await sinkRows(), rowsBefore, 'the rows that prove it did not change');
  });

  // proves: AUDIT-SINK-ANCHOR
  it('the folder rolled back to an older copy, files and checkpoints: the sink finds the tail cut (attack)', async () => {
    const dir = path.join(scratchFolder('hintbox-anchor-'), 'audit');
    const copy = path.join(scratchFolder('hintbox-anchor-copy-'), 'audit');
    const writer = openLog(dir);
    calls(writer, 0, 10);
    await delay(20); // the checkpoint the count scheduled is written
    await ship(dir);
    cpSync(dir, copy, { recursive: true }); // the intruder's copy, taken now
    calls(writer, 10, 40);
    writer.close();
    await ship(dir);
    const rowsBefore = await sinkRows();

    rmSync(dir, { recursive: true });
    cpSync(copy, dir, { recursive: true }); // ... and put back later
    const folderOnly = await verify(dir);
    assert.equal(folderOnly.code, 0, `the folder alone cannot tell: ${folderOnly.stdout}${folderOnly.stderr}`);
    await ship(dir); // the shorter file is read again from its start: nothing lost, nothing added

    const anchored = await verify(dir, '--sink');
    assert.equal(anchored.code, 1, anchored.stdout + anchored.stderr);
    assert.match(anchored.stdout, /covers \d+ records in 1 file\(s\), the chain has \d+ in 1: its tail was cut/);
    assert.deepEqual(await sinkRows(), rowsBefore, 'the rows that prove it did not change');
  });

  // proves: AUDIT-SINK-ANCHOR
  it("a line planted ahead of the chain's next checkpoint does not keep the real one out of the sink (attack)", async () => {
    const dir = path.join(scratchFolder('hintbox-anchor-'), 'audit');
    const writer = openLog(dir);
    calls(writer, 0, 3);
    const file = path.join(dir, 'checkpoints.jsonl');
    // The intruder writes the chain's next checkpoint first: same chain, the next n, no valid signature.
    const last = JSON.parse(checkpointLines(dir).at(-1)!) as Record<string, unknown>;
    writeFileSync(file, `${JSON.stringify({ ...last, n: Number(last.n) + 1, records: 999, sig: 'AAAA' })}\n`, {
      flag: 'a',
    });
    await ship(dir);
    calls(writer, 3, 20);
    writer.close(); // the real checkpoint n+1 (and the closing one) follow the planted line
    await ship(dir);
    const rows = await sinkRows();
    for (const line of checkpointLines(dir)) assert.ok(rows.includes(line), `in the sink: ${line.slice(0, 80)}`);
    // Then the tail cut, and the planted line removed again to hide it: both are found.
    const [chainFile] = readdirSync(dir).filter((f) => f.startsWith(writer.chain));
    const lines = readFileSync(path.join(dir, chainFile!), 'utf8').split('\n').filter(Boolean);
    writeFileSync(path.join(dir, chainFile!), `${lines.slice(0, -10).join('\n')}\n`);
    writeFileSync(
      file,
      checkpointLines(dir)
        .filter((line) => !line.includes('"sig":"AAAA"'))
        .join('\n') + '\n',
    );
    const anchored = await verify(dir, '--sink');
    assert.equal(anchored.code, 1, anchored.stdout);
    assert.match(anchored.stdout, /its tail was cut/);
    assert.match(anchored.stdout, /the sink \(hintbox\.audit_checkpoints\): not a checkpoint|signature does not match/);
  });

  it('an untouched folder verifies against the sink, with checkpoints not shipped yet taken from the file', async () => {
    const dir = path.join(scratchFolder('hintbox-anchor-'), 'audit');
    const writer = openLog(dir);
    calls(writer, 0, 10);
    await delay(20);
    await ship(dir);
    calls(writer, 10, 20);
    writer.close(); // its last checkpoints are in the file only
    const anchored = await verify(dir, '--sink');
    assert.equal(anchored.code, 0, anchored.stdout + anchored.stderr);
    assert.match(anchored.stdout, /the sink holds \d+ checkpoint\(s\) of this folder/);
    await ship(dir);
    await ship(dir); // idempotent: every line once
    const rows = await sinkRows();
    for (const line of checkpointLines(dir)) assert.equal(rows.filter((r) => r === line).length, 1);
    assert.equal((await verify(dir, '--sink')).code, 0);
  });
});
