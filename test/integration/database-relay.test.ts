import { existsSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import assert from 'node:assert/strict';
import { Client, type DatabaseError } from 'pg';
import { adminEndpoint, withDatabase } from '../../src/database/admin-url.js';
import type { DatabaseSection } from '../../src/profile/database-profile-schema.js';
import { RoleProvisioner, type CreatedRole } from '../../src/database/role-provisioner.js';
import {
  PG_SOCKET_FILE,
  SANDBOX_PG_SOCKET_DIR,
  sandboxDatabaseEnv,
  type PrivilegeViolation,
  type RefusedConnection,
  type SocketRelay,
} from '../../src/database/socket-relay.js';
import { startSocketRelay } from '../../src/database/pg-socket-relay.js';
import { FALLBACK_SANDBOX_USER } from '../../src/profile/profile-schema.js';
import { docker, eventually } from './support/docker.js';
import { POSTGRES_IMAGE, startPostgres, type StartedPostgres } from './support/postgres.js';

const DB = 'shop';
const SECTION: Omit<DatabaseSection, 'adminUrlEnv'> = {
  database: DB,
  schemas: ['shop'],
  privilege: 'write',
  roleTtlMinutes: 60,
  connectionLimit: 5,
};
/** The uid the sandboxes get when hintbox runs as root (as it does on these machines). */
const [SANDBOX_UID, SANDBOX_GID] = FALLBACK_SANDBOX_USER.split(':').map(Number) as [number, number];

let pg: StartedPostgres;
let admin: Client;
let provisioner: RoleProvisioner;
let role: CreatedRole;
let relay: SocketRelay;
const violations: PrivilegeViolation[] = [];
const refused: RefusedConnection[] = [];

/** A client through the relay: pg takes a directory as host and appends /.s.PGSQL.<port>. */
async function throughRelay(overrides: { database?: string; user?: string; dir?: string } = {}): Promise<Client> {
  const client = new Client({
    host: overrides.dir ?? relay.dir,
    port: 5432,
    user: overrides.user ?? role.name,
    password: role.password,
    database: overrides.database ?? DB,
  });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

async function backendsOf(name: string): Promise<number> {
  const { rows } = await admin.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1',
    [name],
  );
  return rows[0]!.n;
}

async function rowCount(): Promise<number> {
  return (await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM shop.items')).rows[0]!.n;
}

/** Docker's multiplexed log format (no TTY): frames of [stream, 0, 0, 0, size:uint32be] + payload. */
function demux(logs: Buffer): string {
  let out = '';
  for (let at = 0; at + 8 <= logs.length;) {
    const size = logs.readUInt32BE(at + 4);
    out += logs.toString('utf8', at + 8, at + 8 + size);
    at += 8 + size;
  }
  return out;
}

/** Runs a script in a sandbox-like container: no network, read-only root, uid 10001, the socket dir bound read-only. */
async function psqlInSandbox(env: Record<string, string>, script: string): Promise<{ code: number; output: string }> {
  const { docker: d } = await docker();
  const container = await d.createContainer({
    Image: POSTGRES_IMAGE,
    Entrypoint: ['sh', '-c', script],
    User: `${SANDBOX_UID}:${SANDBOX_GID}`,
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    Labels: { 'hintbox-test': 'relay' },
    NetworkDisabled: true,
    HostConfig: {
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true'],
      Mounts: [{ Type: 'bind', Source: relay.dir, Target: SANDBOX_PG_SOCKET_DIR, ReadOnly: true }],
    },
  });
  try {
    await container.start();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), 60_000)));
    const exited = (await Promise.race([container.wait(), timedOut])) as { StatusCode: number } | undefined;
    clearTimeout(timer);
    if (!exited) assert.fail(`psql in the sandbox did not finish within 60 s: ${script}`);
    const { StatusCode } = exited;
    const logs = await container.logs({ stdout: true, stderr: true, follow: false });
    return { code: StatusCode, output: demux(logs).trim() };
  } finally {
    await container.remove({ force: true });
  }
}

