import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CallGuard, type ClientChannel } from '../../src/gateway/call-guard.js';
import { effectiveHints, HINT_DEFAULTS } from '../../src/policy/hints.js';
import { pinTool } from '../../src/policy/tool-pin.js';
import { JournaledAuditLog, journalOwner, replayJournals, withAuditJournal } from '../../src/store/audit-journal.js';
import { openPgliteStateStore } from '../../src/store/pglite-state-store.js';
import {
  auditIntentRow,
  auditOutcomeRow,
  type AuditBatchEntry,
  type AuditIntent,
  type BatchAuditLog,
  type SqlStateStore,
} from '../../src/store/state-store.js';
import { createLogger, silentLogger, type Logger } from '../../src/util/logger.js';
import { pgliteFolders } from '../integration/support/pglite-folders.js';
import { ManualClock, READ_ONLY, sampleIntent } from '../integration/support/state-store-contract.js';

/**
 * The write-ahead audit journal in front of the real embedded store (PGlite in this process).
 * A store wrapper lets a test hold batches back or make them fail, as a slow or broken store
 * would.
 */

const { root, newFolder } = pgliteFolders('hintbox-journal-test-');
const host = os.hostname();

let sessions = 0;
function intent(partial: Partial<AuditIntent> = {}): AuditIntent {
  return sampleIntent({
    session: `session-${sessions}`,
    tags: [
      { name: ' FS ', source: 'profile' },
      { name: 'files', source: 'server' },
    ],
    arguments: { path: '/projects/README.md', n: 1 },
    ...partial,
  });
}

/** A logger that keeps its lines. */
function capturingLog(): Logger & { lines: string[] } {
  const lines: string[] = [];
  return Object.assign(
    createLogger('debug', (line) => lines.push(line)),
    { lines },
  );
}

/** The store's audit trail, with batches that a test can count, hold back, or make fail. */
interface ControlledStore {
  audit: BatchAuditLog;
  batches: AuditBatchEntry[][];
  /** The store is down: every write and read fails. */
  fail: boolean;
  /** The store answers, but refuses every batch that holds an entry this returns true for. */
  refuses?: (entry: AuditBatchEntry) => boolean;
  hold(): () => void;
}

function controlled(store: SqlStateStore): ControlledStore {
  let gate: Promise<void> | undefined;
  const control: ControlledStore = {
    batches: [],
    fail: false,
    hold: () => {
      let release!: () => void;
      gate = new Promise((resolve) => (release = resolve));
      return () => {
        gate = undefined;
        release();
      };
    },
    audit: {
      ...store.audit,
      recordBatch: async (entries) => {
        control.batches.push([...entries]);
        if (gate) await gate;
        if (control.fail) throw new Error('the store is down');
        if (control.refuses && entries.some(control.refuses)) throw new Error('invalid input syntax (refused)');
        return store.audit.recordBatch(entries);
      },
      get: async (id) => {
        if (control.fail) throw new Error('the store is down');
        return store.audit.get(id);
      },
      query: async (filter) => {
        if (control.fail) throw new Error('the store is down');
        return store.audit.query(filter);
      },
    },
  };
  return control;
}

function lines(file: string): unknown[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as unknown);
}

