import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import {
  DEFAULT_STATE_DIR,
  StateStoreLockedError,
  openPgliteStateStore,
  pgliteAdapter,
} from '../../src/store/pglite-state-store.js';
import { auditIntentRow, auditOutcomeRow, SqlStateStore, type AuditBatchEntry } from '../../src/store/state-store.js';
import { sampleIntent, stateStoreContract, type StoreHarness } from '../integration/support/state-store-contract.js';

/**
 * The embedded store: PGlite in a temporary folder. No Docker, no server. A pristine database
 * is made once and copied per harness (PGlite's first start, an initdb, takes seconds).
 */

const root = mkdtempSync(path.join(os.tmpdir(), 'hintbox-pglite-test-'));
after(() => rmSync(root, { recursive: true, force: true }));

let template: Promise<string> | undefined;
function pristineDatabase(): Promise<string> {
  template ??= (async () => {
    const dir = path.join(root, 'template');
    const db = await PGlite.create(dir);
    await db.close();
    return dir;
  })();
  return template;
}

async function newHarness(): Promise<StoreHarness> {
  const dir = mkdtempSync(path.join(root, 'state-'));
  cpSync(await pristineDatabase(), path.join(dir, 'pgdata'), { recursive: true });
  return {
    open: (options) => openPgliteStateStore({ ...options, dir }),
    rawAdapter: async () => pgliteAdapter(await PGlite.create(path.join(dir, 'pgdata'))),
    child: {
      module: fileURLToPath(new URL('../../src/store/pglite-state-store.ts', import.meta.url)),
      exportName: 'openPgliteStateStore',
      options: { dir },
    },
    dispose: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

stateStoreContract('PGlite store', newHarness);

describe('PGlite store: its state folder', () => {
  it('defaults to .hintbox/state', () => {
    assert.equal(DEFAULT_STATE_DIR, path.join('.hintbox', 'state'));
  });

  it('creates a missing folder, locks it while open, and unlocks it on close', async () => {
    const dir = path.join(root, 'fresh', 'nested', 'state');
    const lock = path.join(dir, 'hintbox.lock');
    const store = await openPgliteStateStore({ dir });
    try {
      assert.ok(existsSync(path.join(dir, 'pgdata', 'PG_VERSION')), 'the database is in pgdata/');
      assert.equal(readFileSync(lock, 'utf8').trim(), String(process.pid));
    } finally {
      await store.close();
    }
    assert.equal(existsSync(lock), false, 'the lock is gone after close');
  });

  it('refuses a second open of the same folder while the first is open', async () => {
    const harness = await newHarness();
    const first = await harness.open();
    try {
      await assert.rejects(harness.open(), (error: unknown) => {
        assert.ok(error instanceof StateStoreLockedError, `a StateStoreLockedError, got ${String(error)}`);
        assert.equal(error.pid, process.pid);
        assert.match(error.message, /HINTBOX_DATABASE_URL/);
        return true;
      });
      // The first store still works: the refused open touched nothing.
      await first.pins.list();
    } finally {
      await first.close();
    }
    const again = await harness.open();
    await again.close();
    await harness.dispose();
  });

  it('takes over a lock left by a process that is gone', async () => {
    const harness = await newHarness();
    const dir = harness.child.options.dir as string;
    const gone = spawnSync(process.execPath, ['-e', 'process.exit(0)']).pid;
    assert.ok(gone !== undefined && gone > 0, 'a child pid');
    writeFileSync(path.join(dir, 'hintbox.lock'), `${gone}\n`);
    const store = await harness.open();
    assert.equal(readFileSync(path.join(dir, 'hintbox.lock'), 'utf8').trim(), String(process.pid));
    await store.close();
    await harness.dispose();
  });
});

describe('PGlite store: audit batches through COPY', () => {
  it('writes new records with COPY, exactly, and a batch written again falls back to the statement and changes nothing', async () => {
    const harness = await newHarness();
    const adapter = await harness.rawAdapter();
    const copies: { ok: boolean }[] = [];
    const copyRows = adapter.copyRows!.bind(adapter);
    const store = await SqlStateStore.open({
      ...adapter,
      copyRows: async (table, columns, data) => {
        try {
          await copyRows(table, columns, data);
          copies.push({ ok: true });
        } catch (error) {
          copies.push({ ok: false });
          throw error;
        }
      },
    });
    try {
      // What COPY's text format must escape, in every kind of column.
      const awkward = 'tab\there, line\nbreak, return\r, back\\slash \\N, quote " comma , {brace}';
      const args = '{"path" :\t"a\\tb\\\\c",\n  "z": [1, {"y": "\\u0000"}], "a": "é 😀 \\ud800"}';
      const entries: AuditBatchEntry[] = [
        {
          kind: 'intent',
          id: 'copy-1',
          at: '2026-05-01T08:00:00.000Z',
          intent: {
            ...auditIntentRow(sampleIntent({ session: awkward, tool: `${awkward} tool` })),
            tags: ['plain', awkward, 'NULL', ''],
            claimedTags: [awkward],
            arguments: args,
          },
        },
        {
          kind: 'outcome',
          id: 'copy-1',
          at: '2026-05-01T08:00:01.250Z',
          outcome: auditOutcomeRow({ outcome: 'tool-error', detail: awkward, hintViolation: awkward, attempts: 3 }),
        },
        { kind: 'intent', id: 'copy-2', at: '2026-05-01T08:00:02.000Z', intent: auditIntentRow(sampleIntent()) },
      ];
      await store.audit.recordBatch(entries);
      assert.deepEqual(copies, [{ ok: true }], 'the new records went in with one COPY');
      const one = await store.audit.get('copy-1');
      assert.ok(one, 'copy-1 reads back');
      assert.deepEqual(
        [one.session, one.tool, one.detail, one.hintViolation, one.attempts, one.durationMs, one.outcome],
        [awkward, `${awkward} tool`, awkward, awkward, 3, 1250, 'tool-error'],
      );
      assert.deepEqual(
        one.tags.map((t) => t.name),
        ['plain', awkward, 'NULL', '', awkward],
        'tags, with the claimed one, exactly',
      );
      const raw = await adapter.query(`SELECT arguments::text AS a FROM hintbox.audit_calls WHERE id = 'copy-1'`);
      assert.equal(raw[0]?.a, args, 'the arguments are stored as the very text they were sent as');
      const two = await store.audit.get('copy-2');
      assert.equal(two?.outcome, null, 'an intent without its outcome yet');

      // Again (a replay): COPY refuses the existing ids, the statement skips them, the outcome fills.
      await store.audit.recordBatch([
        ...entries,
        { kind: 'outcome', id: 'copy-2', at: '2026-05-01T08:00:03.000Z', outcome: auditOutcomeRow({ outcome: 'ok' }) },
      ]);
      assert.deepEqual(copies, [{ ok: true }, { ok: false }], 'the second COPY failed as a whole');
      assert.equal((await store.audit.get('copy-1'))?.detail, awkward, 'the first record stands');
      assert.equal((await store.audit.get('copy-2'))?.outcome, 'ok', 'the outcome of the replay is recorded');
      assert.equal((await store.audit.query({ limit: 100 })).length, 2, 'no record twice');
    } finally {
      await store.close();
      await harness.dispose();
    }
  });
});