integrationSuite('socket relay to a real PostgreSQL 15', { timeout: 300_000 }, (suite) => {
  before(async () => {
    pg = await startPostgres();
    const setup = new Client({ connectionString: pg.adminUrl });
    await setup.connect();
    await setup.query(`CREATE DATABASE ${DB}`);
    await setup.end();
    admin = new Client({ connectionString: withDatabase(pg.adminUrl, DB) });
    await admin.connect();
    await admin.query(`
      CREATE SCHEMA shop;
      CREATE TABLE shop.items (id int PRIMARY KEY, name text NOT NULL);
      INSERT INTO shop.items VALUES (1, 'lamp'), (2, 'desk');
    `);
    provisioner = await RoleProvisioner.connect({ adminUrl: pg.adminUrl, section: SECTION });
    await provisioner.prepare();
    role = await provisioner.createRole({
      identity: { sessionId: 'relay1', ownerHost: os.hostname(), ownerPid: process.pid },
      classId: 'ro-offline',
      privilege: 'read',
    });
    relay = await startSocketRelay({
      upstream: adminEndpoint(pg.adminUrl).upstream,
      sandboxUser: { uid: SANDBOX_UID, gid: SANDBOX_GID },
      allow: { user: role.name, database: DB },
      onViolation: (v) => violations.push(v),
      onRefused: (r) => refused.push(r),
    });
  });

  suite.defer(async () => {
    await relay?.close();
    if (role) await provisioner?.dropRole(role.name);
    await provisioner?.close();
    await admin?.end().catch(() => undefined);
    await pg?.stop();
  });

  it('listens on .s.PGSQL.5432 in a fresh directory that belongs to the sandbox user', () => {
    assert.equal(path.basename(relay.socketPath), PG_SOCKET_FILE);
    assert.equal(path.dirname(relay.socketPath), relay.dir);
    const dir = statSync(relay.dir);
    const socket = statSync(relay.socketPath);
    assert.ok(socket.isSocket(), 'a Unix socket');
    if (process.getuid?.() === 0) {
      assert.equal(relay.access, 'chown');
      assert.deepEqual([dir.uid, dir.gid, dir.mode & 0o777], [SANDBOX_UID, SANDBOX_GID, 0o700]);
      assert.deepEqual([socket.uid, socket.gid, socket.mode & 0o777], [SANDBOX_UID, SANDBOX_GID, 0o600]);
    } else {
      assert.equal(relay.access, 'world');
    }
  });

  it("relays a pg client through the socket, as the sandbox's role, and its DATABASE_URL works too", async () => {
    const client = await throughRelay();
    try {
      const { rows } = await client.query<{ user: string; n: number }>(
        'SELECT current_user AS user, count(*)::int AS n FROM shop.items',
      );
      assert.deepEqual(rows, [{ user: role.name, n: 2 }]);
    } finally {
      await client.end();
    }
    const env = sandboxDatabaseEnv({ user: role.name, password: role.password, database: DB }, relay.dir);
    const byUrl = new Client({ connectionString: env.DATABASE_URL });
    await byUrl.connect();
    try {
      assert.equal((await byUrl.query<{ db: string }>('SELECT current_database() AS db')).rows[0]!.db, DB);
    } finally {
      await byUrl.end();
    }
    await eventually(async () => relay.connectionCount === 0, 5_000, 'closed connections are forgotten');
  });

  // proves: DB-VIOLATION
  it('reports a privilege error (42501) and a read-only error (25006) through onViolation, and nothing else', async () => {
    violations.length = 0;
    const client = await throughRelay();
    try {
      await assert.rejects(client.query("INSERT INTO shop.items VALUES (3, 'chair')"), { code: '25006' });
      await client.query('SET default_transaction_read_only = off');
      await assert.rejects(client.query("INSERT INTO shop.items VALUES (3, 'chair')"), { code: '42501' });
      await assert.rejects(client.query('SELEC 1'), { code: '42601' });
      await assert.rejects(client.query('SELECT 1/0'), { code: '22012' });
      assert.equal((await client.query('SELECT 1 AS one')).rows[0].one, 1, 'the session goes on');
    } finally {
      await client.end();
    }
    assert.deepEqual(
      violations.map((v) => [v.sqlstate, v.severity, v.user, v.database]),
      [
        ['25006', 'ERROR', role.name, DB],
        ['42501', 'ERROR', role.name, DB],
      ],
    );
    assert.match(violations[0]!.message, /read-only transaction/);
    assert.match(violations[1]!.message, /permission denied for table items/);
    assert.equal(violations[0]!.connectionId, violations[1]!.connectionId, 'both from the one connection');
    assert.equal(await rowCount(), 2);
  });

  // proves: DB-RELAY
  it('cutAll() ends an idle and a busy session at once, cancels the running query, and the relay still works', async () => {
    const idle = await throughRelay();
    const busy = await throughRelay();
    const sleeping = busy.query('SELECT pg_sleep(60)');
    sleeping.catch(() => undefined);
    await eventually(
      async () =>
        (
          await admin.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1 AND query LIKE 'SELECT pg_sleep%' AND state = 'active'",
            [role.name],
          )
        ).rows[0]!.n === 1,
      5_000,
      'the query runs',
    );
    assert.equal(relay.connectionCount, 2);
    const started = Date.now();
    assert.equal(await relay.cutAll(), 2);
    await assert.rejects(sleeping, 'the running query ends with an error');
    await assert.rejects(idle.query('SELECT 1'), 'the idle session is gone');
    await eventually(async () => (await backendsOf(role.name)) === 0, 5_000, 'no backend of the role left');
    assert.ok(Date.now() - started < 5_000, 'the server-side query did not run on');
    assert.equal(relay.connectionCount, 0);
    await idle.end().catch(() => undefined);
    await busy.end().catch(() => undefined);

    const again = await throughRelay();
    assert.equal((await again.query('SELECT 1 AS one')).rows[0].one, 1);
    await again.end();
  });

  // proves: DB-RELAY
  it('refuses a startup for another database or user before Postgres sees it', async () => {
    refused.length = 0;
    for (const overrides of [{ database: 'postgres' }, { user: 'postgres' }]) {
      const error = await throughRelay(overrides).then(
        (c) => c.end().then(() => assert.fail(`connected with ${JSON.stringify(overrides)}`)),
        (e: unknown) => e as DatabaseError,
      );
      assert.equal(error.code, '28000');
      // The relay answers itself: Postgres never saw the attempt.
      assert.match(
        error.message,
        /^hintbox relay: .*may connect only as user "hintbox_relay1_ro_offline" to database "shop"/,
      );
    }
    assert.equal(refused.length, 2);
  });

  it('refuses TLS on the socket, so the answers stay readable', async () => {
    const client = new Client({
      host: relay.dir,
      user: role.name,
      password: role.password,
      database: DB,
      ssl: { rejectUnauthorized: false },
    });
    client.on('error', () => undefined);
    await assert.rejects(client.connect(), /does not support SSL/);
  });

  it('relays to an upstream Unix socket (here: another relay)', async () => {
    await using front = await startSocketRelay({ upstream: { path: relay.socketPath } });
    const client = await throughRelay({ dir: front.dir });
    try {
      assert.equal((await client.query<{ n: number }>('SELECT count(*)::int AS n FROM shop.items')).rows[0]!.n, 2);
    } finally {
      await client.end();
    }
  });

  // proves: DB-RELAY
  it('a network-less container running as uid 10001 reaches the database through the bound socket, by PG* variables and by DATABASE_URL, through a read-only bind mount', async () => {
    violations.length = 0;
    const env = sandboxDatabaseEnv({ user: role.name, password: role.password, database: DB });
    const { DATABASE_URL = '', ...pgVars } = env;
    const query = "SELECT current_user || ' ' || count(*) FROM shop.items";

    const byVars = await psqlInSandbox(pgVars, `psql -Atc "${query}"`);
    assert.equal(byVars.code, 0, byVars.output);
    assert.equal(byVars.output, `${role.name} 2`);

    const byUrl = await psqlInSandbox({ DATABASE_URL }, `psql "$DATABASE_URL" -Atc "${query}"`);
    assert.equal(byUrl.code, 0, byUrl.output);
    assert.equal(byUrl.output, `${role.name} 2`);

    const write = await psqlInSandbox(
      pgVars,
      // Two -c: two queries, so the SET already holds when the INSERT's transaction starts.
      `psql -At -c "SET default_transaction_read_only = off" -c "INSERT INTO shop.items VALUES (9, 'lie')"`,
    );
    assert.notEqual(write.code, 0, 'the write fails');
    assert.match(write.output, /permission denied for table items/);
    assert.deepEqual(
      violations.map((v) => v.sqlstate),
      ['42501'],
    );
    assert.equal(await rowCount(), 2, 'the data is unchanged');

    // The socket works through a read-only bind mount, so the sandbox cannot plant files beside it.
    const plant = await psqlInSandbox({}, `touch ${SANDBOX_PG_SOCKET_DIR}/planted`);
    assert.notEqual(plant.code, 0, 'touch fails');
    assert.match(plant.output, /Read-only file system/);
    assert.equal(existsSync(path.join(relay.dir, 'planted')), false);
  });

  it('close() removes the socket and its directory, and cuts what is open', async () => {
    const extra = await startSocketRelay({ upstream: adminEndpoint(pg.adminUrl).upstream });
    const client = new Client({ host: extra.dir, user: role.name, password: role.password, database: DB });
    client.on('error', () => undefined);
    await client.connect();
    await extra.close();
    assert.equal(existsSync(extra.dir), false, 'the directory is gone');
    await assert.rejects(client.query('SELECT 1'), 'the session was cut');
    await client.end().catch(() => undefined);
  });
});