async function eventually(check: () => boolean | Promise<boolean>, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A pid no process has: a child that has already exited. */
function deadPid(): number {
  const pid = spawnSync(process.execPath, ['-e', '']).pid;
  assert.ok(pid !== undefined && pid > 0, 'a child pid');
  return pid;
}

/** Writes a journal file as process `pid` of `owner` would have left it. */
function writeJournal(dir: string, pid: number, text: string, owner = host): string {
  const file = path.join(dir, `${encodeURIComponent(owner)}.${pid}.${'0123456789abcdef'}.ndjson`);
  writeFileSync(file, text, { mode: 0o600 });
  return file;
}

function entryLine(entry: AuditBatchEntry): string {
  return JSON.stringify(entry) + '\n';
}

describe('the audit journal', () => {
  let store: SqlStateStore;
  let stateDir: string;
  let liveChild: ChildProcess;
  before(async () => {
    stateDir = await newFolder();
    store = await openPgliteStateStore({ dir: stateDir });
    liveChild = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  });
  after(async () => {
    liveChild.kill('SIGKILL');
    await store.close();
  });

  const newDir = () => mkdtempSync(path.join(root, 'journal-'));
  const session = () => `session-${++sessions}`;

  it('has the intent in its file before recordIntent returns, and in the store after the flush', async () => {
    const control = controlled(store);
    const release = control.hold();
    const clock = new ManualClock();
    clock.set('2026-04-01T09:00:00.000Z');
    const journal = new JournaledAuditLog({ store: control.audit, dir: newDir(), log: capturingLog(), clock });
    try {
      const s = session();
      assert.equal(statSync(journal.file).mode & 0o777, 0o600, 'the journal is owner-only');
      assert.equal(statSync(path.dirname(journal.file)).mode & 0o777, 0o700, 'its folder too');
      assert.deepEqual(journalOwner(journal.file), { host, pid: process.pid });

      const id = await journal.recordIntent(intent({ session: s }));
      // Read right away, while the store holds every batch back: the line is in the file.
      const [line] = lines(journal.file) as AuditBatchEntry[];
      assert.deepEqual(line, {
        kind: 'intent',
        id,
        at: '2026-04-01T09:00:00.000Z',
        intent: auditIntentRow(intent({ session: s })),
      });
      assert.equal(await store.audit.get(id), undefined, 'not in the store yet');

      clock.advance(40);
      await journal.recordOutcome(id, { outcome: 'ok' });
      assert.equal(lines(journal.file).length, 2, 'the outcome is journaled too');
      release();
      await journal.flushed();
      const record = await store.audit.get(id);
      assert.deepEqual(record, {
        id,
        time: new Date('2026-04-01T09:00:00.000Z'),
        session: s,
        server: 'filesystem',
        tool: 'read_text_file',
        tags: [
          { name: 'fs', source: 'profile' },
          { name: 'files', source: 'server' },
        ],
        claimedHints: { readOnlyHint: true, openWorldHint: false },
        effectiveHints: READ_ONLY,
        sandbox: 'ro-offline',
        decision: 'allowed',
        decidedBy: 'auto',
        arguments: { path: '/projects/README.md', n: 1 },
        pinHash: 'a'.repeat(64),
        outcome: 'ok',
        detail: null,
        hintViolation: null,
        attempts: 1,
        endedAt: new Date('2026-04-01T09:00:00.040Z'),
        durationMs: 40,
      });
      assert.equal(statSync(journal.file).size, 0, 'the journal is emptied once the store has everything');
    } finally {
      await journal.close();
    }
  });

  it('writes to the store in batches, one statement each, and keeps the exact arguments', async () => {
    const control = controlled(store);
    const journal = new JournaledAuditLog({ store: control.audit, dir: newDir(), log: capturingLog() });
    try {
      const s = session();
      const ids = await Promise.all(
        Array.from({ length: 200 }, (_, n) =>
          journal.recordIntent(intent({ session: s, arguments: { n, text: 'é\u0000\u2028"' } })),
        ),
      );
      await Promise.all(ids.map((id, n) => journal.recordOutcome(id, { outcome: n % 2 ? 'ok' : 'tool-error' })));
      await journal.flushed();
      const records = await store.audit.query({ session: s, limit: 1000 });
      assert.equal(records.length, 200, 'every record is in the store');
      assert.ok(
        records.every((r) => r.outcome !== null),
        'every record has its outcome',
      );
      assert.deepEqual(records.find((r) => r.id === ids[7])?.arguments, { n: 7, text: 'é\u0000\u2028"' });
      assert.ok(control.batches.length < 20, `400 entries went in few batches (${control.batches.length})`);
      assert.equal(statSync(journal.file).size, 0, 'the journal is emptied');
    } finally {
      await journal.close();
    }
  });

  it('gathers what arrives while a batch is in flight, and right after, into one next batch', async () => {
    const control = controlled(store);
    const journal = new JournaledAuditLog({
      store: control.audit,
      dir: newDir(),
      log: capturingLog(),
      flushDelayMs: 200,
      holdOpenMs: 0, // intents alone here: they must not wait for outcomes
    });
    try {
      const s = session();
      const release = control.hold();
      await journal.recordIntent(intent({ session: s }));
      await eventually(() => control.batches.length === 1, 'the first batch is in flight');
      for (let i = 0; i < 3; i++) await journal.recordIntent(intent({ session: s }));
      release();
      await eventually(() => journal.backlog === 3, 'the first batch is stored');
      for (let i = 0; i < 2; i++) await journal.recordIntent(intent({ session: s }));
      await journal.flushed();
      // Going on at once would have sent the 3 alone, then the 2: a statement per few entries.
      assert.deepEqual(
        control.batches.map((b) => b.length),
        [1, 5],
        'one batch for the entries of the flight and of the delay after it',
      );
      assert.equal((await store.audit.query({ session: s })).length, 6, 'all six are in the store');
    } finally {
      await journal.close();
    }
  });

  it("keeps a running call's intent back until its outcome, so that the two are written as one record", async () => {
    const control = controlled(store);
    const journal = new JournaledAuditLog({
      store: control.audit,
      dir: newDir(),
      log: capturingLog(),
      flushDelayMs: 10,
      holdOpenMs: 60_000,
    });
    const alone = new JournaledAuditLog({
      store: control.audit,
      dir: newDir(),
      log: capturingLog(),
      flushDelayMs: 10,
      holdOpenMs: 50,
    });
    try {
      const s = session();
      const id = await journal.recordIntent(intent({ session: s }));
      assert.ok(lines(journal.file).length === 1, 'the intent is in the journal at once');
      await new Promise((r) => setTimeout(r, 150));
      assert.equal(control.batches.length, 0, 'no batch while its call runs');
      await journal.recordOutcome(id, { outcome: 'ok' });
      await eventually(() => control.batches.length === 1, 'a batch once the call ended');
      assert.deepEqual(
        control.batches[0]?.map((e) => [e.kind, e.id]),
        [
          ['intent', id],
          ['outcome', id],
        ],
        'intent and outcome in one batch (one row in the store)',
      );
      await eventually(async () => (await store.audit.get(id))?.outcome === 'ok', 'the record is complete');

      // A call that runs longer than the hold: its intent goes alone, the outcome later.
      const long = await alone.recordIntent(intent({ session: s }));
      await eventually(() => control.batches.length === 2, 'the intent alone after the hold');
      assert.deepEqual(
        control.batches[1]?.map((e) => e.kind),
        ['intent'],
      );
      assert.equal((await store.audit.get(long))?.outcome, null, 'in the store, without its outcome yet');

      // A reader does not wait for the hold: get() sends what is held at once.
      const held = await journal.recordIntent(intent({ session: s }));
      const record = await journal.get(held);
      assert.equal(record?.id, held, 'a reader of this journal sees the running call');
      await journal.recordOutcome(held, { outcome: 'ok' });
      await alone.recordOutcome(long, { outcome: 'tool-error' });
    } finally {
      await journal.close();
      await alone.close();
    }
    assert.equal(control.batches.flat().length, 6, 'every entry went to the store, once');
  });

  it('refuses an intent or outcome the store would refuse, and journals nothing for it', async () => {
    const journal = new JournaledAuditLog({ store: store.audit, dir: newDir(), log: capturingLog() });
    try {
      await assert.rejects(
        journal.recordIntent(intent({ decision: 'allowed', decidedBy: 'timeout' })),
        /decidedBy of a allowed call/,
      );
      await assert.rejects(journal.recordIntent(intent({ session: '' })), /session/);
      assert.equal(readFileSync(journal.file, 'utf8'), '', 'nothing journaled');

      const denied = await journal.recordIntent(
        intent({ session: session(), decision: 'denied', decidedBy: 'person' }),
      );
      await assert.rejects(journal.recordOutcome(denied, { outcome: 'ok' }), /contradicts decision denied/);
      await assert.rejects(journal.recordOutcome(denied, { outcome: 'not-run', attempts: 0 }), /attempts/);
      await assert.rejects(journal.recordOutcome('no-such-call', { outcome: 'ok' }), /no audit record no-such-call/);
      await journal.recordOutcome(denied, { outcome: 'not-run' });
      await assert.rejects(journal.recordOutcome(denied, { outcome: 'not-run' }), /outcome is recorded/);
      assert.equal((await journal.get(denied))?.outcome, 'not-run', 'reads see what this process recorded');
    } finally {
      await journal.close();
    }
  });

  it('refuses new intents while the store fails, loses nothing, and writes everything once it recovers', async () => {
    const control = controlled(store);
    const log = capturingLog();
    const journal = new JournaledAuditLog({ store: control.audit, dir: newDir(), log, retryMs: 20, maxRetryMs: 50 });
    try {
      const s = session();
      control.fail = true;
      const first = await journal.recordIntent(intent({ session: s }));
      await journal.flushed();
      assert.match(String(journal.storeFailure?.message), /the store is down/);
      await assert.rejects(journal.recordIntent(intent({ session: s })), (error: Error) => {
        assert.match(error.message, /the audit store is failing \(the store is down\); new calls are refused/);
        return true;
      });
      // The call that did go ahead still gets its outcome journaled.
      await journal.recordOutcome(first, { outcome: 'ok', detail: 'ran while the store was down' });
      assert.deepEqual(
        lines(journal.file).map((l) => (l as AuditBatchEntry).kind),
        ['intent', 'outcome'],
        'both are in the journal',
      );
      await new Promise((r) => setTimeout(r, 150)); // a few retries, all failing
      assert.ok(control.batches.length >= 3, `retried (${control.batches.length} attempts)`);
      assert.equal(
        log.lines.filter((l) => l.includes('the audit store failed')).length,
        1,
        `one error line, not one per retry:\n${log.lines.join('\n')}`,
      );
      assert.equal(await store.audit.get(first), undefined, 'nothing reached the store');

      control.fail = false;
      await eventually(() => journal.storeFailure === undefined && journal.backlog === 0, 'the store caught up');
      const record = await store.audit.get(first);
      assert.equal(record?.outcome, 'ok');
      assert.equal(record?.detail, 'ran while the store was down');
      assert.equal((await store.audit.query({ session: s })).length, 1, 'the refused intent was never recorded');
      assert.ok(
        log.lines.some((l) => l.includes('the audit store works again')),
        'the recovery is logged',
      );
      const again = await journal.recordIntent(intent({ session: s }));
      assert.ok(again, 'intents are accepted again');
    } finally {
      await journal.close();
    }
  });

  it('lets no single record stop the trail: one the store refuses is set aside, the others go in, calls go on', async () => {
    const control = controlled(store);
    const log = capturingLog();
    const dir = newDir();
    const journal = new JournaledAuditLog({ store: control.audit, dir, log, retryMs: 5, maxRetryMs: 20 });
    try {
      const s = session();
      const ids: string[] = [];
      // The poison: a record the store refuses, here for something in its arguments.
      control.refuses = (entry) => entry.kind === 'intent' && String(entry.intent.arguments).includes('POISON');
      const poisonArgs = { content: 'POISON' };
      for (let i = 0; i < 40; i++) {
        const id = await journal.recordIntent(
          intent({ session: s, tool: `tool_${i}`, ...(i === 17 ? { arguments: poisonArgs } : {}) }),
        );
        await journal.recordOutcome(id, { outcome: 'tool-error', detail: `answer ${i}` });
        ids.push(id);
      }
      await eventually(() => journal.backlog === 0, 'every entry is dealt with');
      assert.equal(journal.storeFailure, undefined, 'the store is not failing: it refused one record');
      const later = await journal.recordIntent(intent({ session: s, tool: 'later' }));
      await journal.recordOutcome(later, { outcome: 'ok' });
      await journal.flushed();

      const records = await store.audit.query({ session: s });
      assert.equal(records.length, 41, 'every call has its record, the refused one and the later one too');
      const poison = records.find((r) => r.id === ids[17])!;
      assert.equal(poison.tool, 'tool_17');
      assert.equal(poison.outcome, 'tool-error', 'its outcome went in');
      assert.match(JSON.stringify(poison.arguments), /not stored: the store refused this record.*SHA-256 [0-9a-f]{64}/);
      const refusedFile = `${journal.file}.refused`;
      const [kept] = lines(refusedFile) as AuditBatchEntry[];
      assert.equal(kept?.id, ids[17], 'the whole entry is kept beside the journal');
      assert.equal((kept as { intent: { arguments: string } }).intent.arguments, JSON.stringify(poisonArgs));
      assert.ok(
        log.lines.some((l) => l.includes(`the audit store refused one record`) && l.includes(refusedFile)),
        log.lines.join('\n'),
      );
      assert.ok(
        records.filter((r) => r.id !== ids[17]).every((r) => !JSON.stringify(r.arguments).includes('not stored')),
        'the others are stored whole',
      );
    } finally {
      await journal.close();
    }
  });

  it('does not set a record aside when the store refuses every write (a full disk): it fails closed', async () => {
    const control = controlled(store);
    const journal = new JournaledAuditLog({ store: control.audit, dir: newDir(), log: capturingLog(), retryMs: 5 });
    try {
      const s = session();
      control.refuses = () => true; // reads work, every write is refused
      const first = await journal.recordIntent(intent({ session: s }));
      await journal.recordOutcome(first, { outcome: 'ok' });
      await eventually(() => journal.storeFailure !== undefined, 'the store is seen failing');
      await assert.rejects(journal.recordIntent(intent({ session: s })), /new calls are refused/);
      assert.equal(existsSync(`${journal.file}.refused`), false, 'nothing is set aside');
      control.refuses = undefined;
      await eventually(() => journal.backlog === 0 && journal.storeFailure === undefined, 'the store caught up');
      const [record] = await store.audit.query({ session: s });
      assert.deepEqual(record?.arguments, intent().arguments, 'stored whole once the store took it');
    } finally {
      await journal.close();
    }
  });

  it('close() flushes everything and removes the journal file', async () => {
    const control = controlled(store);
    const release = control.hold();
    const journal = new JournaledAuditLog({ store: control.audit, dir: newDir(), log: capturingLog() });
    const s = session();
    const id = await journal.recordIntent(intent({ session: s }));
    await journal.recordOutcome(id, { outcome: 'cancelled' });
    setTimeout(release, 50);
    await journal.close();
    assert.equal(existsSync(journal.file), false, 'the journal file is gone');
    assert.equal((await store.audit.get(id))?.outcome, 'cancelled');
    await assert.rejects(journal.recordIntent(intent({ session: s })), /the audit journal is closed/);
  });

  it('close() keeps the journal when the store does not take it, says so, and a replay writes it', async () => {
    const control = controlled(store);
    control.fail = true;
    const log = capturingLog();
    const dir = newDir();
    const journal = new JournaledAuditLog({ store: control.audit, dir, log, closeTimeoutMs: 200, retryMs: 20 });
    const s = session();
    const id = await journal.recordIntent(intent({ session: s }));
    await journal.close();
    assert.ok(existsSync(journal.file), 'the journal file is kept');
    assert.ok(
      log.lines.some((l) => /1 audit record\(s\) did not reach the store .* kept in .*next hintbox run/.test(l)),
      `close says so:\n${log.lines.join('\n')}`,
    );
    // This process no longer writes it: a replay (in the next run) takes it.
    const replayed = await replayJournals({ dir, store: store.audit, log });
    assert.deepEqual(replayed, { files: 1, entries: 1, skipped: 0 });
    assert.equal((await store.audit.get(id))?.outcome, null);
    assert.equal(existsSync(journal.file), false, 'removed once replayed');
  });

  it("replays a dead process's rotated journals together, intents first, whatever their names' order", async () => {
    const dir = newDir();
    const pid = deadPid();
    const s = session();
    const id = `${s}-rotated`;
    // The outcome went to the fresh file after a rotation; its name sorts first.
    const named = (suffix: string, text: string) =>
      writeFileSync(path.join(dir, `${encodeURIComponent(host)}.${pid}.${suffix}.ndjson`), text, { mode: 0o600 });
    named(
      '0000000000000000',
      entryLine({ kind: 'outcome', id, at: '2026-04-03T10:00:01.000Z', outcome: auditOutcomeRow({ outcome: 'ok' }) }),
    );
    named(
      'ffffffffffffffff',
      entryLine({ kind: 'intent', id, at: '2026-04-03T10:00:00.000Z', intent: auditIntentRow(intent({ session: s })) }),
    );
    assert.deepEqual(await replayJournals({ dir, store: store.audit, log: capturingLog() }), {
      files: 2,
      entries: 2,
      skipped: 0,
    });
    const record = await store.audit.get(id);
    assert.equal(record?.outcome, 'ok', 'the outcome found its record');
    assert.deepEqual(readdirSync(dir), [], 'both files are removed');
  });

  it("replays a dead process's journal exactly once, even when replayed twice", async () => {
    const dir = newDir();
    const pid = deadPid();
    const s = session();
    const a = intent({ session: s, tool: 'write_file', effectiveHints: HINT_DEFAULTS, decidedBy: 'person' });
    const text =
      entryLine({ kind: 'intent', id: `${s}-a`, at: '2026-04-02T10:00:00.000Z', intent: auditIntentRow(a) }) +
      entryLine({ kind: 'intent', id: `${s}-b`, at: '2026-04-02T10:00:00.001Z', intent: auditIntentRow(intent()) }) +
      entryLine({
        kind: 'outcome',
        id: `${s}-a`,
        at: '2026-04-02T10:00:02.000Z',
        outcome: auditOutcomeRow({ outcome: 'tool-error', attempts: 2 }),
      });
    const log = capturingLog();
    const file = writeJournal(dir, pid, text);
    assert.deepEqual(await replayJournals({ dir, store: store.audit, log }), { files: 1, entries: 3, skipped: 0 });
    assert.equal(existsSync(file), false, 'the replayed journal is removed');
    assert.ok(
      log.lines.some((l) => l.includes(`process ${pid}`)),
      `the replay is logged:\n${log.lines.join('\n')}`,
    );

    writeJournal(dir, pid, text); // as if two processes had replayed it at once
    assert.deepEqual(await replayJournals({ dir, store: store.audit, log }), { files: 1, entries: 3, skipped: 0 });
    const records = await store.audit.query({ session: s });
    assert.deepEqual(
      records.map((r) => [r.id, r.tool, r.outcome, r.attempts, r.durationMs]),
      [
        [`${s}-b`, 'read_text_file', null, null, null],
        [`${s}-a`, 'write_file', 'tool-error', 2, 2000],
      ],
      'each record once; the crash between intent and outcome shows as no outcome',
    );

    // The intent reached the store before the crash; only its outcome was still journaled.
    writeJournal(
      dir,
      pid,
      entryLine({
        kind: 'outcome',
        id: `${s}-b`,
        at: '2026-04-02T10:00:00.501Z',
        outcome: auditOutcomeRow({ outcome: 'ok' }),
      }) +
        entryLine({
          kind: 'outcome',
          id: `${s}-a`,
          at: '2026-04-02T10:00:09.000Z',
          outcome: auditOutcomeRow({ outcome: 'ok' }),
        }),
    );
    await replayJournals({ dir, store: store.audit, log });
    assert.equal((await store.audit.get(`${s}-b`))?.durationMs, 500, 'the outcome completes the stored intent');
    assert.equal((await store.audit.get(`${s}-a`))?.outcome, 'tool-error', 'the first outcome stands');
  });

  it('skips a torn last line with a warning, and replays the rest', async () => {
    const dir = newDir();
    const s = session();
    const whole = entryLine({
      kind: 'intent',
      id: `${s}-whole`,
      at: '2026-04-03T10:00:00.000Z',
      intent: auditIntentRow(intent({ session: s })),
    });
    const torn = entryLine({
      kind: 'intent',
      id: `${s}-torn`,
      at: '2026-04-03T10:00:00.001Z',
      intent: auditIntentRow(intent({ session: s })),
    }).slice(0, 100);
    const log = capturingLog();
    writeJournal(dir, deadPid(), whole + torn);
    assert.deepEqual(await replayJournals({ dir, store: store.audit, log }), { files: 1, entries: 1, skipped: 1 });
    assert.deepEqual(
      (await store.audit.query({ session: s })).map((r) => r.id),
      [`${s}-whole`],
    );
    assert.ok(
      log.lines.some((l) => /skipped its torn last line \(100 bytes\)/.test(l)),
      `a warning:\n${log.lines.join('\n')}`,
    );
  });

  it("replays a dead process's journal past a record the store refuses: set aside, the others written", async () => {
    const dir = newDir();
    const s = session();
    const control = controlled(store);
    control.refuses = (entry) => entry.kind === 'intent' && String(entry.intent.arguments).includes('POISON');
    const entries: AuditBatchEntry[] = [0, 1, 2].map((i) => ({
      kind: 'intent',
      id: `${s}-${i}`,
      at: `2026-04-03T11:00:00.00${i}Z`,
      intent: auditIntentRow(intent({ session: s, ...(i === 1 ? { arguments: { content: 'POISON' } } : {}) })),
    }));
    const file = writeJournal(dir, deadPid(), entries.map(entryLine).join(''));
    const log = capturingLog();
    assert.deepEqual(await replayJournals({ dir, store: control.audit, log }), { files: 1, entries: 3, skipped: 0 });
    const records = await store.audit.query({ session: s });
    assert.deepEqual(records.map((r) => r.id).sort(), [`${s}-0`, `${s}-1`, `${s}-2`]);
    assert.match(JSON.stringify(records.find((r) => r.id === `${s}-1`)?.arguments), /not stored: the store refused/);
    assert.equal(existsSync(file), false, 'the journal is replayed and removed');
    assert.deepEqual(lines(`${file}.refused`), [entries[1]], 'the refused entry is kept whole');
    assert.ok(log.lines.some((l) => l.includes('the audit store refused one record')));
  });

  it("leaves the journals of live processes, of other hosts, and this process's own alone", async () => {
    const dir = newDir();
    const s = session();
    const text = entryLine({
      kind: 'intent',
      id: `${s}-x`,
      at: '2026-04-04T10:00:00.000Z',
      intent: auditIntentRow(intent({ session: s })),
    });
    assert.ok(liveChild.pid, 'a live child');
    const live = writeJournal(dir, liveChild.pid, text);
    const otherHost = writeJournal(dir, deadPid(), text, `not-${host}`);
    const control = controlled(store);
    control.hold(); // never released: the journal keeps its entry
    const own = new JournaledAuditLog({ store: control.audit, dir, log: capturingLog(), closeTimeoutMs: 50 });
    await own.recordIntent(intent({ session: s }));

    assert.deepEqual(await replayJournals({ dir, store: store.audit, log: capturingLog() }), {
      files: 0,
      entries: 0,
      skipped: 0,
    });
    for (const file of [live, otherHost, own.file]) assert.ok(existsSync(file), `${file} is left alone`);
    assert.deepEqual(await store.audit.query({ session: s }), [], 'nothing of theirs was written');
    await own.close();
    assert.equal(readdirSync(dir).length, 3, 'the three journals are still there');
  });

  it('keeps the records of a run killed with SIGKILL between intent and outcome, and replays them into the store', async () => {
    const dir = newDir();
    const s = session();
    // The child journals through a store that never answers (as if slow), then dies.
    const code = `
      const { JournaledAuditLog } = await import(process.env.JOURNAL_MODULE);
      const { silentLogger } = await import(process.env.LOGGER_MODULE);
      const never = () => new Promise(() => {});
      const store = { recordBatch: never, recordIntent: never, recordOutcome: never, get: never, query: never };
      const journal = new JournaledAuditLog({ store, dir: process.env.JOURNAL_DIR, log: silentLogger });
      const intent = JSON.parse(process.env.INTENT);
      const done = await journal.recordIntent(intent);
      await journal.recordOutcome(done, { outcome: 'ok' });
      const running = await journal.recordIntent(intent);
      process.stdout.write(JSON.stringify([done, running]) + '\\n', () => process.kill(process.pid, 'SIGKILL'));
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
      env: {
        ...process.env,
        JOURNAL_MODULE: new URL('../../src/store/audit-journal.ts', import.meta.url).href,
        LOGGER_MODULE: new URL('../../src/util/logger.ts', import.meta.url).href,
        JOURNAL_DIR: dir,
        INTENT: JSON.stringify(intent({ session: s })),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_c, sig) => resolve(sig)));
    assert.equal(signal, 'SIGKILL', `the child died by SIGKILL; stderr:\n${stderr}`);
    const [done, running] = JSON.parse(stdout) as [string, string];

    const replayed = await replayJournals({ dir, store: store.audit, log: capturingLog() });
    assert.deepEqual(replayed, { files: 1, entries: 3, skipped: 0 });
    assert.equal((await store.audit.get(done))?.outcome, 'ok', 'the finished call has its outcome');
    const crashed = await store.audit.get(running);
    assert.ok(crashed, 'the call in flight when the process died is recorded');
    assert.equal(crashed.outcome, null, 'without an outcome: the record says the process stopped during the call');
    assert.deepEqual(readdirSync(dir), [], 'the journal is removed');
  });

  it('makes the guard refuse calls while the audit store fails (fail closed)', async () => {
    const control = controlled(store);
    const journal = new JournaledAuditLog({ store: control.audit, dir: newDir(), log: silentLogger, retryMs: 20 });
    const claimed = { readOnlyHint: true, openWorldHint: false };
    const guard = new CallGuard({
      server: 'fs',
      session: session(),
      trust: 'trusted',
      tools: new Map([
        [
          'read',
          {
            name: 'read',
            sandbox: 'ro-offline',
            claimed,
            effective: effectiveHints(claimed),
            annotationsMissing: false,
            enforced: true,
            tags: [],
            pin: pinTool({ name: 'read', inputSchema: { type: 'object' }, annotations: claimed }),
            pinState: 'approved',
          },
        ],
      ]),
      preApprovals: [],
      audit: journal,
      approvalTimeoutMs: 1000,
      profileFile: '/profiles/fs.yaml',
      log: silentLogger,
    });
    const nobody: ClientChannel = { canElicit: () => false, elicit: () => Promise.reject(new Error('not asked')) };
    try {
      const admitted = await guard.admit('read', { path: '/a' }, nobody);
      assert.equal(admitted.allowed, true, 'a trusted, enforced read-only call runs');
      control.fail = true;
      // The outcome goes to the journal; the batch carrying it fails.
      if (admitted.allowed) guard.finish(admitted.auditId, { outcome: 'ok' });
      await eventually(() => journal.storeFailure !== undefined, 'the store failure is noticed');
      const refused = await guard.admit('read', { path: '/b' }, nobody);
      assert.equal(refused.allowed, false, 'refused while the store fails');
      if (!refused.allowed) {
        assert.match(
          JSON.stringify(refused.result.content),
          /the audit trail cannot record it \(the audit store is failing/,
        );
      }
      control.fail = false;
      await eventually(() => journal.storeFailure === undefined, 'the store recovers');
      assert.equal((await guard.admit('read', { path: '/c' }, nobody)).allowed, true, 'calls run again');
    } finally {
      await journal.close();
    }
    const records = await store.audit.query({ server: 'fs', tool: 'read', limit: 10 });
    assert.deepEqual(
      records.map((r) => [(r.arguments as { path: string }).path, r.outcome]),
      [
        ['/c', null],
        ['/a', 'ok'],
      ],
      'the refused call left no record; the others are all in the store',
    );
  });

  it('opens a journaled store: replays dead journals first, pins go straight to the store, close flushes', async () => {
    const ownDir = await newFolder();
    const own = await openPgliteStateStore({ dir: ownDir });
    const dir = newDir();
    const s = session();
    writeJournal(
      dir,
      deadPid(),
      entryLine({
        kind: 'intent',
        id: `${s}-crashed`,
        at: '2026-04-05T10:00:00.000Z',
        intent: auditIntentRow(intent({ session: s })),
      }),
    );
    const journaled = await withAuditJournal(own, { dir, log: silentLogger });
    assert.equal((await own.audit.get(`${s}-crashed`))?.session, s, 'the dead journal was replayed at open');
    assert.ok(journaled.audit instanceof JournaledAuditLog, 'the audit trail is the journal');
    assert.equal(journaled.pins, own.pins, "pins are the store's");
    const id = await journaled.audit.recordIntent(intent({ session: s }));
    const file = journaled.audit.file;
    await journaled.close();
    assert.equal(existsSync(file), false, 'the journal is removed on close');
    const reopened = await openPgliteStateStore({ dir: ownDir });
    try {
      assert.equal((await reopened.audit.get(id))?.session, s, 'the record reached the store before it closed');
    } finally {
      await reopened.close();
    }
  });
});
