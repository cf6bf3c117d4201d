import assert from 'node:assert/strict';
import os from 'node:os';
import { before, it } from 'node:test';
import type { Client } from 'pg';
import { integrationSuite } from './support/suite.js';
import { withDatabase } from '../../src/database/admin-url.js';
import type { DatabaseSection } from '../../src/profile/database-profile-schema.js';
import { RoleProvisioner } from '../../src/database/role-provisioner.js';
import { SessionDatabase } from '../../src/database/session-database.js';
import { FALLBACK_SANDBOX_USER } from '../../src/profile/profile-schema.js';
import { silentLogger } from '../../src/util/logger.js';
import { eventually } from './support/docker.js';
import { adminAltersItems, adminOfNewDatabase, throughRelay } from './support/database.js';
import { startPostgres, type StartedPostgres } from './support/postgres.js';

/**
 * A call's end ends the sessions that hold something, not all of them (issue 33, item 1): a read
 * role's session left idle in a transaction, holding an advisory lock while idle and outside any
 * transaction (pg_stat_activity says 'idle'; only pg_locks shows it), listening (only the
 * session itself sees its LISTEN), or still running a query, ends; a pool's clean idle
 * connection stays, and is judged again at the next call's end. Each test asserts what Postgres
 * shows: the backends, pg_locks, whether a NOTIFY still has a listener, the admin's ALTER TABLE.
 */

const DATABASE = 'callend';
const SECTION: DatabaseSection = {
  adminUrlEnv: 'UNUSED',
  database: DATABASE,
  schemas: ['shop'],
  privilege: 'read',
  roleTtlMinutes: 60,
  connectionLimit: 10,
};
const [uid, gid] = FALLBACK_SANDBOX_USER.split(':').map(Number) as [number, number];
const SANDBOX = 'ro-offline-dbread';

integrationSuite('a call ends the database sessions that hold something', { timeout: 300_000 }, (suite) => {
  let pg: StartedPostgres;
  let admin: Client;
  let db: SessionDatabase;
  let sessions = 0;

  /** Backends of the role that are still there, of these pids. */
  const alive = async (pids: number[]): Promise<number[]> =>
    (
      await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE pid = ANY($1) ORDER BY pid', [pids])
    ).rows.map((r) => r.pid);
  const advisoryLocks = async (): Promise<number> =>
    (await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'")).rows[0]!
      .n;
  const pidOf = async (client: Client): Promise<number> =>
    (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  const adminAlters = (column: string) => adminAltersItems(withDatabase(pg.adminUrl, DATABASE), column);

  before(async () => {
    pg = await startPostgres();
    suite.use(pg);
    admin = await adminOfNewDatabase(pg.adminUrl, DATABASE);
    suite.defer(() => admin.end().catch(() => undefined));
    await admin.query(`CREATE SCHEMA shop; CREATE TABLE shop.items (id int PRIMARY KEY, name text NOT NULL);
      INSERT INTO shop.items VALUES (1, 'lamp'), (2, 'desk');`);
    await using provisioner = await RoleProvisioner.connect({ adminUrl: pg.adminUrl, section: SECTION });
    await provisioner.prepare();
    db = await SessionDatabase.open({
      adminUrl: pg.adminUrl,
      section: SECTION,
      identity: { sessionId: `end${++sessions}`, ownerHost: os.hostname(), ownerPid: process.pid },
      log: silentLogger,
      onViolation: () => undefined,
      isOwnerAlive: () => true,
    });
    suite.defer(() => db.close());
  });

  // proves: DB-CALL-END
  it('ends the sessions idle in a transaction, holding an advisory lock while idle, listening (by LISTEN or inside a DO block) or running a query, and keeps the clean idle one', async () => {
    const access = await db.access(SANDBOX, 'read', { uid, gid });
    const connect = () => throughRelay(access.socketDir, access.env);
    const clients = await Promise.all(Array.from({ length: 6 }, connect));
    const [inTransaction, locker, listener, hiddenListener, busy, clean] = clients as [
      Client,
      Client,
      Client,
      Client,
      Client,
      Client,
    ];
    const pids = await Promise.all(clients.map(pidOf));
    const cleanPid = pids[5]!;
    await inTransaction.query('BEGIN');
    await inTransaction.query('SELECT count(*) FROM shop.items');
    await locker.query('SELECT pg_advisory_lock(33)');
    await listener.query('LISTEN hintbox_call_end');
    await hiddenListener.query(`DO $$ BEGIN EXECUTE 'LISTEN hintbox_hidden'; END $$`);
    const running = busy.query('SELECT pg_sleep(60)').then(
      () => 'finished',
      (error: Error) => error.message,
    );
    await clean.query('SELECT count(*) FROM shop.items');
    await eventually(
      async () =>
        (await admin.query("SELECT 1 FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)' AND state = 'active'"))
          .rowCount === 1,
      5_000,
      'the query runs',
    );
    // What an outside look sees of the advisory lock and the LISTENs: an idle session.
    const states = await admin.query<{ pid: number; state: string }>(
      'SELECT pid, state FROM pg_stat_activity WHERE pid = ANY($1)',
      [[pids[1], pids[2], pids[3]]],
    );
    assert.deepEqual(
      states.rows.map((r) => r.state),
      ['idle', 'idle', 'idle'],
    );
    assert.equal(await advisoryLocks(), 1);
    assert.equal(await adminAlters('blocked'), '55P03', 'the idle transaction blocks ALTER TABLE');

    const ended = await db.endCallSessions(SANDBOX);

    assert.equal(ended, 5, 'five sessions ended');
    assert.deepEqual(await alive(pids), [cleanPid], 'only the clean idle backend is left');
    assert.equal(await advisoryLocks(), 0, 'the advisory lock is released');
    assert.equal(await adminAlters('after_call'), true, "the admin's ALTER TABLE goes through");
    assert.notEqual(await running, 'finished', 'the running query ended');
    for (const gone of [inTransaction, locker, listener, hiddenListener]) {
      await assert.rejects(gone.query('SELECT 1'), 'the session is gone');
    }
    // The clean one is the same backend, and answers.
    assert.equal(await pidOf(clean), cleanPid, 'the kept connection still answers, on its backend');
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
  });

  // proves: DB-CALL-END
  it('judges a kept connection again at the next call: the advisory lock and the LISTEN it took since end with that call', async () => {
    const access = await db.access(SANDBOX, 'read', { uid, gid });
    const pooled = await throughRelay(access.socketDir, access.env);
    const other = await throughRelay(access.socketDir, access.env);
    const [pid, otherPid] = [await pidOf(pooled), await pidOf(other)];
    await db.endCallSessions(SANDBOX);
    assert.deepEqual(
      await alive([pid, otherPid]),
      [pid, otherPid].sort((a, b) => a - b),
      'both clean: both kept',
    );

    // The next call takes a session-level advisory lock on one, and LISTENs on the other.
    await pooled.query('SELECT pg_advisory_lock(34)');
    await other.query('LISTEN hintbox_next_call');
    assert.equal(await db.endCallSessions(SANDBOX), 2);
    assert.deepEqual(await alive([pid, otherPid]), [], 'both ended');
    assert.equal(await advisoryLocks(), 0);
    await pooled.end().catch(() => undefined);
    await other.end().catch(() => undefined);
  });
});
