import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { before, describe, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import assert from 'node:assert/strict';
import { Client, type DatabaseError } from 'pg';
import { DatabaseConnectionError, withDatabase } from '../../src/database/admin-url.js';
import type { DatabaseSection } from '../../src/profile/database-profile-schema.js';
import { ROLE_PREFIX } from '../../src/database/role-grants.js';
import { DatabaseNotPreparedError } from '../../src/database/grant-checks.js';
import { RoleProvisioner, type CreatedRole } from '../../src/database/role-provisioner.js';
import type { SessionIdentity } from '../../src/engine/docker/container-spec.js';
import { makeIsOwnerAlive } from '../../src/engine/docker/sweep.js';
import { POSTGRES_ADMIN_PASSWORD, startPostgres, type StartedPostgres } from './support/postgres.js';

const DB = 'app';
const SECTION: Omit<DatabaseSection, 'adminUrlEnv'> = {
  database: DB,
  schemas: ['app'],
  privilege: 'write',
  roleTtlMinutes: 60,
  connectionLimit: 4,
};

/**
 * The data every role is tried against. `GRANT CREATE ON SCHEMA public TO PUBLIC` is what a
 * database created before PostgreSQL 15 (or upgraded from one) has; app's CREATE for PUBLIC is
 * an operator's mistake. The SECURITY DEFINER function writes with its owner's (the admin's) rights.
 */
const FIXTURE = `
  CREATE SCHEMA app;
  CREATE SCHEMA private;
  CREATE TABLE app.items (id serial PRIMARY KEY, name text UNIQUE NOT NULL, qty int NOT NULL);
  CREATE TABLE app.events (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, note text NOT NULL);
  CREATE TABLE private.keys (id int PRIMARY KEY, secret text NOT NULL);
  INSERT INTO app.items (name, qty) VALUES ('apple', 3), ('pear', 5), ('plum', 7);
  INSERT INTO app.events (note) VALUES ('opened'), ('counted');
  INSERT INTO private.keys VALUES (1, 'do not read');
  CREATE FUNCTION app.sd_write() RETURNS void LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog
    AS $$ INSERT INTO app.items (name, qty) VALUES ('definer', 1) $$;
  GRANT CREATE ON SCHEMA public TO PUBLIC;
  GRANT CREATE ON SCHEMA app TO PUBLIC;
  COPY (SELECT 100, 'copied', 9) TO '/tmp/hintbox-copy-in';
`;

let pg: StartedPostgres;
let admin: Client;
let provisioner: RoleProvisioner;
let sessionCounter = 0;

function identity(overrides: Partial<SessionIdentity> = {}): SessionIdentity {
  sessionCounter += 1;
  return { sessionId: `t${sessionCounter}`, ownerHost: os.hostname(), ownerPid: process.pid, ...overrides };
}

async function connectAs(role: Pick<CreatedRole, 'name' | 'password'>, database = DB): Promise<Client> {
  const client = new Client({ host: pg.host, port: pg.port, user: role.name, password: role.password, database });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

async function asRole<T>(role: CreatedRole, work: (client: Client) => Promise<T>): Promise<T> {
  const client = await connectAs(role);
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Runs the statements as the role; all but the last must succeed, the last must fail. Its SQLSTATE. */
async function failure(role: CreatedRole, statements: readonly string[]): Promise<string> {
  return asRole(role, async (client) => {
    for (const statement of statements.slice(0, -1)) await client.query(statement);
    const last = statements.at(-1)!;
    try {
      await client.query(last);
    } catch (error) {
      return (error as DatabaseError).code ?? `no SQLSTATE: ${(error as Error).message}`;
    }
    return assert.fail(`${last} succeeded as ${role.name}`);
  });
}

async function loginError(role: Pick<CreatedRole, 'name' | 'password'>): Promise<string> {
  try {
    const client = await connectAs(role);
    await client.end();
  } catch (error) {
    return (error as DatabaseError).code ?? (error as Error).message;
  }
  return assert.fail(`${role.name} could still log in`);
}

/**
 * Everything a role could change, as the admin sees it: each table's rows (md5 of them in
 * order), each sequence's state, the list of relations and their columns outside the system
 * schemas, large objects and routines.
 */
async function fingerprint(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const { rows: relations } = await admin.query<{ name: string; kind: string }>(
    `SELECT format('%I.%I', n.nspname, c.relname) AS name, c.relkind AS kind
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
        AND c.relkind IN ('r', 'S') ORDER BY 1`,
  );
  for (const { name, kind } of relations) {
    const sql =
      kind === 'S'
        ? `SELECT last_value || ':' || is_called AS v FROM ${name}`
        : `SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS v FROM ${name} t`;
    out[name] = (await admin.query<{ v: string }>(sql)).rows[0]!.v;
  }
  const { rows } = await admin.query<{ columns: string; los: string; routines: string }>(
    `SELECT (SELECT string_agg(format('%s.%I', a.attrelid::regclass, a.attname), ',' ORDER BY 1)
               FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
                AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
            (SELECT count(*) FROM pg_largeobject_metadata)::text AS los,
            (SELECT count(*) FROM pg_proc WHERE pronamespace::regnamespace::text NOT IN ('pg_catalog', 'information_schema'))::text AS routines`,
  );
  Object.assign(out, rows[0]);
  return out;
}

async function hintboxRoles(): Promise<string[]> {
  const { rows } = await admin.query<{ name: string }>(
    'SELECT rolname AS name FROM pg_roles WHERE left(rolname, length($1)) = $1 ORDER BY 1',
    [ROLE_PREFIX],
  );
  return rows.map((r) => r.name);
}

function connectProvisioner(options: { now?: () => Date; section?: Partial<typeof SECTION> } = {}) {
  return RoleProvisioner.connect({
    adminUrl: pg.adminUrl,
    section: { ...SECTION, ...options.section },
    ...(options.now ? { now: options.now } : {}),
  });
}

integrationSuite('database roles against a real PostgreSQL 15', { timeout: 300_000 }, (suite) => {
  before(async () => {
    pg = await startPostgres();
    const setup = new Client({ connectionString: pg.adminUrl });
    await setup.connect();
    await setup.query(`CREATE DATABASE ${DB}`);
    await setup.query('CREATE DATABASE other');
    await setup.end();
    admin = new Client({ connectionString: withDatabase(pg.adminUrl, DB) });
    await admin.connect();
    await admin.query(FIXTURE);
    provisioner = await connectProvisioner();
  });

  suite.defer(async () => {
    for (const name of admin ? await hintboxRoles().catch(() => []) : []) {
      await provisioner?.dropRole(name).catch(() => undefined);
    }
    await provisioner?.close();
    await admin?.end().catch(() => undefined);
    await pg?.stop();
  });

  describe('admin connection', () => {
    it('names host, port and the reason when the password is wrong, never the password', async () => {
      const url = new URL(pg.adminUrl);
      url.password = 'Wr0ng-S3cret';
      const wrong = await RoleProvisioner.connect({ adminUrl: url.toString(), section: SECTION }).then(
        () => assert.fail('connected with a wrong password'),
        (e: unknown) => e as Error,
      );
      assert.ok(wrong instanceof DatabaseConnectionError, `a DatabaseConnectionError, got ${String(wrong)}`);
      assert.match(wrong.message, new RegExp(`at ${pg.host}:${pg.port} `));
      assert.match(wrong.message, /password authentication failed/);
      assert.doesNotMatch(wrong.message, /Wr0ng-S3cret/);
      assert.doesNotMatch(wrong.message, new RegExp(POSTGRES_ADMIN_PASSWORD));
    });

    it('names host, port and the reason when nothing listens there', async () => {
      const url = new URL(pg.adminUrl);
      url.port = '1';
      const error = await RoleProvisioner.connect({ adminUrl: url.toString(), section: SECTION }).then(
        () => assert.fail('connected to port 1'),
        (e: unknown) => e as Error,
      );
      assert.ok(error instanceof DatabaseConnectionError, `a DatabaseConnectionError, got ${String(error)}`);
      assert.match(error.message, new RegExp(`at ${pg.host}:1 .*ECONNREFUSED`));
      assert.doesNotMatch(error.message, new RegExp(POSTGRES_ADMIN_PASSWORD));
    });
  });

  describe('checkDatabase and prepare', () => {
    it("finds PUBLIC's TEMP and CREATE grants and its EXECUTE on SECURITY DEFINER routines", async () => {
      const problems = await provisioner.checkDatabase();
      const refusing = problems.filter((p) => p.severity === 'refuse');
      assert.deepEqual(
        refusing.map((p) => [p.kind, p.statement]),
        [
          ['public-temp', 'REVOKE TEMPORARY ON DATABASE "app" FROM PUBLIC'],
          ['public-create-schema', 'REVOKE CREATE ON SCHEMA "app" FROM PUBLIC'],
          ['public-create-schema', 'REVOKE CREATE ON SCHEMA "public" FROM PUBLIC'],
          ['public-execute-security-definer', 'REVOKE EXECUTE ON ROUTINE app.sd_write() FROM PUBLIC'],
        ],
      );
      assert.ok(
        refusing.every((p) => p.message.length > 0 && !p.message.includes('\n')),
        'each problem has a one-line message',
      );
      assert.deepEqual(
        problems.filter((p) => p.severity === 'warn').map((p) => p.kind),
        ['public-create-large-object', 'public-create-large-object', 'public-create-large-object'],
        'lo_creat, lo_create and lo_from_bytea (lo_import is not PUBLIC by default)',
      );
    });

    // proves: DB-READ
    it('refuses to create a role while those grants exist, naming each, and creates nothing', async () => {
      const error = await provisioner
        .createRole({ identity: identity(), classId: 'ro-offline', privilege: 'read' })
        .then(
          () => assert.fail('created a role in an unprepared database'),
          (e: unknown) => e as Error,
        );
      assert.ok(error instanceof DatabaseNotPreparedError, `a DatabaseNotPreparedError, got ${String(error)}`);
      assert.equal(error.problems.length, 4);
      for (const needle of ['TEMPORARY ON DATABASE "app"', 'SCHEMA "app"', 'SCHEMA "public"', 'app.sd_write()']) {
        assert.ok(error.message.includes(needle), `the message names ${needle}:\n${error.message}`);
      }
      assert.deepEqual(await hintboxRoles(), []);
    });

    it('prepare() runs each REVOKE, reporting it, and then nothing is found', async () => {
      const seen: string[] = [];
      const result = await provisioner.prepare((s) => seen.push(s));
      assert.deepEqual(seen, result.statements);
      assert.equal(result.statements.length, 7);
      assert.deepEqual(result.remaining, []);
      const { rows } = await admin.query<Record<string, boolean>>(
        `SELECT has_database_privilege('public', 'app', 'TEMP') AS temp,
                has_schema_privilege('public', 'app', 'CREATE') AS create_app,
                has_schema_privilege('public', 'public', 'CREATE') AS create_public,
                has_function_privilege('public', 'app.sd_write()', 'EXECUTE') AS definer,
                has_function_privilege('public', 'lo_create(oid)', 'EXECUTE') AS lo_create`,
      );
      assert.deepEqual(rows[0], {
        temp: false,
        create_app: false,
        create_public: false,
        definer: false,
        lo_create: false,
      });
      assert.deepEqual(await provisioner.checkDatabase(), []);
    });

    it('finds a relation PUBLIC may write in several ways as one problem, and prepare() revokes them all', async () => {
      await admin.query(
        'CREATE TABLE app.open_to_all (x int); GRANT INSERT, UPDATE, DELETE ON app.open_to_all TO PUBLIC',
      );
      try {
        assert.deepEqual(
          (await provisioner.checkDatabase()).map((p) => [p.kind, p.statement]),
          [['public-write-relation', 'REVOKE DELETE, INSERT, UPDATE ON TABLE "app"."open_to_all" FROM PUBLIC']],
        );
        assert.deepEqual((await provisioner.prepare()).remaining, []);
        const { rows } = await admin.query<{ writes: boolean }>(
          `SELECT has_table_privilege('public', 'app.open_to_all', 'INSERT, UPDATE, DELETE') AS writes`,
        );
        assert.equal(rows[0]?.writes, false);
      } finally {
        await admin.query('DROP TABLE app.open_to_all');
      }
    });

    // proves: DB-CONNECTIONS
    it("refuses a connection limit with which a run's roles could take half of what Postgres leaves its clients", async () => {
      await using greedy = await connectProvisioner({ section: { connectionLimit: 40 } });
      const problems = (await greedy.checkDatabase()).filter((p) => p.kind === 'connection-budget');
      assert.deepEqual(
        problems.map((p) => [p.severity, p.statement]),
        [['refuse', undefined]],
      );
      assert.match(
        problems[0]!.message,
        /connectionLimit 40: a run's 3 roles could hold 120 of the 97 connections .*max_connections 100, 3 reserved.*at most 16/,
      );
      await using modest = await connectProvisioner({ section: { connectionLimit: 16 } });
      assert.deepEqual(
        (await modest.checkDatabase()).filter((p) => p.kind === 'connection-budget'),
        [],
      );
    });

    it('reports a missing schema or table without a fix', async () => {
      await using other = await connectProvisioner({
        section: { schemas: ['app', 'nowhere'], tables: ['app.items', 'app.ghost', 'nowhere.t'] },
      });
      const problems = await other.checkDatabase();
      assert.deepEqual(
        problems.map((p) => [p.kind, p.statement]),
        [
          ['missing-schema', undefined],
          ['missing-table', undefined],
          ['missing-table', undefined],
        ],
      );
      assert.match(problems[1]!.message, /app\.ghost/);
    });
  });

  describe('the read role', () => {
    let role: CreatedRole;
    let baseline: Record<string, string>;

    before(async () => {
      role = await provisioner.createRole({ identity: identity(), classId: 'ro-offline', privilege: 'read' });
      baseline = await fingerprint();
    });

    it('is a plain login role: no attributes, no memberships, SCRAM, a connection limit and a bounded VALID UNTIL', async () => {
      const { rows } = await admin.query(
        `SELECT rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, rolbypassrls,
                rolconnlimit, rolvaliduntil, left(rolpassword, 14) AS scheme,
                (SELECT rolconfig FROM pg_roles r WHERE r.oid = a.oid) AS rolconfig,
                (SELECT count(*)::int FROM pg_auth_members m WHERE m.member = a.oid) AS memberships,
                shobj_description(a.oid, 'pg_authid') AS comment
           FROM pg_authid a WHERE rolname = $1`,
        [role.name],
      );
      const r = rows[0];
      assert.ok(r, 'the role exists');
      assert.equal(role.name, `${ROLE_PREFIX}t${sessionCounter}_ro_offline`);
      assert.deepEqual(
        [r.rolsuper, r.rolinherit, r.rolcreaterole, r.rolcreatedb, r.rolreplication, r.rolbypassrls],
        [false, false, false, false, false, false],
      );
      assert.equal(r.rolcanlogin, true);
      assert.equal(r.rolconnlimit, 4);
      assert.equal(r.scheme, 'SCRAM-SHA-256$');
      assert.equal(r.memberships, 0);
      assert.deepEqual(r.rolconfig, [
        'default_transaction_read_only=on',
        'statement_timeout=600000',
        'idle_in_transaction_session_timeout=60000',
        'idle_session_timeout=600000',
      ]);
      const ttl = (r.rolvaliduntil as Date).getTime() - Date.now();
      assert.ok(ttl > 55 * 60_000 && ttl <= 60 * 60_000, `VALID UNTIL is about an hour away (${ttl} ms)`);
      assert.equal(JSON.parse(r.comment as string).pid, process.pid);
    });

    // proves: DB-READ
    it('reads its schema', async () => {
      const { rows } = await asRole(role, (c) => c.query<{ name: string }>('SELECT name FROM app.items ORDER BY id'));
      assert.deepEqual(
        rows.map((r) => r.name),
        ['apple', 'pear', 'plum'],
      );
    });

    // An explicit id: only the INSERT privilege decides, not the serial's sequence.
    const INSERT = "INSERT INTO app.items (id, name, qty) VALUES (100, 'intruder', 1)";
    const attempts: { title: string; statements: string[] }[] = [
      { title: 'INSERT', statements: [INSERT] },
      { title: 'UPDATE', statements: ['UPDATE app.items SET qty = qty + 1'] },
      { title: 'DELETE', statements: ['DELETE FROM app.items'] },
      { title: 'TRUNCATE', statements: ['TRUNCATE app.items'] },
      { title: 'CREATE TABLE in its schema', statements: ['CREATE TABLE app.intruder (x int)'] },
      { title: 'CREATE TABLE in public', statements: ['CREATE TABLE public.intruder (x int)'] },
      { title: 'CREATE TEMP TABLE', statements: ['CREATE TEMP TABLE intruder (x int)'] },
      { title: 'ALTER TABLE', statements: ['ALTER TABLE app.items ADD COLUMN intruder int'] },
      { title: 'SET TRANSACTION READ WRITE then INSERT', statements: ['BEGIN', 'SET TRANSACTION READ WRITE', INSERT] },
      {
        title: 'SET default_transaction_read_only = off then INSERT',
        statements: ['SET default_transaction_read_only = off', INSERT],
      },
      {
        title: 'the multi-statement SELECT 1; COMMIT; DROP TABLE',
        statements: ['SELECT 1; COMMIT; DROP TABLE app.items;'],
      },
      { title: 'nextval()', statements: ["SELECT nextval('app.items_id_seq')"] },
      { title: 'COPY to a server file', statements: ["COPY app.items TO '/tmp/hintbox-copy-out'"] },
      { title: 'COPY from a server file', statements: ["COPY app.items (id, name, qty) FROM '/tmp/hintbox-copy-in'"] },
      { title: 'pg_read_file', statements: ["SELECT pg_read_file('/etc/passwd')"] },
      { title: 'a SECURITY DEFINER function that writes', statements: ['SELECT app.sd_write()'] },
      { title: 'lo_create (a large object of its own)', statements: ['SELECT lo_create(0)'] },
      { title: 'SET ROLE to the admin', statements: ['SET ROLE postgres'] },
      { title: 'SELECT outside its schemas', statements: ['SELECT * FROM private.keys'] },
    ];
    for (const { title, statements } of attempts) {
      it(`fails ${title}, also with the read-only default switched off, and no table changes`, async () => {
        const first = await failure(role, statements);
        assert.ok(['42501', '25006'].includes(first), `${title} failed for lack of privilege (got ${first})`);
        const second = await failure(role, ['SET default_transaction_read_only = off', ...statements]);
        assert.equal(second, '42501', `with the second layer off, the grants refuse ${title}`);
        assert.deepEqual(await fingerprint(), baseline);
      });
    }
  });

  describe('the append role', () => {
    let role: CreatedRole;
    let original: string;
    const originalRows = async () =>
      (
        await admin.query<{ v: string }>(
          "SELECT md5(string_agg(t::text, '|' ORDER BY id)) AS v FROM app.items t WHERE id <= 3",
        )
      ).rows[0]!.v;

    before(async () => {
      role = await provisioner.createRole({ identity: identity(), classId: 'rw-append', privilege: 'append' });
      original = await originalRows();
    });

    // proves: DB-APPEND
    it('INSERTs into a serial and an identity table; existing rows stay as they were', async () => {
      await asRole(role, async (c) => {
        await c.query("INSERT INTO app.items (name, qty) VALUES ('added', 2)");
        await c.query("INSERT INTO app.events (note) VALUES ('appended')");
        const done = await c.query("INSERT INTO app.items (name, qty) VALUES ('apple', 0) ON CONFLICT DO NOTHING");
        assert.equal(done.rowCount, 0, 'ON CONFLICT DO NOTHING adds nothing');
      });
      const { rows } = await admin.query(
        "SELECT (SELECT qty FROM app.items WHERE name = 'added') AS qty, (SELECT count(*)::int FROM app.events WHERE note = 'appended') AS events",
      );
      assert.deepEqual(rows[0], { qty: 2, events: 1 });
      assert.equal(await originalRows(), original);
    });

    for (const [title, sql] of [
      ['UPDATE', 'UPDATE app.items SET qty = 0'],
      ['DELETE', 'DELETE FROM app.items'],
      ['TRUNCATE', 'TRUNCATE app.items'],
      [
        'INSERT … ON CONFLICT DO UPDATE',
        "INSERT INTO app.items (name, qty) VALUES ('apple', 0) ON CONFLICT (name) DO UPDATE SET qty = 0",
      ],
      ['CREATE TABLE', 'CREATE TABLE app.intruder (x int)'],
    ] as const) {
      it(`fails ${title} and no table changes`, async () => {
        const before = await fingerprint();
        assert.equal(await failure(role, [sql]), '42501');
        assert.deepEqual(await fingerprint(), before);
        assert.equal(await originalRows(), original);
      });
    }
  });

  describe('the write role', () => {
    // proves: DB-APPEND
    it('UPDATEs, DELETEs and upserts, but cannot TRUNCATE or create tables', async () => {
      const role = await provisioner.createRole({ identity: identity(), classId: 'rw-online', privilege: 'write' });
      await asRole(role, async (c) => {
        await c.query("UPDATE app.items SET qty = 30 WHERE name = 'apple'");
        await c.query(
          "INSERT INTO app.items (name, qty) VALUES ('pear', 50) ON CONFLICT (name) DO UPDATE SET qty = 50",
        );
        await c.query("DELETE FROM app.items WHERE name = 'added'");
      });
      const { rows } = await admin.query<{ name: string; qty: number }>('SELECT name, qty FROM app.items ORDER BY id');
      assert.deepEqual(rows, [
        { name: 'apple', qty: 30 },
        { name: 'pear', qty: 50 },
        { name: 'plum', qty: 7 },
      ]);
      const before = await fingerprint();
      assert.equal(await failure(role, ['TRUNCATE app.items']), '42501');
      assert.equal(await failure(role, ['CREATE TABLE app.intruder (x int)']), '42501');
      assert.deepEqual(await fingerprint(), before);
    });

    // proves: DB-READ
    it('is capped by the profile: asking for write under a read ceiling gives a read role', async () => {
      await using capped = await connectProvisioner({ section: { privilege: 'read' } });
      const role = await capped.createRole({ identity: identity(), classId: 'rw-online', privilege: 'write' });
      assert.equal(role.privilege, 'read');
      assert.equal(await failure(role, ['SET default_transaction_read_only = off', 'DELETE FROM app.items']), '42501');
      await capped.dropRole(role.name);
    });
  });

  describe('teardown', () => {
    // proves: DB-TEARDOWN
    it('dropRole ends the open sessions, drops the role, and its password no longer logs in', async () => {
      const role = await provisioner.createRole({ identity: identity(), classId: 'ro-offline', privilege: 'read' });
      const open = await connectAs(role);
      assert.equal((await open.query('SELECT 1 AS one')).rows[0].one, 1);
      assert.equal(await provisioner.dropRole(role.name), true);
      await assert.rejects(open.query('SELECT 1'), 'the open session was terminated');
      await open.end().catch(() => undefined);
      assert.equal(await loginError(role), '28P01');
      assert.ok(!(await hintboxRoles()).includes(role.name), 'the role is gone');
      assert.equal(await provisioner.dropRole(role.name), false, 'dropping it again is a no-op');
    });

    it('terminateSessions ends the sessions and keeps the role; renewRole moves VALID UNTIL', async () => {
      const role = await provisioner.createRole({ identity: identity(), classId: 'ro-offline', privilege: 'read' });
      const open = await connectAs(role);
      assert.equal(await provisioner.terminateSessions(role.name), 1);
      await assert.rejects(open.query('SELECT 1'), 'the session was terminated');
      await open.end().catch(() => undefined);
      const again = await connectAs(role);
      await again.end();

      const validUntil = async () =>
        (
          await admin.query<{ v: Date }>('SELECT rolvaliduntil AS v FROM pg_roles WHERE rolname = $1', [role.name])
        ).rows[0]!.v.getTime();
      const before = await validUntil();
      await new Promise((r) => setTimeout(r, 20));
      const renewed = await provisioner.renewRole(role.name);
      assert.equal(await validUntil(), renewed.getTime());
      assert.ok(renewed.getTime() > before, 'later than before');
      await provisioner.dropRole(role.name);
    });

    it('a role past its VALID UNTIL cannot log in', async () => {
      await using past = await connectProvisioner({ now: () => new Date(Date.now() - 2 * 60 * 60_000) });
      const role = await past.createRole({ identity: identity(), classId: 'ro-offline', privilege: 'read' });
      assert.equal(await loginError(role), '28P01');
      await past.dropRole(role.name);
    });

    it('refuses to drop a role without the hintbox prefix', async () => {
      await assert.rejects(provisioner.dropRole('postgres'), /not a hintbox role/);
      const { rows } = await admin.query("SELECT count(*)::int AS n FROM pg_roles WHERE rolname = 'postgres'");
      assert.equal(rows[0].n, 1);
    });

    // proves: DB-TEARDOWN
    it("sweepRoles drops the roles of a dead owner, even from another database, and leaves live and other hosts' roles", async () => {
      const deadPid = spawnSync(process.execPath, ['-e', '']).pid;
      assert.ok(deadPid > 0, 'a pid that has exited');
      const dead = await provisioner.createRole({
        identity: identity({ ownerPid: deadPid }),
        classId: 'ro-offline',
        privilege: 'read',
      });
      const deadWriter = await provisioner.createRole({
        identity: identity({ ownerPid: deadPid }),
        classId: 'rw-online',
        privilege: 'write',
      });
      const live = await provisioner.createRole({ identity: identity(), classId: 'ro-offline', privilege: 'read' });
      const elsewhere = await provisioner.createRole({
        identity: identity({ ownerHost: 'another-host', ownerPid: deadPid }),
        classId: 'ro-offline',
        privilege: 'read',
      });
      const open = await connectAs(dead);

      // A provisioner of another profile (another database) sweeps: DROP OWNED must run in "app".
      await using sweeper = await connectProvisioner({ section: { database: 'other', schemas: ['public'] } });
      const dropped = await sweeper.sweepRoles(makeIsOwnerAlive(os.hostname()));
      assert.deepEqual(dropped.sort(), [dead.name, deadWriter.name].sort());
      await assert.rejects(open.query('SELECT 1'), "the dead session's connection was terminated");
      await open.end().catch(() => undefined);
      const remaining = await hintboxRoles();
      assert.ok(remaining.includes(live.name), 'the live owner keeps its role');
      assert.ok(remaining.includes(elsewhere.name), "another host's role is left alone");
      assert.ok(!remaining.includes(dead.name) && !remaining.includes(deadWriter.name), 'dead roles are gone');
      assert.equal(await loginError(dead), '28P01');

      await provisioner.dropRole(live.name);
      await provisioner.dropRole(elsewhere.name);
    });

    it('sweepRoles drops a dead role whose database has since been dropped', async () => {
      const deadPid = spawnSync(process.execPath, ['-e', '']).pid;
      await admin.query('CREATE DATABASE gone');
      const section = { database: 'gone', schemas: ['public'] };
      const gone = await connectProvisioner({ section });
      let role: CreatedRole;
      try {
        await gone.prepare();
        role = await gone.createRole({ identity: identity({ ownerPid: deadPid }), classId: 'ro', privilege: 'read' });
      } finally {
        await gone.close();
      }
      await admin.query('DROP DATABASE gone');
      assert.deepEqual(await provisioner.sweepRoles(makeIsOwnerAlive(os.hostname())), [role.name]);
      assert.ok(!(await hintboxRoles()).includes(role.name), 'the role is gone');
    });

    it('after all drops, no role with the hintbox prefix remains', async () => {
      for (const name of await hintboxRoles()) await provisioner.dropRole(name);
      assert.deepEqual(await hintboxRoles(), []);
    });
  });
});
