import assert from 'node:assert/strict';
import fs, { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import fc from 'fast-check';
import pg from 'pg';
import { stringify } from 'yaml';
import { lineHash } from '../../src/audit/audit-chain.js';
import { CHECKPOINTS_FILE } from '../../src/audit/audit-checkpoint.js';
import { AuditLogWriter } from '../../src/audit/audit-log-writer.js';
import type { AuditIntent } from '../../src/audit/audit-record.js';
import { jsonbText } from '../../src/audit/jsonb-text.js';
import { PostgresAuditSink } from '../../src/audit/postgres-sink.js';
import { effectiveHints } from '../../src/policy/hints.js';
import { delay } from '../../src/util/delay.js';
import { createLogger, silentLogger } from '../../src/util/logger.js';
import { hostileJson } from '../support/hostile-json.js';
import { docker, ensureFaultyImage, eventually, FAULTY_IMAGE } from './support/docker.js';
import { connect, leave, serve, stop } from './support/serve-process.js';
import { hintboxCommand } from './support/hintbox-process.js';
import { startPostgres, type StartedPostgres } from './support/postgres.js';

/**
 * The Postgres sink against a real Postgres 15: at least once and idempotent, remembering
 * where it got to, catching up after the database was down, and never in the way of the log.
 */
integrationSuite('the audit log shipped to Postgres', { timeout: 240_000, images: [ensureFaultyImage] }, (suite) => {
  let postgres: StartedPostgres;
  let db: pg.Client;
  let root: string;
  before(async () => {
    postgres = await startPostgres();
    db = new pg.Client({ connectionString: postgres.adminUrl });
    await db.connect();
    root = mkdtempSync(path.join(os.tmpdir(), 'hintbox-sink-test-'));
  });
  suite.defer(async () => {
    await db?.end();
    await postgres?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  const intent = (i: number): AuditIntent => ({
    session: 's1',
    server: 'fs',
    tool: 'read_file',
    tags: [],
    claimedHints: { readOnlyHint: true },
    effectiveHints: effectiveHints({ readOnlyHint: true }),
    sandbox: 'ro-offline',
    decision: 'allowed',
    decidedBy: 'auto',
    arguments: { path: `/w/${i}` },
    pinHash: null,
  });
  const writeCalls = (writer: AuditLogWriter, from: number, to: number): void => {
    for (let i = from; i < to; i++) {
      const id = writer.appendIntent(intent(i));
      // Text a server controls, with what jsonb cannot hold: a NUL and a lone surrogate.
      writer.appendOutcome(id, { outcome: 'tool-error', detail: `failed \u0000 \ud800 ${i}` });
    }
  };
  const linesOnDisk = (dir: string): string[] =>
    readdirSync(dir)
      .sort()
      .flatMap((f) =>
        readFileSync(path.join(dir, f), 'utf8')
          .split('\n')
          .filter((l) => l !== ''),
      );
  const rows = async (): Promise<{ text: string; hash: string; prev: string | null }[]> =>
    (
      await db.query<{ text: string; hash: string; prev: string | null }>(
        'SELECT text, hash, prev FROM hintbox.audit_log ORDER BY chain, seq, line',
      )
    ).rows;

  it('copies every line once, exactly, with its hash; a second pass copies nothing', async () => {
    const dir = path.join(root, 'audit');
    const writer = AuditLogWriter.open({ dir, log: silentLogger, maxFileBytes: 4000 });
    writeCalls(writer, 0, 40);
    const sink = new PostgresAuditSink({ url: postgres.adminUrl, dir, log: silentLogger, batchLines: 25 });
    try {
      assert.equal((await sink.shipOnce()).lines, linesOnDisk(dir).length);
      assert.ok(readdirSync(dir).length > 2, 'rotated into several files');
      const shipped = await rows();
      assert.deepEqual(
        shipped.map((r) => r.text),
        linesOnDisk(dir),
      );
      for (let i = 1; i < shipped.length; i++) {
        assert.equal(shipped[i]!.hash, lineHash(shipped[i]!.text));
        assert.equal(shipped[i]!.prev, shipped[i - 1]!.hash, 'the chain holds in the database too');
      }
      const { rows: details } = await db.query<{ detail: string }>(
        `SELECT record->>'detail' AS detail FROM hintbox.audit_log WHERE type = 'call.outcome' LIMIT 1`,
      );
      assert.equal(details[0]?.detail, 'failed \ufffd \ufffd 0', 'queryable, with what jsonb cannot hold replaced');
      assert.equal((await sink.shipOnce()).lines, 0);
      // Another shipper (another process) learns from the database where the log got to.
      const other = new PostgresAuditSink({ url: postgres.adminUrl, dir, log: silentLogger });
      assert.equal((await other.shipOnce()).lines, 0);
      await other.close();
      assert.equal((await rows()).length, linesOnDisk(dir).length);
    } finally {
      writer.close();
      await sink.close();
    }
  });

  // proves: AUDIT-NO-WEDGE
  it('falls behind while the database is down without slowing the log, and catches up once it is back', async () => {
    const dir = path.join(root, 'audit-down');
    const writer = AuditLogWriter.open({ dir, log: silentLogger });
    writeCalls(writer, 0, 5);
    const sink = new PostgresAuditSink({ url: postgres.adminUrl, dir, log: silentLogger, timeoutMs: 2000 });
    const container = (await docker()).docker.getContainer(postgres.container.getId());
    try {
      const before = (await rows()).length; // the other tests' lines
      await sink.shipOnce();
      await container.pause();
      try {
        sink.start(100); // the loop keeps trying
        const started = performance.now();
        writeCalls(writer, 5, 105);
        const perCall = (performance.now() - started) / 100;
        assert.ok(perCall < 5, `appending does not wait for the database (${perCall.toFixed(3)} ms per call)`);
        await assert.rejects(sink.shipOnce(), /timeout|timed out|terminated/i);
      } finally {
        await container.unpause();
      }
      writer.close();
      await sink.stop(15_000); // its last pass catches up
      const lines = linesOnDisk(dir);
      const now = await rows();
      assert.equal(now.length - before, lines.length, 'every line of the log, once');
      assert.deepEqual(new Set(now.map((r) => r.text)).size, now.length, 'no line twice');
    } finally {
      writer.close();
      await sink.close();
    }
  });

  const shippedOf = async (chain: string): Promise<string[]> =>
    (
      await db.query<{ text: string }>('SELECT text FROM hintbox.audit_log WHERE chain = $1 ORDER BY seq, line', [
        chain,
      ])
    ).rows.map((r) => r.text);
  const chainLines = (dir: string, chain: string): string[] =>
    readdirSync(dir)
      .filter((f) => f.startsWith(chain))
      .sort()
      .flatMap((f) =>
        readFileSync(path.join(dir, f), 'utf8')
          .split('\n')
          .filter((l) => l !== ''),
      );

  /** Two writers in `dir`, the first's chain sorting before the second's (it starts in 2020). */
  const twoChains = (dir: string): [AuditLogWriter, AuditLogWriter] => [
    AuditLogWriter.open({ dir, log: silentLogger, clock: { now: () => new Date('2020-01-01T00:00:00Z') } }),
    AuditLogWriter.open({ dir, log: silentLogger }),
  ];
  /** Counts the bytes read through fs.readSync from now until `restore`. */
  const countReads = (): { bytes: () => number; restore: () => void } => {
    let bytes = 0;
    const readSync = fs.readSync;
    fs.readSync = ((...args: Parameters<typeof fs.readSync>) => {
      const n = readSync(...args);
      bytes += n;
      return n;
    }) as typeof fs.readSync;
    syncBuiltinESMExports();
    return {
      bytes: () => bytes,
      restore: () => {
        fs.readSync = readSync;
        syncBuiltinESMExports();
      },
    };
  };

  it("a run's sink ships its own chain every pass, the folder's other chains only when it sweeps", async () => {
    const dir = path.join(root, 'audit-own');
    const own = AuditLogWriter.open({ dir, log: silentLogger, maxFileBytes: 4000 });
    const other = AuditLogWriter.open({ dir, log: silentLogger }); // another live hintbox process
    writeCalls(own, 0, 5);
    writeCalls(other, 0, 5);
    const sink = new PostgresAuditSink({ url: postgres.adminUrl, dir, log: silentLogger, chain: own.chain });
    try {
      await sink.shipOnce(); // the first pass sweeps the folder: a dead run's lines get shipped too
      assert.deepEqual(await shippedOf(other.chain), chainLines(dir, other.chain));
      writeCalls(own, 5, 40); // into new files: rotated
      writeCalls(other, 5, 10);
      await sink.shipOnce();
      assert.deepEqual(await shippedOf(own.chain), chainLines(dir, own.chain), 'its own chain, every line');
      assert.equal(
        (await shippedOf(other.chain)).length,
        1 + 10,
        "another live process's new lines are its own sink's to ship (or the next sweep's)",
      );
      const all = new PostgresAuditSink({ url: postgres.adminUrl, dir, log: silentLogger }); // hintbox audit ship
      await all.shipOnce();
      await all.close();
      assert.deepEqual(await shippedOf(other.chain), chainLines(dir, other.chain));
    } finally {
      own.close();
      other.close();
      await sink.close();
    }
  });

  it('a new shipper reads nothing again of what the database has (no file read from its start)', async () => {
    const dir = path.join(root, 'audit-reread');
    const crashed = AuditLogWriter.open({ dir, log: silentLogger, maxFileBytes: 64 * 1024 });
    writeCalls(crashed, 0, 400); // never closed: a run that was killed
    const first = new PostgresAuditSink({ url: postgres.adminUrl, dir, log: silentLogger });
    await first.shipOnce();
    await first.close();
    const reads = countReads();
    try {
      const second = new PostgresAuditSink({ url: postgres.adminUrl, dir, log: silentLogger });
      assert.equal((await second.shipOnce()).lines, 0);
      assert.equal(reads.bytes(), 0, 'nothing of the shipped files is read again');
      writeCalls(crashed, 400, 401);
      assert.equal((await second.shipOnce()).lines, 2);
      assert.ok(reads.bytes() < 4096, `only the new lines are read (${reads.bytes()} bytes)`);
      await second.close();
    } finally {
      reads.restore();
      crashed.close();
    }
  });

  it('two shippers at once, on the same chains, neither duplicate nor lose a line', async () => {
    const dir = path.join(root, 'audit-race');
    const writers = [0, 1, 2].map(() => AuditLogWriter.open({ dir, log: silentLogger, maxFileBytes: 8000 }));
    const sinks = [0, 1].map(
      () => new PostgresAuditSink({ url: postgres.adminUrl, dir, log: silentLogger, batchLines: 7 }),
    );
    try {
      for (let round = 0; round < 5; round++) {
        for (const w of writers) writeCalls(w, round * 20, round * 20 + 20);
        await Promise.all(sinks.map((s) => s.shipOnce()));
      }
      for (const w of writers) w.close();
      await Promise.all(sinks.map((s) => s.shipOnce()));
      for (const w of writers) assert.deepEqual(await shippedOf(w.chain), chainLines(dir, w.chain));
      const { rows: progress } = await db.query<{ chain: string; line: number; closed: boolean }>(
        'SELECT chain, line, closed FROM hintbox.audit_shipped WHERE chain = ANY($1)',
        [writers.map((w) => w.chain)],
      );
      assert.deepEqual(
        progress.map((p) => p.closed),
        [true, true, true],
      );
    } finally {
      for (const w of writers) w.close();
      for (const s of sinks) await s.close();
    }
  });

  // proves: AUDIT-SINK-ANY-LINE
  it('ships a call whose argument keys jsonb cannot hold, and it never holds back another chain (attack)', async () => {
    const dir = path.join(root, 'audit-keys');
    // The hostile chain sorts first (an earlier start): it used to stop the pass before the good one.
    const [hostile, good] = twoChains(dir);
    // Keys a client (or, under run, the model) chooses: NUL, lone surrogates, at any depth. A denied call is enough.
    const args = {
      'a\u0000b': 1,
      '\ud800': { 'x\u0000': ['y', { '\udc00z': 'v\u0000', ok: '\ud83d\ude00' }] },
      nested: { deeper: { '\u0000': null, '\udbff\u0000': true } },
    };
    hostile.appendIntent({ ...intent(0), arguments: args, decision: 'denied', decidedBy: 'rule' });
    writeCalls(hostile, 1, 3);
    writeCalls(good, 0, 3);
    hostile.close();
    good.close();
    const env = { HINTBOX_AUDIT_DIR: dir, HINTBOX_DATABASE_URL: postgres.adminUrl };
    const shipped = await hintboxCommand(['audit', 'ship'], env);
    assert.deepEqual(
      await shippedOf(good.chain),
      chainLines(dir, good.chain),
      `the good chain, whole: ${shipped.stderr}`,
    );
    assert.equal(shipped.code, 0, shipped.stderr);
    for (const w of [hostile, good]) {
      assert.deepEqual(await shippedOf(w.chain), chainLines(dir, w.chain), `every line of ${w.chain}, exactly`);
    }
    // The sink's check: each row's text hashes to its hash, and each links to the one before.
    const { rows: chainRows } = await db.query<{ text: string; hash: string; prev: string | null }>(
      'SELECT text, hash, prev FROM hintbox.audit_log WHERE chain = $1 ORDER BY seq, line',
      [hostile.chain],
    );
    chainRows.forEach((row, i) => {
      assert.equal(row.hash, lineHash(row.text));
      assert.equal(row.prev, i === 0 ? null : chainRows[i - 1]!.hash);
    });
    const { rows: queried } = await db.query<{ keys: string[] }>(
      `SELECT array(SELECT jsonb_object_keys(record->'arguments') ORDER BY 1) AS keys FROM hintbox.audit_log
       WHERE chain = $1 AND type = 'call.intent' AND record->>'decision' = 'denied'`,
      [hostile.chain],
    );
    assert.deepEqual(queried[0]?.keys, ['a\ufffdb', 'nested', '\ufffd'], 'queryable, keys cleaned as values are');
    const { rows: progress } = await db.query<{ closed: boolean }>(
      'SELECT closed FROM hintbox.audit_shipped WHERE chain = ANY($1)',
      [[hostile.chain, good.chain]],
    );
    assert.deepEqual(
      progress.map((p) => p.closed),
      [true, true],
      'nothing missing: both chains shipped to their close',
    );
  });

  // proves: AUDIT-SINK-ANY-LINE
  it('property: every line the writer makes of any JSON arguments ships, exactly, and jsonb holds its record', async () => {
    const dir = path.join(root, 'audit-any');
    const writer = AuditLogWriter.open({ dir, log: silentLogger });
    const values = fc.sample(hostileJson, { numRuns: 300, seed: 35 });
    let deep: unknown = 'bottom';
    for (let i = 0; i < 2000; i++) deep = [deep]; // deep, as deep as the writer takes (JSON.stringify)
    for (const value of [...values, deep]) {
      const args = value !== null && typeof value === 'object' && !Array.isArray(value) ? value : { value };
      writer.appendIntent({
        ...intent(0),
        arguments: args,
        decision: 'denied',
        decidedBy: 'rule',
      });
      await db.query('SELECT $1::jsonb', [jsonbText(value)]); // the cleaning alone, value by value
    }
    writer.close();
    const sink = new PostgresAuditSink({ url: postgres.adminUrl, dir, log: silentLogger, batchLines: 64 });
    try {
      const { held } = await sink.shipOnce();
      assert.deepEqual(held, []);
      assert.deepEqual(await shippedOf(writer.chain), chainLines(dir, writer.chain));
    } finally {
      await sink.close();
    }
  });

  // proves: AUDIT-SINK-ANY-LINE
  it('a line the database refuses holds back its own chain only: named with file and line, tried again later, not hot', async () => {
    const dir = path.join(root, 'audit-held');
    const [damaged, good] = twoChains(dir);
    writeCalls(damaged, 0, 3);
    writeCalls(good, 0, 3);
    damaged.close();
    good.close();
    // A damaged file (the writer never writes one): the escaped NUL of line 3 made a raw NUL byte.
    const [file] = readdirSync(dir).filter((f) => f.startsWith(damaged.chain));
    const damagedFile = path.join(dir, file!);
    const whole = readFileSync(damagedFile, 'utf8');
    const lines = whole.split('\n');
    lines[2] = lines[2]!.replace('\\u0000', '\u0000');
    writeFileSync(damagedFile, lines.join('\n'));
    const env = { HINTBOX_AUDIT_DIR: dir, HINTBOX_DATABASE_URL: postgres.adminUrl };
    const cli = await hintboxCommand(['audit', 'ship'], env);
    assert.equal(cli.code, 1, cli.stderr);
    assert.ok(cli.stderr.includes(`${damagedFile}:3 cannot be shipped`), cli.stderr);
    assert.deepEqual(await shippedOf(good.chain), chainLines(dir, good.chain), 'the other chain ships whole');
    assert.deepEqual(await shippedOf(damaged.chain), whole.split('\n').slice(0, 2), 'the lines before it are shipped');

    const logged: string[] = [];
    const sink = new PostgresAuditSink({
      url: postgres.adminUrl,
      dir,
      log: createLogger('debug', (line) => logged.push(line)),
      retryHeldMs: 300,
    });
    let reads: ReturnType<typeof countReads> | undefined;
    try {
      const first = await sink.shipOnce();
      assert.deepEqual(
        first.held.map((h) => [h.file, h.line]),
        [[damagedFile, 3]],
      );
      reads = countReads();
      assert.equal((await sink.shipOnce()).held.length, 1);
      assert.equal(reads.bytes(), 0, 'not tried again before its wait is over');
      reads.restore();
      assert.equal(logged.filter((l) => l.includes('cannot be shipped')).length, 1, 'reported once');
      writeFileSync(damagedFile, whole); // repaired
      await delay(400);
      const later = await sink.shipOnce();
      assert.deepEqual(later.held, []);
      assert.deepEqual(await shippedOf(damaged.chain), chainLines(dir, damaged.chain));
    } finally {
      reads?.restore();
      await sink.close();
    }
  });

  /** Ends, as a restart or an operator does, the session of the sink's INSERT into `table` waiting at a lock. */
  const endWaitingInsert = (table: 'audit_log' | 'audit_checkpoints'): Promise<void> =>
    eventually(
      async () =>
        (
          await db.query(
            `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'INSERT INTO hintbox.${table} %' AND wait_event_type = 'Lock'`,
          )
        ).rowCount === 1,
      15_000,
      `the sink's insert into ${table} waiting at the lock`,
    );

  // proves: AUDIT-SINK-DB-GONE
  it('the database cutting the connection of a batch in flight (log or checkpoints) throws no uncaught error and loses no line (attack)', async () => {
    const dir = path.join(root, 'audit-cut');
    const first = AuditLogWriter.open({ dir, log: silentLogger });
    writeCalls(first, 0, 3);
    first.close();
    const uncaught: Error[] = [];
    const onUncaught = (error: Error): void => void uncaught.push(error);
    process.on('uncaughtException', onUncaught);
    const sink = new PostgresAuditSink({ url: postgres.adminUrl, dir, log: silentLogger, timeoutMs: 10_000 });
    try {
      await sink.shipOnce(); // its tables made, its pool open
      const writer = AuditLogWriter.open({ dir, log: silentLogger });
      writeCalls(writer, 3, 6);
      writer.close();
      for (const table of ['audit_log', 'audit_checkpoints'] as const) {
        if (table === 'audit_checkpoints') writeFileSync(path.join(dir, CHECKPOINTS_FILE), '{"cut":1}\n{"cut":2}\n');
        // Holds the sink's INSERT at the table's lock, its client checked out of the pool...
        const locker = new pg.Client({ connectionString: postgres.adminUrl });
        await locker.connect();
        await locker.query(`BEGIN; LOCK TABLE hintbox.${table} IN ACCESS EXCLUSIVE MODE`);
        const pass = sink.shipOnce().then(
          () => undefined,
          (error: Error) => error,
        );
        // ...then the database ends that session.
        await endWaitingInsert(table);
        await delay(200); // the socket's end reaches the client
        await locker.query('ROLLBACK');
        await locker.end();
        await pass;
        assert.deepEqual(
          uncaught.map((e) => e.message),
          [],
          `no uncaught error (it stops hintbox serve) after ${table}'s connection was cut`,
        );
      }
      // The next passes ship what the cut one did not (a line the cut made look refused is tried again later).
      await eventually(
        async () => {
          await sink.shipOnce({ sweep: true });
          const shipped = new Set((await rows()).map((r) => r.text));
          const anchored = (await db.query<{ text: string }>('SELECT text FROM hintbox.audit_checkpoints')).rows;
          return (
            linesOnDisk(dir).every((l) => l.startsWith('{"cut"') || shipped.has(l)) &&
            anchored.filter((r) => r.text.startsWith('{"cut"')).length === 2
          );
        },
        30_000,
        'every line and checkpoint shipped after the cut',
      );
    } finally {
      process.off('uncaughtException', onUncaught);
      await sink.close();
    }
  });

  // proves: AUDIT-SINK-DB-GONE
  it('a line whose session the database ended is the database failing, not a refused line: shipped at the next pass, not held (attack)', async () => {
    const dir = path.join(root, 'audit-cut-one');
    const first = AuditLogWriter.open({ dir, log: silentLogger });
    writeCalls(first, 0, 1);
    first.close();
    // One line per insert: the cut hits a batch of one, the case that was taken for a refused line.
    const sink = new PostgresAuditSink({
      url: postgres.adminUrl,
      dir,
      log: silentLogger,
      timeoutMs: 10_000,
      batchLines: 1,
    });
    try {
      await sink.shipOnce();
      const writer = AuditLogWriter.open({ dir, log: silentLogger });
      writer.close(); // its open and close records: lines not shipped yet
      const locker = new pg.Client({ connectionString: postgres.adminUrl });
      await locker.connect();
      await locker.query('BEGIN; LOCK TABLE hintbox.audit_log IN ACCESS EXCLUSIVE MODE');
      const pass = sink.shipOnce().then(
        (shipped) => shipped.held,
        (error: Error) => error,
      );
      await endWaitingInsert('audit_log');
      await delay(200);
      await locker.query('ROLLBACK');
      await locker.end();
      const cut = await pass;
      assert.ok(
        cut instanceof Error,
        `the cut pass fails as the database failing, holding no line: ${JSON.stringify(cut)}`,
      );
      // The next pass (no sweep, long before the 60 s a held line waits) ships everything.
      await sink.shipOnce({ sweep: false });
      const shipped = new Set((await rows()).map((r) => r.text));
      assert.deepEqual(
        linesOnDisk(dir).filter((l) => !shipped.has(l)),
        [],
        'every line in the database after the next pass',
      );
    } finally {
      await sink.close();
    }
  });

  // proves: AUDIT-SINK-DB-GONE
  it("hintbox serve goes on answering when the sink's database ends the session of a batch in flight (attack)", async () => {
    const auditDir = path.join(root, 'audit-serve-cut');
    const folder = mkdtempSync(path.join(root, 'profiles-'));
    const server = `faulty-sink-cut-${process.pid}`;
    writeFileSync(
      path.join(folder, 'faulty.yaml'),
      stringify({ name: server, server: { image: FAULTY_IMAGE }, trust: 'trusted', network: 'none' }),
    );
    const serving = await serve([folder], { HINTBOX_DATABASE_URL: postgres.adminUrl, HINTBOX_AUDIT_DIR: auditDir });
    const client = await connect(`${serving.url}/mcp/${server}`);
    const locker = new pg.Client({ connectionString: postgres.adminUrl });
    try {
      const echo = async (n: number): Promise<unknown> =>
        ((await client.callTool({ name: 'echo', arguments: { n } })) as { structuredContent?: unknown })
          .structuredContent;
      await echo(1);
      await eventually(
        async () => (await rows()).some((r) => r.text.includes('"n":1')),
        15_000,
        'the first call shipped',
      );
      await locker.connect();
      await locker.query('BEGIN; LOCK TABLE hintbox.audit_log IN ACCESS EXCLUSIVE MODE');
      await echo(2); // its lines: the next pass waits at the lock, its client checked out
      await endWaitingInsert('audit_log');
      await delay(500);
      await locker.query('ROLLBACK');
      assert.doesNotMatch(serving.stderr(), /hintbox failed|stopping/, 'serve never began to stop');
      assert.deepEqual(await echo(3), { n: 3, pad: 0 }, 'serve still answers');
      await eventually(async () => (await rows()).some((r) => r.text.includes('"n":3')), 30_000, 'the sink ships on');
      assert.equal(serving.child.exitCode, null, `serve still runs: ${serving.stderr().slice(-2000)}`);
    } finally {
      await locker.end().catch(() => undefined);
      await leave(client).catch(() => undefined);
      await stop(serving);
    }
  });

  it('hintbox audit ship ships a folder from the command line', async () => {
    const dir = path.join(root, 'audit-cli');
    const writer = AuditLogWriter.open({ dir, log: silentLogger });
    writeCalls(writer, 0, 3);
    writer.close();
    const env = { HINTBOX_AUDIT_DIR: dir, HINTBOX_DATABASE_URL: postgres.adminUrl };
    const first = await hintboxCommand(['audit', 'ship'], env);
    assert.equal(first.code, 0, first.stderr);
    assert.match(
      first.stdout,
      new RegExp(`^${linesOnDisk(dir).length} line\\(s\\) and 0 checkpoint\\(s\\) of .* shipped to postgres://`),
    );
    assert.doesNotMatch(first.stdout + first.stderr, /hintbox-test-admin/, 'never the password');
    assert.match((await hintboxCommand(['audit', 'ship'], env)).stdout, /^0 line\(s\)/);
  });
});
