import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import pg from 'pg';
import { parse as parseConnectionString } from 'pg-connection-string';
import { ROLE_PREFIX } from '../../src/database/role-grants.js';
import {
  DBLIAR_IMAGE,
  DBLINGER_IMAGE,
  allHintboxContainers,
  containersOf,
  ensureDatabaseFixtureImage,
  ensureDblingerImage,
  eventually,
} from './support/docker.js';
import { hintboxCommand, outcomeOf, runHintbox, writeProfile, type RunningHintbox } from './support/hintbox-process.js';
import { startPostgres, type StartedPostgres } from './support/postgres.js';
import { connect, serve, stop } from './support/serve-process.js';

/**
 * Issue 3 through the whole stack: `hintbox run` on a fixture server whose tools reach Postgres
 * from network-less sandboxes through hintbox's socket relay, each sandbox as a role of its own.
 * The server's `query` tool claims readOnlyHint and writes anyway; `add_item` claims to only add.
 */

const ADMIN_ENV = 'HINTBOX_TEST_PG_ADMIN';
const DATABASE = 'shop';

interface Credentials {
  user: string;
  password: string;
  database: string;
  host: string;
  url: string;
  argUrl: string;
  envUrl: string;
}

integrationSuite('a database server under hintbox run', { timeout: 600_000 }, (suite) => {
  let postgres: StartedPostgres;
  let admin: pg.Client;
  let profile: string;
  let env: Record<string, string>;
  const server = `dbliar-${process.pid}`;

  const checksum = async (): Promise<string> => {
    const { rows } = await admin.query<{ sum: string }>(
      `SELECT md5(coalesce(string_agg(i::text, '|' ORDER BY id), '')) AS sum FROM shop.items i`,
    );
    return rows[0]!.sum;
  };
  const hintboxRoles = async (): Promise<string[]> => {
    const { rows } = await admin.query<{ name: string }>(
      `SELECT rolname AS name FROM pg_roles WHERE left(rolname, length($1)) = $1 ORDER BY 1`,
      [ROLE_PREFIX],
    );
    return rows.map((r) => r.name);
  };
  /** Whether a role's password still logs in (over TCP, as a client on the host would). */
  const logsIn = async (credentials: Credentials): Promise<boolean> => {
    const client = new pg.Client({
      host: postgres.host,
      port: postgres.port,
      user: credentials.user,
      password: credentials.password,
      database: credentials.database,
      connectionTimeoutMillis: 10_000,
    });
    try {
      await client.connect();
      await client.end();
      return true;
    } catch {
      return false;
    }
  };
  const call = async (hintbox: RunningHintbox, name: string, args: Record<string, unknown> = {}) =>
    outcomeOf(await hintbox.client.callTool({ name, arguments: args }));
  const credentialsOf = async (hintbox: RunningHintbox): Promise<Credentials> => {
    const result = await call(hintbox, 'credentials');
    assert.ok(result.ok, `credentials: ${JSON.stringify(result)}`);
    return result.value as Credentials;
  };

  before(async () => {
    [postgres] = await Promise.all([startPostgres(), ensureDatabaseFixtureImage()]);
    suite.use(postgres);
    const setup = new pg.Client({ connectionString: postgres.adminUrl });
    await setup.connect();
    await setup.query(`CREATE DATABASE ${DATABASE}`);
    await setup.end();
    admin = new pg.Client({ connectionString: postgres.adminUrl.replace(/\/postgres$/, `/${DATABASE}`) });
    await admin.connect();
    suite.defer(() => admin.end().catch(() => undefined));
    // Roles are leftovers too: every run drops its own, the next start a killed run's.
    suite.defer(async () => assert.deepEqual(await hintboxRoles(), [], 'no role with the hintbox prefix left'));
    await admin.query(`CREATE SCHEMA shop;
      CREATE TABLE shop.items (id serial PRIMARY KEY, name text NOT NULL);
      INSERT INTO shop.items (name) VALUES ('apple'), ('pear');`);
    profile = writeProfile({
      name: server,
      // The sandbox's own URL handed on as an argument and under another name, as servers want it.
      server: { image: DBLIAR_IMAGE, args: ['${sandbox:DATABASE_URL}'] },
      env: { URL_FROM_PROFILE: '${sandbox:DATABASE_URL}' },
      trust: 'trusted',
      network: 'none',
      database: { adminUrlEnv: ADMIN_ENV, database: DATABASE, schemas: ['shop'], privilege: 'write' },
      limits: { pids: 64, memory: '128m' },
    });
    env = { [ADMIN_ENV]: postgres.adminUrl };
  });

  it('reports an unset admin URL variable as a profile error (exit 2), without echoing anything', async () => {
    const { code, stderr } = await hintboxCommand(['plan', profile]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, new RegExp(`database\\.adminUrlEnv: environment variable ${ADMIN_ENV} is not set`));
  });

  it('names host, port and reason when the admin connection fails, never the password, and starts nothing', async () => {
    const wrong = postgres.adminUrl.replace(/:[^:@/]+@/, ':not-the-password-42@');
    const { code, stderr } = await hintboxCommand(['run', profile], { [ADMIN_ENV]: wrong });
    assert.equal(code, 1, stderr);
    assert.match(stderr, new RegExp(`${postgres.host}:${postgres.port}`));
    assert.match(stderr, /password authentication failed/);
    assert.ok(!stderr.includes('not-the-password-42'), `the password was echoed: ${stderr}`);
    // Only this server's: other runs may share the engine.
    const started = (await allHintboxContainers()).filter((c) => c.Labels['hintbox.server'] === server);
    assert.deepEqual(started, []);
  });

  // proves: DB-READ
  it('refuses an unprepared database before any container starts, naming each grant', async () => {
    const { code, stderr } = await hintboxCommand(['plan', profile], env);
    assert.equal(code, 1, stderr);
    assert.match(stderr, /PUBLIC may create temporary tables in database "shop"/);
    assert.match(stderr, /hintbox db prepare/);
    assert.deepEqual(await hintboxRoles(), []);
  });

  it('db prepare prints each REVOKE it runs, and afterwards the database is ready', async () => {
    const { code, stdout, stderr } = await hintboxCommand(['db', 'prepare', profile], env);
    assert.equal(code, 0, `${stdout}\n${stderr}`);
    assert.match(stdout, /^REVOKE TEMPORARY ON DATABASE "shop" FROM PUBLIC;$/m);
    assert.match(stdout, /is ready for hintbox roles/);
    const again = await hintboxCommand(['db', 'prepare', profile], env);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /nothing to revoke/);
  });

  it('plans the read tools into a read role and the adding tool into an append role, no network', async () => {
    const { code, stdout, stderr } = await hintboxCommand(['plan', profile, '--json'], env);
    assert.equal(code, 0, stderr);
    const plan = JSON.parse(stdout) as {
      tools: { name: string; sandbox: string; enforced: boolean }[];
      sandboxes: { id: string; network: string; database?: string }[];
    };
    const sandboxOf = (tool: string) => {
      const id = plan.tools.find((t) => t.name === tool)?.sandbox;
      return plan.sandboxes.find((s) => s.id === id);
    };
    assert.deepEqual(sandboxOf('query'), { ...sandboxOf('query'), network: 'none', database: 'read' });
    assert.deepEqual(sandboxOf('add_item'), { ...sandboxOf('add_item'), network: 'none', database: 'append' });
    assert.ok(
      plan.tools.every((t) => t.enforced),
      `every hint is enforced: ${JSON.stringify(plan.tools)}`,
    );
    assert.deepEqual(await hintboxRoles(), [], 'plan drops the discovery role');
  });

  suite.describe('one run', (group) => {
    let hintbox: RunningHintbox & { asked: unknown[] };
    let readRole: Credentials;

    before(async () => {
      // Pinned, so that an untrusted server's tools are asked for rather than blocked.
      const approved = await hintboxCommand(['approve', profile, '--all', '--yes'], env);
      assert.equal(approved.code, 0, approved.stderr);
      hintbox = group.use(await runHintbox(profile, { env }));
      readRole = await credentialsOf(hintbox);
    });

    it('gives the sandbox PG* variables and a DATABASE_URL for the relayed socket and its own role', () => {
      assert.ok(readRole.user.startsWith(ROLE_PREFIX), `role name: ${readRole.user}`);
      assert.equal(readRole.database, DATABASE);
      assert.equal(readRole.host, '/run/hintbox/pg');
      // Every parser takes it: Node's URL, and node-postgres reads the socket folder from it.
      assert.equal(decodeURIComponent(new URL(readRole.url).hostname), '/run/hintbox/pg');
      assert.equal(parseConnectionString(readRole.url).host, '/run/hintbox/pg');
    });

    it("hands the sandbox's own DATABASE_URL to ${sandbox:DATABASE_URL} in server.args and env", () => {
      assert.equal(readRole.argUrl, readRole.url);
      assert.equal(readRole.envUrl, readRole.url);
      assert.equal(parseConnectionString(readRole.argUrl).user, readRole.user);
    });

    // proves: DB-APPEND
    it('a tool that claims to only add inserts through its role', async () => {
      const result = await call(hintbox, 'add_item', {
        sql: "INSERT INTO shop.items (name) VALUES ('added') RETURNING name",
      });
      assert.deepEqual(result, { ok: true, value: 'added' });
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM shop.items WHERE name = 'added'`,
      );
      assert.equal(rows[0]?.n, 1);
    });

    // proves: DB-READ, DB-VIOLATION
    it('a read-only tool cannot write through its DATABASE_URL, the data is unchanged, and the violation is logged and audited', async () => {
      const before = await checksum();
      const asked = hintbox.asked.length;
      const insert = await call(hintbox, 'query', { sql: "INSERT INTO shop.items (name) VALUES ('lie')" });
      assert.equal(insert.ok, false, `the insert must fail: ${JSON.stringify(insert)}`);
      assert.match(insert.error ?? '', /permission denied|read-only transaction/);
      assert.equal(hintbox.asked.length, asked, 'the read-only tool of a trusted server ran without asking');
      const escape = await call(hintbox, 'query', {
        sql: 'SET default_transaction_read_only = off; SELECT 1; COMMIT; DELETE FROM shop.items; DROP TABLE shop.items;',
      });
      assert.equal(escape.ok, false, `the multi-statement escape must fail: ${JSON.stringify(escape)}`);
      assert.equal(await checksum(), before);

      assert.match(hintbox.stderr(), new RegExp(`hint violation: server ${server}, tool query, sandbox \\S+-dbread`));
      assert.match(hintbox.stderr(), /treated as untrusted for the rest of this session/);

      const { code, stdout, stderr } = await hintboxCommand(['audit', '--json', '--server', server, '--tool', 'query']);
      assert.equal(code, 0, stderr);
      const records = stdout
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as { hintViolation: string | null; outcome: string | null });
      const violations = records.filter((r) => r.hintViolation !== null);
      assert.ok(violations.length >= 1, `an audit record names the violation: ${stdout}`);
      assert.match(violations[0]!.hintViolation!, /^readOnlyHint: Postgres refused .*(42501|25006)/);
    });

    // proves: DB-VIOLATION
    it('after the violation, the server is untrusted: its read-only tool now needs a confirmation', async () => {
      const asked = hintbox.asked.length;
      const result = await call(hintbox, 'query', { sql: 'SELECT count(*) FROM shop.items' });
      assert.equal(result.ok, true, JSON.stringify(result));
      assert.equal(hintbox.asked.length, asked + 1, 'the call was confirmed by a person');
    });

    // proves: DB-APPEND
    it('the adding tool cannot delete or update either (append role), and that is a violation too', async () => {
      const before = await checksum();
      const destroy = await call(hintbox, 'add_item', { sql: "DELETE FROM shop.items WHERE name = 'apple'" });
      assert.equal(destroy.ok, false, `the append role cannot delete: ${JSON.stringify(destroy)}`);
      assert.match(destroy.error ?? '', /permission denied for table items/);
      const update = await call(hintbox, 'add_item', { sql: "UPDATE shop.items SET name = 'lie'" });
      assert.equal(update.ok, false, `the append role cannot update: ${JSON.stringify(update)}`);
      assert.equal(await checksum(), before);
      assert.match(
        hintbox.stderr(),
        new RegExp(`hint violation: server ${server}, tool add_item, sandbox \\S+-dbappend`),
      );
    });

    // proves: DB-TEARDOWN
    it('after the run, no role with the hintbox prefix remains and its password no longer logs in', async () => {
      assert.ok(await logsIn(readRole), 'the role logs in while the run lives (control)');
      await hintbox[Symbol.asyncDispose]();
      assert.equal(await hintbox.exited, null);
      assert.deepEqual(await hintboxRoles(), []);
      assert.equal(await logsIn(readRole), false, "the role's password still logs in");
    });
  });

  it('serve shares the sandboxes and roles among clients; SIGTERM during their calls lets them finish, then drops every role, sandbox and socket folder', async () => {
    const relays = (): string[] => readdirSync(os.tmpdir()).filter((name) => name.startsWith('hintbox-pg-'));
    const existing = new Set(relays());
    const serving = await serve([path.dirname(profile)], env);
    const pid = serving.child.pid;
    const clients = await Promise.all([1, 2].map(() => connect(`${serving.url}/mcp/${server}`)));
    try {
      assert.ok((await hintboxRoles()).length > 0, 'the shared sandboxes have their roles (control)');
      const calls = clients.map((client, c) =>
        client.callTool({ name: 'query', arguments: { sql: `SELECT pg_sleep(2), ${c} AS c` } }),
      );
      await new Promise((r) => setTimeout(r, 700));
      serving.child.kill('SIGTERM');
      const results = await Promise.all(calls);
      results.forEach((result, c) =>
        assert.equal(outcomeOf(result).ok, true, `client ${c}: ${JSON.stringify(result)}`),
      );
      assert.equal(await serving.exited, 0, serving.stderr());
      assert.deepEqual(await hintboxRoles(), []);
      assert.deepEqual(await containersOf(pid), []);
      assert.deepEqual(
        relays().filter((name) => !existing.has(name)),
        [],
        'no relay socket folder of the serve left',
      );
    } finally {
      await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
      await stop(serving);
    }
  });

  // proves: DB-SESSION-BOUNDS
  it("ends a sandbox's database sessions when its call ends: a lock its server took and kept is released at once", async () => {
    await ensureDblingerImage();
    const lingerer = writeProfile({
      name: `dblinger-${process.pid}`,
      server: { image: DBLINGER_IMAGE },
      trust: 'trusted',
      network: 'none',
      database: { adminUrlEnv: ADMIN_ENV, database: DATABASE, schemas: ['shop'], privilege: 'read' },
      timeouts: { call: 120 },
      limits: { pids: 64, memory: '128m' },
    });
    const advisoryLocks = async (): Promise<number> => {
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = 4711`,
      );
      return rows[0]!.n;
    };
    await using hintbox = await runHintbox(lingerer, { env });
    assert.deepEqual(await call(hintbox, 'hold_lock'), { ok: true, value: 'locked' });
    // Without the end of the call's sessions the lock would live until the statement timeout (the call's: 120 s).
    await eventually(async () => (await advisoryLocks()) === 0, 10_000, "the lock released with the call's sessions");
    await admin.query('ALTER TABLE shop.items ADD COLUMN lingered int; ALTER TABLE shop.items DROP COLUMN lingered');
  });

  // proves: DB-CALL-END-LISTING
  it("never ends the database session of hintbox's own listing as a call ends: a tools/list that reads the database for 3 s, asked as the announcing call answers, completes", async () => {
    await ensureDblingerImage();
    const lingerer = writeProfile({
      name: `dblinger-list-${process.pid}`,
      server: { image: DBLINGER_IMAGE },
      trust: 'trusted',
      network: 'none',
      database: { adminUrlEnv: ADMIN_ENV, database: DATABASE, schemas: ['shop'], privilege: 'read' },
      limits: { pids: 64, memory: '128m' },
    });
    await using hintbox = await runHintbox(lingerer, { env });
    assert.deepEqual(await call(hintbox, 'announce_tools'), { ok: true, value: 'announced' });
    // The listing's statement began before the call's end judged the sandbox's sessions: a
    // listing counted as nothing in flight had its session ended there, and failed.
    const listedAgain = /changed its tools: listed again|listing the tools again failed/;
    await eventually(async () => listedAgain.test(hintbox.stderr()), 20_000, 'the listing to end');
    assert.match(hintbox.stderr(), /changed its tools: listed again/);
    assert.doesNotMatch(hintbox.stderr(), /listing the tools again failed|lost its database session/);
  });

  // proves: DB-TEARDOWN
  it('after a run killed with SIGKILL, the next start drops its roles: none remains and the password no longer logs in', async () => {
    const killed = await runHintbox(profile, { env });
    const orphan = await credentialsOf(killed);
    process.kill(killed.pid, 'SIGKILL');
    await killed.exited;
    await killed[Symbol.asyncDispose]();
    assert.ok((await hintboxRoles()).includes(orphan.user), 'the killed run left its role (control)');

    const next = await runHintbox(profile, { env });
    try {
      // The tools are approved, so run answers from the lock file at once and opens the database
      // (which sweeps) in the background: wait for the sweep instead of racing it.
      await eventually(
        async () => !(await hintboxRoles()).includes(orphan.user),
        10_000,
        'the orphan role dropped by the next start',
      );
      assert.equal(await logsIn(orphan), false, "the killed run's password still logs in");
      assert.match(next.stderr(), new RegExp(`swept database role ${orphan.user}`));
    } finally {
      await next[Symbol.asyncDispose]();
    }
    assert.deepEqual(await hintboxRoles(), []);
  });
});
