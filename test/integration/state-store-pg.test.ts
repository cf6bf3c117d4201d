import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { pinTool } from '../../src/policy/tool-pin.js';
import { openPgStateStore, pgAdapter } from '../../src/store/pg-state-store.js';
import { startPostgres, type StartedPostgres } from './support/postgres.js';
import { counterIds, stateStoreContract, type StoreHarness } from './support/state-store-contract.js';

/**
 * The Postgres store against a real PostgreSQL 15 (started by testcontainers from
 * images/postgres). Each harness gets a database of its own, dropped afterwards.
 */

let started: Promise<StartedPostgres> | undefined;
function postgres(): Promise<StartedPostgres> {
  started ??= startPostgres();
  return started;
}
after(async () => {
  if (started) await (await started).stop();
});

let databases = 0;

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: (await postgres()).adminUrl });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

function urlFor(adminUrl: string, database: string, user?: { name: string; password: string }): string {
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  if (user) {
    url.username = user.name;
    url.password = user.password;
  }
  return url.href;
}

async function newDatabase(): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `hintbox_state_${process.pid}_${++databases}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  return {
    name,
    url: urlFor((await postgres()).adminUrl, name),
    drop: () => admin(async (c) => void (await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))),
  };
}

async function newHarness(): Promise<StoreHarness> {
  const db = await newDatabase();
  return {
    open: (options) => openPgStateStore({ ...options, url: db.url }),
    rawAdapter: () => Promise.resolve(pgAdapter(new pg.Pool({ connectionString: db.url, max: 1 }))),
    child: {
      module: fileURLToPath(new URL('../../src/store/pg-state-store.ts', import.meta.url)),
      exportName: 'openPgStateStore',
      options: { url: db.url },
    },
    dispose: () => db.drop(),
  };
}

stateStoreContract('Postgres store', newHarness);

describe('Postgres store: sharing a server', { timeout: 120_000 }, () => {
  it('migrates once when two processes open a fresh database at the same time', async () => {
    const db = await newDatabase();
    try {
      const stores = await Promise.all([openPgStateStore({ url: db.url }), openPgStateStore({ url: db.url })]);
      try {
        assert.deepEqual(stores.map((s) => s.schema.appliedNow).sort(), [[], [1]]);
        const client = new pg.Client({ connectionString: db.url });
        await client.connect();
        try {
          const { rows } = await client.query('SELECT version FROM hintbox.schema_migrations');
          assert.deepEqual(rows, [{ version: 1 }]);
        } finally {
          await client.end();
        }
        await stores[0].pins.approve({ server: 's', tool: 't', pin: pinTool({ name: 't' }), approvedBy: 'a' });
        assert.equal((await stores[1].pins.get('s', 't'))?.approvedBy, 'a', 'both see the same pins');
      } finally {
        await Promise.all(stores.map((s) => s.close()));
      }
    } finally {
      await db.drop();
    }
  });

  it('works for a least-privileged role: no CREATE, no DELETE, UPDATE of the outcome columns only', async () => {
    const db = await newDatabase();
    const role = { name: `hintbox_app_${process.pid}`, password: 'app-secret' };
    try {
      // The operator prepares the database once, as its owner.
      await (await openPgStateStore({ url: db.url })).close();
      const grants = [
        `CREATE ROLE ${role.name} LOGIN PASSWORD '${role.password}'`,
        `GRANT USAGE ON SCHEMA hintbox TO ${role.name}`,
        `GRANT SELECT ON hintbox.schema_migrations TO ${role.name}`,
        `GRANT SELECT, INSERT, UPDATE ON hintbox.tool_pins TO ${role.name}`,
        `GRANT SELECT, INSERT ON hintbox.audit_calls TO ${role.name}`,
        `GRANT UPDATE (outcome, detail, hint_violation, attempts, ended_at) ON hintbox.audit_calls TO ${role.name}`,
      ];
      const owner = new pg.Client({ connectionString: db.url });
      await owner.connect();
      try {
        for (const sql of grants) await owner.query(sql);
      } finally {
        await owner.end();
      }

      const url = urlFor((await postgres()).adminUrl, db.name, role);
      const store = await openPgStateStore({ url, ids: counterIds('app') });
      try {
        assert.deepEqual(store.schema.appliedNow, []);
        const id = await store.audit.recordIntent({
          session: 's',
          server: 'fs',
          tool: 'write_file',
          tags: [],
          claimedHints: {},
          effectiveHints: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
          sandbox: 'rw-offline',
          decision: 'allowed',
          decidedBy: 'person',
          arguments: { path: '/p/a' },
          pinHash: null,
        });
        await store.audit.recordOutcome(id, { outcome: 'ok' });
        await store.pins.approve({ server: 'fs', tool: 't', pin: pinTool({ name: 't' }), approvedBy: 'x' });
        await store.pins.approve({ server: 'fs', tool: 't', pin: pinTool({ name: 't', title: 'T' }), approvedBy: 'y' });
        assert.equal((await store.audit.get(id))?.outcome, 'ok');
      } finally {
        await store.close();
      }

      const app = new pg.Client({ connectionString: url });
      await app.connect();
      try {
        await assert.rejects(app.query('DELETE FROM hintbox.audit_calls'), /permission denied/);
        await assert.rejects(app.query(`UPDATE hintbox.audit_calls SET arguments = '{}'`), /permission denied/);
      } finally {
        await app.end();
      }
    } finally {
      await db.drop();
      await admin((c) => c.query(`DROP ROLE IF EXISTS ${role.name}`));
    }
  });

  it('fails to open, rather than hang, when the server cannot be reached', async () => {
    const url = 'postgres://nobody:x@127.0.0.1:1/hintbox';
    await assert.rejects(openPgStateStore({ url }), /ECONNREFUSED/);
  });
});
