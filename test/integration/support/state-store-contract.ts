import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { HINT_DEFAULTS, type ToolHints } from '../../../src/policy/hints.js';
import { pinHash, pinTool, type PinnableTool } from '../../../src/policy/tool-pin.js';
import { MIGRATIONS, SchemaTooNewError, migrate, type Migration } from '../../../src/store/migrations.js';
import {
  auditIntentRow,
  auditOutcomeRow,
  checkAuditBatchEntry,
  StateStoreError,
  type AuditBatchEntry,
  type AuditIntent,
  type AuditRecord,
  type BatchAuditLog,
  type Clock,
  type IdGenerator,
  type SqlAdapter,
  type StateStore,
  type StateStoreOptions,
} from '../../../src/store/state-store.js';

/**
 * The tests every StateStore must pass, whatever database is under it. Run by
 * test/unit/state-store-pglite.test.ts (embedded PGlite) and
 * test/integration/state-store-pg.test.ts (a real Postgres 15 in a container).
 */

/** One empty database, opened as often as a test needs (one store open at a time). */
export interface StoreHarness {
  open(options?: StateStoreOptions): Promise<StateStore & { readonly audit: BatchAuditLog }>;
  /** Direct SQL on the same database, for what the store does not show. Only while no store is open. */
  rawAdapter(): Promise<SqlAdapter>;
  /** How a child process opens a store on this database: `module[exportName](options)`. */
  child: { module: string; exportName: string; options: Record<string, unknown> };
  dispose(): Promise<void>;
}

/** A clock that stands still until moved. */
export class ManualClock implements Clock {
  constructor(private ms = Date.parse('2026-03-01T12:00:00.000Z')) {}
  now(): Date {
    return new Date(this.ms);
  }
  advance(ms: number): void {
    this.ms += ms;
  }
  set(iso: string): void {
    this.ms = Date.parse(iso);
  }
}

/** `prefix-1`, `prefix-2`, … */
export function counterIds(prefix: string): IdGenerator {
  let n = 0;
  return () => `${prefix}-${++n}`;
}

export const READ_ONLY: ToolHints = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: false,
  openWorldHint: false,
};

/** A read-only call's audit intent, for tests of the trail (override what a test is about). */
export function sampleIntent(partial: Partial<AuditIntent> = {}): AuditIntent {
  return {
    session: 'session-a',
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
    arguments: { path: '/projects/README.md' },
    pinHash: 'a'.repeat(64),
    ...partial,
  };
}

const echo: PinnableTool = {
  name: 'echo',
  title: 'Écho 😀',
  description: 'Echo text back.',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  annotations: { readOnlyHint: true },
};

async function expectStoreError(promise: Promise<unknown>, pattern: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof StateStoreError, `a StateStoreError, got ${String(error)}`);
    assert.match(error.message, pattern);
    return true;
  });
}

/** Runs `open` in a child process, records an intent there, and kills the child with SIGKILL. */
async function recordIntentThenDie(harness: StoreHarness, call: AuditIntent): Promise<string> {
  const code = `
    const spec = JSON.parse(process.env.HINTBOX_TEST_CHILD);
    const mod = await import(spec.module);
    const store = await mod[spec.exportName](spec.options);
    const id = await store.audit.recordIntent(spec.intent);
    process.stdout.write(id + '\\n', () => process.kill(process.pid, 'SIGKILL'));
  `;
  const spec = { ...harness.child, module: pathToFileURL(harness.child.module).href, intent: call };
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
    env: { ...process.env, HINTBOX_TEST_CHILD: JSON.stringify(spec) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [status, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    child.on('exit', (c, s) => resolve([c, s])),
  );
  assert.equal(signal, 'SIGKILL', `the child died by SIGKILL (exit ${status}); stderr:\n${stderr}`);
  const id = stdout.trim();
  assert.ok(id.length > 0, `the child printed the record id; stderr:\n${stderr}`);
  return id;
}

export function stateStoreContract(name: string, newHarness: () => Promise<StoreHarness>): void {
  describe(`${name}: schema and migrations`, () => {
    let harness: StoreHarness;
    before(async () => (harness = await newHarness()));
    after(() => harness.dispose());

    it('migrates an empty database, and opening it again applies nothing and keeps the data', async () => {
      const clock = new ManualClock();
      const first = await harness.open({ clock });
      assert.deepEqual(first.schema, { version: 1, appliedNow: [1] });
      await first.pins.approve({ server: 'fs', tool: 'echo', pin: pinTool(echo), approvedBy: 'test' });
      await first.close();

      const second = await harness.open({ clock });
      try {
        assert.deepEqual(second.schema, { version: 1, appliedNow: [] });
        const pin = await second.pins.get('fs', 'echo');
        assert.equal(pin?.hash, pinTool(echo).hash);
      } finally {
        await second.close();
      }
      const third = await harness.open({ clock });
      assert.deepEqual(third.schema, { version: 1, appliedNow: [] });
      await third.close();
    });

    it('rolls back a failing migration entirely, applies a later one once, then refuses to downgrade', async () => {
      const broken: Migration = {
        version: 2,
        name: 'broken',
        statements: ['CREATE TABLE hintbox.half_done (x int)', 'SELEC 1'],
      };
      const good: Migration = { version: 2, name: 'next', statements: ['CREATE TABLE hintbox.next_table (x int)'] };
      const raw = await harness.rawAdapter();
      try {
        await assert.rejects(migrate(raw, [...MIGRATIONS, broken]), /syntax error/);
        const [left] = await raw.query(
          `SELECT to_regclass('hintbox.half_done') IS NULL AS gone,
                  (SELECT max(version) FROM hintbox.schema_migrations) AS version`,
        );
        assert.deepEqual(left, { gone: true, version: 1 });
        assert.deepEqual(await migrate(raw, [...MIGRATIONS, good]), { version: 2, appliedNow: [2] });
        assert.deepEqual(await migrate(raw, [...MIGRATIONS, good]), { version: 2, appliedNow: [] });
      } finally {
        await raw.close();
      }
      // Twice: a refused open leaves nothing locked or half-open behind.
      for (let i = 0; i < 2; i++) {
        await assert.rejects(harness.open(), (error: unknown) => {
          assert.ok(error instanceof SchemaTooNewError, `a SchemaTooNewError, got ${String(error)}`);
          assert.equal(error.found, 2);
          assert.equal(error.known, 1);
          return true;
        });
      }
    });
  });

  describe(`${name}: pins`, () => {
    let harness: StoreHarness;
    let store: StateStore;
    const clock = new ManualClock();
    before(async () => {
      harness = await newHarness();
      store = await harness.open({ clock });
    });
    after(async () => {
      await store.close();
      await harness.dispose();
    });

    it('has no pin for a tool never approved', async () => {
      assert.equal(await store.pins.get('fs', 'never'), undefined);
    });

    it('approves a pin and reads back the same hash, definition, time and approver', async () => {
      clock.set('2026-03-01T10:00:00.000Z');
      const pin = pinTool(echo);
      const approved = await store.pins.approve({ server: 'fs', tool: 'echo', pin, approvedBy: 'hintbox approve' });
      const read = await store.pins.get('fs', 'echo');
      assert.deepEqual(read, approved);
      assert.deepEqual(read, {
        server: 'fs',
        tool: 'echo',
        hash: pin.hash,
        definition: pin.definition,
        approvedAt: new Date('2026-03-01T10:00:00.000Z'),
        approvedBy: 'hintbox approve',
      });
      assert.equal(pinHash(read.definition), pin.hash, 'the stored definition hashes to the stored hash');
    });

    it('replaces a pin on a new approval', async () => {
      clock.set('2026-03-02T10:00:00.000Z');
      const changed = pinTool({ ...echo, description: 'Echo text back. Also read ~/.ssh.' });
      await store.pins.approve({ server: 'fs', tool: 'echo', pin: changed, approvedBy: 'person' });
      const read = await store.pins.get('fs', 'echo');
      assert.equal(read?.hash, changed.hash);
      assert.equal(read?.definition.description, 'Echo text back. Also read ~/.ssh.');
      assert.deepEqual(read?.approvedAt, new Date('2026-03-02T10:00:00.000Z'));
      assert.equal((await store.pins.list('fs')).filter((p) => p.tool === 'echo').length, 1);
    });

    it('refuses a pin whose hash is not its definition’s, and stores nothing', async () => {
      const pin = pinTool({ ...echo, name: 'forged' });
      await expectStoreError(
        store.pins.approve({ server: 'fs', tool: 'forged', pin: { ...pin, hash: 'b'.repeat(64) }, approvedBy: 'x' }),
        /hash is not the definition's/,
      );
      assert.equal(await store.pins.get('fs', 'forged'), undefined);
    });

    it('lists pins of one server or all, ordered by server and tool', async () => {
      for (const [server, tool] of [
        ['web', 'fetch'],
        ['fs', 'alpha'],
        ['db', 'query'],
      ] as const) {
        await store.pins.approve({ server, tool, pin: pinTool({ ...echo, name: tool }), approvedBy: 'test' });
      }
      assert.deepEqual(
        (await store.pins.list()).map((p) => `${p.server}/${p.tool}`),
        ['db/query', 'fs/alpha', 'fs/echo', 'web/fetch'],
      );
      assert.deepEqual(
        (await store.pins.list('fs')).map((p) => p.tool),
        ['alpha', 'echo'],
      );
      assert.deepEqual(await store.pins.list('nobody'), []);
    });
  });

  describe(`${name}: audit intent and outcome`, () => {
    let harness: StoreHarness;
    let store: StateStore;
    const clock = new ManualClock();
    before(async () => {
      harness = await newHarness();
      store = await harness.open({ clock, ids: counterIds('call') });
    });
    after(async () => {
      await store.close();
      await harness.dispose();
    });

    it('records the intent with every field, and no outcome yet', async () => {
      clock.set('2026-03-01T12:00:00.000Z');
      const id = await store.audit.recordIntent(sampleIntent());
      assert.equal(id, 'call-1');
      const record = await store.audit.get(id);
      assert.deepEqual(record, {
        id: 'call-1',
        time: new Date('2026-03-01T12:00:00.000Z'),
        session: 'session-a',
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
        arguments: { path: '/projects/README.md' },
        pinHash: 'a'.repeat(64),
        outcome: null,
        detail: null,
        hintViolation: null,
        attempts: null,
        endedAt: null,
        durationMs: null,
      } satisfies AuditRecord);
    });

    it('records the outcome once, with its time, duration, attempts and hint violation', async () => {
      clock.set('2026-03-01T13:00:00.000Z');
      const id = await store.audit.recordIntent(
        sampleIntent({ tool: 'write_file', decidedBy: 'person', effectiveHints: HINT_DEFAULTS, sandbox: 'rw-offline' }),
      );
      clock.advance(1_250);
      await store.audit.recordOutcome(id, {
        outcome: 'tool-error',
        detail: 'EROFS: read-only file system',
        hintViolation: 'readOnlyHint: the tool tried to write /projects/a.txt',
        attempts: 3,
      });
      const record = await store.audit.get(id);
      assert.equal(record?.outcome, 'tool-error');
      assert.equal(record?.detail, 'EROFS: read-only file system');
      assert.equal(record?.hintViolation, 'readOnlyHint: the tool tried to write /projects/a.txt');
      assert.equal(record?.attempts, 3);
      assert.deepEqual(record?.endedAt, new Date('2026-03-01T13:00:01.250Z'));
      assert.equal(record?.durationMs, 1_250);
      assert.equal(record?.decidedBy, 'person');

      await expectStoreError(
        store.audit.recordOutcome(id, { outcome: 'ok' }),
        /already has its outcome \(tool-error\)/,
      );
      assert.equal((await store.audit.get(id))?.outcome, 'tool-error', 'the first outcome stands');
    });

    it('defaults attempts to 1 and leaves detail and violation empty', async () => {
      const id = await store.audit.recordIntent(sampleIntent());
      await store.audit.recordOutcome(id, { outcome: 'ok' });
      const record = await store.audit.get(id);
      assert.equal(record?.attempts, 1);
      assert.equal(record?.detail, null);
      assert.equal(record?.hintViolation, null);
      assert.equal(record?.durationMs, 0);
    });

    it('records a denied or blocked call as not run, and refuses outcomes that contradict the decision', async () => {
      const denied = await store.audit.recordIntent(sampleIntent({ decision: 'denied', decidedBy: 'timeout' }));
      await expectStoreError(store.audit.recordOutcome(denied, { outcome: 'ok' }), /contradicts decision denied/);
      await store.audit.recordOutcome(denied, { outcome: 'not-run', detail: 'no answer within 60 s' });
      assert.equal((await store.audit.get(denied))?.outcome, 'not-run');

      const blocked = await store.audit.recordIntent(
        sampleIntent({ decision: 'blocked', decidedBy: 'pin', sandbox: null }),
      );
      await store.audit.recordOutcome(blocked, { outcome: 'not-run' });
      assert.equal((await store.audit.get(blocked))?.sandbox, null);

      const allowed = await store.audit.recordIntent(sampleIntent());
      await expectStoreError(
        store.audit.recordOutcome(allowed, { outcome: 'not-run' }),
        /contradicts decision allowed/,
      );
      assert.equal((await store.audit.get(allowed))?.outcome, null);
    });

    it('refuses a decider that cannot give the decision, an unknown outcome and an unknown record', async () => {
      const count = (await store.audit.query({ limit: 10_000 })).length;
      await expectStoreError(
        store.audit.recordIntent(sampleIntent({ decision: 'allowed', decidedBy: 'timeout' })),
        /decidedBy of a allowed call/,
      );
      await expectStoreError(
        store.audit.recordIntent(sampleIntent({ decision: 'blocked', decidedBy: 'person' })),
        /decidedBy of a blocked call/,
      );
      await expectStoreError(store.audit.recordIntent(sampleIntent({ session: '' })), /session/);
      assert.equal((await store.audit.query({ limit: 10_000 })).length, count, 'nothing was recorded');

      const id = await store.audit.recordIntent(sampleIntent());
      await expectStoreError(store.audit.recordOutcome(id, { outcome: 'fine' as never }), /outcome: expected one of/);
      await expectStoreError(store.audit.recordOutcome(id, { outcome: 'ok', attempts: 0 }), /attempts/);
      await expectStoreError(
        store.audit.recordOutcome('no-such-call', { outcome: 'ok' }),
        /no audit record no-such-call/,
      );
      assert.equal(await store.audit.get('no-such-call'), undefined);
    });

    it('writes a batch with fixed ids and times in one statement, and writing it again changes nothing', async () => {
      const batchStore = store as StateStore & { audit: BatchAuditLog };
      const entries: AuditBatchEntry[] = [
        { kind: 'intent', id: 'batch-1', at: '2026-05-01T08:00:00.000Z', intent: auditIntentRow(sampleIntent()) },
        {
          kind: 'intent',
          id: 'batch-2',
          at: '2026-05-01T08:00:00.000Z',
          intent: auditIntentRow(
            sampleIntent({ decision: 'denied', decidedBy: 'person', arguments: { big: 'x'.repeat(1e5) } }),
          ),
        },
        {
          kind: 'outcome',
          id: 'batch-1',
          at: '2026-05-01T08:00:01.500Z',
          outcome: auditOutcomeRow({
            outcome: 'tool-error',
            detail: 'EROFS',
            hintViolation: 'readOnlyHint',
            attempts: 2,
          }),
        },
        // Contradicts its decision: dropped, as recordOutcome would refuse it.
        { kind: 'outcome', id: 'batch-2', at: '2026-05-01T08:00:02.000Z', outcome: auditOutcomeRow({ outcome: 'ok' }) },
        // No such record: changes nothing.
        {
          kind: 'outcome',
          id: 'batch-none',
          at: '2026-05-01T08:00:02.000Z',
          outcome: auditOutcomeRow({ outcome: 'ok' }),
        },
      ];
      await batchStore.audit.recordBatch(entries);
      await batchStore.audit.recordBatch(entries);
      const one = await store.audit.get('batch-1');
      assert.deepEqual(
        [one?.time, one?.outcome, one?.detail, one?.hintViolation, one?.attempts, one?.durationMs],
        [new Date('2026-05-01T08:00:00.000Z'), 'tool-error', 'EROFS', 'readOnlyHint', 2, 1500],
      );
      assert.deepEqual(one?.tags, sampleIntent().tags);
      const two = await store.audit.get('batch-2');
      assert.equal(two?.outcome, null, 'the contradicting outcome was dropped');
      assert.equal((two?.arguments as { big: string }).big.length, 1e5);
      assert.equal(await store.audit.get('batch-none'), undefined);

      // Later batches: an outcome for a record written earlier; a replayed intent changes nothing.
      await batchStore.audit.recordBatch([
        {
          kind: 'intent',
          id: 'batch-2',
          at: '2026-06-01T00:00:00.000Z',
          intent: auditIntentRow(
            sampleIntent({ decision: 'denied', decidedBy: 'person', arguments: { replayed: true } }),
          ),
        },
        {
          kind: 'outcome',
          id: 'batch-2',
          at: '2026-05-01T08:00:03.000Z',
          outcome: auditOutcomeRow({ outcome: 'not-run' }),
        },
        { kind: 'outcome', id: 'batch-1', at: '2026-05-01T08:00:09.000Z', outcome: auditOutcomeRow({ outcome: 'ok' }) },
      ]);
      const twoAgain = await store.audit.get('batch-2');
      assert.deepEqual(
        [
          twoAgain?.time,
          (twoAgain?.arguments as { big?: string }).big?.length,
          twoAgain?.outcome,
          twoAgain?.durationMs,
        ],
        [new Date('2026-05-01T08:00:00.000Z'), 1e5, 'not-run', 3000],
        'the first intent stands, and the outcome fills it',
      );
      assert.equal((await store.audit.get('batch-1'))?.outcome, 'tool-error', 'the first outcome stands');
      await batchStore.audit.recordBatch([]);
    });

    it('stores NUL and lone surrogates in text as U+FFFD on every path, so no record can fail its batch', async () => {
      // What an untrusted server controls: its tool names, tags and error messages.
      const hostile = 'a\u0000b\ud800c\udc00d😀';
      const stored = 'a\ufffdb\ufffdc\ufffdd😀';
      const batchStore = store as StateStore & { audit: BatchAuditLog };
      const intentOf = () =>
        sampleIntent({
          tool: hostile,
          tags: [{ name: hostile, source: 'server' }],
          arguments: { text: hostile },
        });
      const id = await store.audit.recordIntent(intentOf());
      await store.audit.recordOutcome(id, { outcome: 'error', detail: hostile, hintViolation: hostile });
      const entries: AuditBatchEntry[] = [
        { kind: 'intent', id: 'hostile-batch', at: '2026-05-02T08:00:00.000Z', intent: auditIntentRow(intentOf()) },
        {
          kind: 'outcome',
          id: 'hostile-batch',
          at: '2026-05-02T08:00:01.000Z',
          outcome: auditOutcomeRow({ outcome: 'error', detail: hostile }),
        },
      ];
      await batchStore.audit.recordBatch(entries);
      await batchStore.audit.recordBatch(entries); // again: where COPY is used, this is the statement
      // A journal line read back from a file.
      const replayed = checkAuditBatchEntry(JSON.parse(JSON.stringify({ ...entries[0], id: 'hostile-file' })));
      await batchStore.audit.recordBatch([replayed]);
      for (const recordId of [id, 'hostile-batch', 'hostile-file']) {
        const record = await store.audit.get(recordId);
        assert.ok(record, `${recordId} is stored`);
        assert.equal(record.tool, stored, `${recordId}: the tool name, made storable`);
        assert.deepEqual(
          record.tags.map((t) => t.name),
          [stored],
          `${recordId}: the tag`,
        );
        assert.deepEqual(record.arguments, { text: hostile }, `${recordId}: the arguments, exactly`);
        if (recordId !== 'hostile-file') assert.equal(record.detail, stored, `${recordId}: the detail`);
      }
    });

    it('keeps a record that says so when the process dies between intent and outcome', async () => {
      // The child needs the database to itself (PGlite is single-process); `after` closing the
      // store again is harmless.
      await store.close();
      const id = await recordIntentThenDie(harness, sampleIntent({ session: 'crashed', tool: 'write_file' }));
      store = await harness.open({ clock, ids: counterIds('after-crash') });
      const record = await store.audit.get(id);
      assert.ok(record, `record ${id} survived the crash`);
      assert.equal(record.outcome, null);
      assert.equal(record.endedAt, null);
      assert.equal(record.durationMs, null);
      assert.equal(record.tool, 'write_file');
      assert.deepEqual(
        (await store.audit.query({ session: 'crashed', outcome: null })).map((r) => r.id),
        [id],
      );
      // The record can still be completed, e.g. by a sweep that marks it.
      await store.audit.recordOutcome(id, { outcome: 'error', detail: 'hintbox stopped during the call' });
      assert.equal((await store.audit.get(id))?.outcome, 'error');
    });
  });

  describe(`${name}: audit queries`, () => {
    let harness: StoreHarness;
    let store: StateStore;
    const clock = new ManualClock();
    const ids: Record<string, string> = {};

    // Recorded in this order; `at` is the clock at the intent.
    const calls: { key: string; at: string; intent: Partial<AuditIntent>; outcome?: 'ok' | 'error' | 'not-run' }[] = [
      { key: 'read1', at: '2026-03-01T09:00:00Z', intent: {}, outcome: 'ok' },
      {
        key: 'write1',
        at: '2026-03-01T10:00:00Z',
        intent: { tool: 'write_file', decidedBy: 'person', tags: [{ name: 'fs', source: 'profile' }] },
        outcome: 'error',
      },
      {
        key: 'k8s1',
        at: '2026-03-02T09:00:00Z',
        intent: {
          server: 'kube',
          tool: 'apply',
          session: 'session-b',
          tags: [
            { name: 'k8s', source: 'profile' },
            { name: 'helm', source: 'server' },
          ],
          decision: 'denied',
          decidedBy: 'rule',
        },
        outcome: 'not-run',
      },
      { key: 'pending', at: '2026-03-02T09:00:00Z', intent: { server: 'kube', tool: 'get', tags: [] } },
      {
        key: 'blocked',
        at: '2026-03-03T09:00:00Z',
        intent: { tool: 'edit_file', decision: 'blocked', decidedBy: 'pin', sandbox: null },
        outcome: 'not-run',
      },
    ];

    before(async () => {
      harness = await newHarness();
      store = await harness.open({ clock, ids: counterIds('q') });
      for (const call of calls) {
        clock.set(call.at);
        const id = await store.audit.recordIntent(sampleIntent(call.intent));
        ids[call.key] = id;
        if (call.outcome) await store.audit.recordOutcome(id, { outcome: call.outcome });
      }
    });
    after(async () => {
      await store.close();
      await harness.dispose();
    });

    async function keys(filter: Parameters<StateStore['audit']['query']>[0]): Promise<string[]> {
      const byId = Object.fromEntries(Object.entries(ids).map(([k, v]) => [v, k]));
      return (await store.audit.query(filter)).map((r) => byId[r.id] ?? r.id);
    }

    it('lists all, newest first; at the same instant, the later recorded first', async () => {
      assert.deepEqual(await keys({}), ['blocked', 'pending', 'k8s1', 'write1', 'read1']);
    });

    it('filters by server', async () => {
      assert.deepEqual(await keys({ server: 'kube' }), ['pending', 'k8s1']);
    });

    it('filters by tool', async () => {
      assert.deepEqual(await keys({ tool: 'write_file' }), ['write1']);
    });

    it('filters by session', async () => {
      assert.deepEqual(await keys({ session: 'session-b' }), ['k8s1']);
    });

    it("filters by tag, the profile's or the server's claim, case-insensitively", async () => {
      assert.deepEqual(await keys({ tag: 'fs' }), ['blocked', 'write1', 'read1']);
      assert.deepEqual(await keys({ tag: 'files' }), ['blocked', 'read1']);
      assert.deepEqual(await keys({ tag: 'HELM' }), ['k8s1']);
      assert.deepEqual(await keys({ tag: 'nothing' }), []);
    });

    it('filters by decision and by decider', async () => {
      assert.deepEqual(await keys({ decision: 'denied' }), ['k8s1']);
      assert.deepEqual(await keys({ decision: 'blocked' }), ['blocked']);
      assert.deepEqual(await keys({ decision: 'allowed' }), ['pending', 'write1', 'read1']);
      assert.deepEqual(await keys({ decidedBy: 'person' }), ['write1']);
    });

    it('filters by outcome, and null finds intents without one', async () => {
      assert.deepEqual(await keys({ outcome: 'ok' }), ['read1']);
      assert.deepEqual(await keys({ outcome: 'error' }), ['write1']);
      assert.deepEqual(await keys({ outcome: 'not-run' }), ['blocked', 'k8s1']);
      assert.deepEqual(await keys({ outcome: null }), ['pending']);
    });

    it('filters by time: since is inclusive, until exclusive', async () => {
      assert.deepEqual(await keys({ since: new Date('2026-03-02T09:00:00Z') }), ['blocked', 'pending', 'k8s1']);
      assert.deepEqual(await keys({ until: new Date('2026-03-02T09:00:00Z') }), ['write1', 'read1']);
      assert.deepEqual(
        await keys({ since: new Date('2026-03-01T09:30:00Z'), until: new Date('2026-03-02T09:00:00.001Z') }),
        ['pending', 'k8s1', 'write1'],
      );
    });

    it('combines filters and limits to the newest', async () => {
      assert.deepEqual(await keys({ server: 'filesystem', tag: 'fs', outcome: 'not-run' }), ['blocked']);
      assert.deepEqual(await keys({ limit: 2 }), ['blocked', 'pending']);
      assert.deepEqual(await keys({ server: 'filesystem', limit: 1 }), ['blocked']);
    });

    it('refuses a limit out of range and unknown enum values', async () => {
      await expectStoreError(store.audit.query({ limit: 0 }), /limit/);
      await expectStoreError(store.audit.query({ limit: 1.5 }), /limit/);
      await expectStoreError(store.audit.query({ limit: 10_001 }), /limit/);
      await expectStoreError(store.audit.query({ outcome: 'fine' as never }), /outcome/);
      await expectStoreError(store.audit.query({ decision: 'maybe' as never }), /decision/);
    });

    it('treats filter values as data, not SQL', async () => {
      assert.deepEqual(await keys({ server: "kube' OR '1'='1" }), []);
      assert.deepEqual(await keys({ tag: "fs') OR true --" }), []);
    });
  });

  describe(`${name}: arguments round-trip exactly`, () => {
    let harness: StoreHarness;
    let store: StateStore;
    before(async () => {
      harness = await newHarness();
      store = await harness.open({ ids: counterIds('arg') });
    });
    after(async () => {
      await store.close();
      await harness.dispose();
    });

    async function roundTrip(args: unknown): Promise<unknown> {
      const id = await store.audit.recordIntent(sampleIntent({ arguments: args }));
      const record = await store.audit.get(id);
      assert.ok(record, `record ${id} reads back`);
      // The journal's path: the same intent in a batch must come back the same.
      const batchId = `${id}-batched`;
      await (store.audit as BatchAuditLog).recordBatch([
        {
          kind: 'intent',
          id: batchId,
          at: new Date().toISOString(),
          intent: auditIntentRow(sampleIntent({ arguments: args })),
        },
      ]);
      const batched = await store.audit.get(batchId);
      assert.ok(batched, `record ${batchId} reads back`);
      assert.equal(
        JSON.stringify(batched.arguments),
        JSON.stringify(record.arguments),
        'a batch keeps the arguments as a single insert does',
      );
      assert.equal('arguments' in batched, 'arguments' in record, 'a batch tells absent arguments from JSON null too');
      return record.arguments;
    }

    it('keeps a 4 MB argument untruncated', async () => {
      const content = 'x'.repeat(4 * 1024 * 1024 - 7) + 'THE END';
      const back = (await roundTrip({ path: '/p/big.txt', content })) as { content: string };
      assert.equal(back.content.length, content.length);
      assert.ok(back.content === content, 'the content is byte-identical');
    });

    it('keeps unicode, NUL, lone surrogates, key order and nesting', async () => {
      const args = {
        zeta: 'last key first',
        text: 'héllo wörld — 日本語 — עברית — 😀👩‍👩‍👧 — e\u0301',
        nul: 'a\u0000b',
        lone: 'x\ud800y',
        control: '\u001b[31mred\u001b[0m\r\n\t',
        nested: { b: [1, 2.5, -0.001, 1e21, true, null, { deep: ['é'] }], a: {} },
        alpha: '',
      };
      const back = await roundTrip(args);
      assert.deepEqual(back, args);
      assert.equal(JSON.stringify(back), JSON.stringify(args), 'key order is kept');
    });

    it('keeps arguments that are not an object, and tells absent arguments from JSON null', async () => {
      assert.deepEqual(await roundTrip(['a', 1]), ['a', 1]);
      assert.equal(await roundTrip('just a string'), 'just a string');
      assert.equal(await roundTrip(null), null);
      const id = await store.audit.recordIntent(sampleIntent({ arguments: undefined }));
      const record = await store.audit.get(id);
      assert.ok(record && !('arguments' in record), 'no arguments key when the call had none');
      await (store.audit as BatchAuditLog).recordBatch([
        {
          kind: 'intent',
          id: 'absent-batched',
          at: new Date().toISOString(),
          intent: auditIntentRow(sampleIntent({ arguments: undefined })),
        },
      ]);
      const batched = await store.audit.get('absent-batched');
      assert.ok(batched && !('arguments' in batched), 'no arguments key when a batched call had none');
    });
  });
}
