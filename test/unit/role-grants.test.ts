import { createHash, createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSectionSchema, sectionTables } from '../../src/profile/database-profile-schema.js';
import {
  MAX_IDENTIFIER_BYTES,
  ROLE_PREFIX,
  createRoleStatements,
  sessionBounds,
  dropRoleStatements,
  encodeRoleComment,
  parseRoleComment,
  quoteIdent,
  quoteLiteral,
  revokeFromPublicStatement,
  roleName,
  scramSha256Verifier,
  terminateSessionsQuery,
  type GrantObjects,
  type RoleSpec,
} from '../../src/database/role-grants.js';
import {
  classPrivilege,
  toolPrivilege,
  unenforcedDatabaseHint,
  type DatabasePrivilege,
} from '../../src/policy/database-privilege.js';
import { HINT_DEFAULTS, type ToolHints } from '../../src/policy/hints.js';

const PRIVILEGES: DatabasePrivilege[] = ['read', 'append', 'write'];

function hints(partial: Partial<ToolHints>): ToolHints {
  return { ...HINT_DEFAULTS, ...partial };
}

const READ = hints({ readOnlyHint: true });
const APPEND = hints({ readOnlyHint: false, destructiveHint: false });
const WRITE = hints({ readOnlyHint: false, destructiveHint: true });

describe('privileges from hints', () => {
  it('readOnly → read, only adds → append, destructive → write, for every combination', () => {
    for (const readOnlyHint of [true, false]) {
      for (const destructiveHint of [true, false]) {
        for (const idempotentHint of [true, false]) {
          for (const openWorldHint of [true, false]) {
            const expected = readOnlyHint ? 'read' : destructiveHint ? 'write' : 'append';
            const h = { readOnlyHint, destructiveHint, idempotentHint, openWorldHint };
            assert.equal(classPrivilege(h), expected, JSON.stringify(h));
          }
        }
      }
    }
  });

  it('missing hints mean the worst case: write', () => {
    assert.equal(classPrivilege(HINT_DEFAULTS), 'write');
  });

  it('a tool never gets more than the ceiling, and never more than its hints', () => {
    const table = PRIVILEGES.flatMap((ceiling) =>
      [READ, APPEND, WRITE].map((h) => `${classPrivilege(h)}/${ceiling}→${toolPrivilege(h, ceiling)}`),
    );
    assert.deepEqual(table, [
      'read/read→read',
      'append/read→read',
      'write/read→read',
      'read/append→read',
      'append/append→append',
      'write/append→append',
      'read/write→read',
      'append/write→append',
      'write/write→write',
    ]);
  });

  it('says which hint a shared role does not make true', () => {
    assert.equal(unenforcedDatabaseHint(READ, 'read'), undefined);
    assert.equal(unenforcedDatabaseHint(WRITE, 'read'), undefined, 'less than claimed is not a broken promise');
    assert.equal(unenforcedDatabaseHint(READ, 'append')?.hint, 'readOnlyHint');
    assert.equal(unenforcedDatabaseHint(APPEND, 'write')?.hint, 'destructiveHint');
    assert.match(unenforcedDatabaseHint(READ, 'write')?.reason ?? '', /write privilege/);
  });
});

describe('roleName', () => {
  it('is the prefix, the session id and the class id, in lower case with underscores', () => {
    assert.equal(roleName('AB12cd34', 'ro-offline'), 'hintbox_ab12cd34_ro_offline');
    assert.ok(roleName('ab12cd34', 'rw-online').startsWith(ROLE_PREFIX), 'has the prefix');
  });

  it('stays within 63 bytes, and long or odd class ids stay distinct', () => {
    const long = 'x'.repeat(200);
    const names = [
      roleName('ab12cd34', long),
      roleName('ab12cd34', long + 'y'),
      roleName('ab12cd34', 'Ünïcode class'),
      roleName('ab12cd34', 'ünïcode class'),
      roleName('ab12cd34', 'a"; DROP ROLE postgres; --'),
    ];
    for (const name of names) {
      assert.ok(Buffer.byteLength(name) <= MAX_IDENTIFIER_BYTES, `${name} fits in 63 bytes`);
      assert.match(name, /^hintbox_ab12cd34_[a-z0-9_]+$/);
    }
    assert.equal(new Set(names).size, names.length, 'all distinct');
    assert.equal(roleName('ab12cd34', long), roleName('ab12cd34', long), 'deterministic');
  });

  it('refuses a session id that is not letters and digits', () => {
    assert.throws(() => roleName('ab_12', 'ro'), /session id/);
    assert.throws(() => roleName('', 'ro'), /session id/);
    assert.throws(() => roleName('x'.repeat(33), 'ro'), /session id/);
  });
});

describe('quoting', () => {
  it('doubles quotes in identifiers and literals, and uses E-strings for backslashes', () => {
    assert.equal(quoteIdent('we"ird name'), '"we""ird name"');
    assert.equal(quoteLiteral("it's"), "'it''s'");
    assert.equal(quoteLiteral('a\\b'), "E'a\\\\b'");
    assert.throws(() => quoteIdent('a\0b'), /NUL/);
    assert.throws(() => quoteIdent(''), /non-empty/);
    assert.throws(() => quoteLiteral('a\0b'), /NUL/);
  });
});

describe('scramSha256Verifier', () => {
  // RFC 7677, section 3: user "user", password "pencil".
  const salt = Buffer.from('W22ZaJ0SNY7soEsUEjb6gQ==', 'base64');
  const authMessage =
    'n=user,r=rOprNGfwEbeRWgbNEkqO,' +
    'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,' +
    'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0';

  it("has Postgres's format and matches the RFC 7677 exchange (server signature and client proof)", () => {
    const verifier = scramSha256Verifier('pencil', salt);
    const match = /^SCRAM-SHA-256\$4096:([^$]+)\$([^:]+):(.+)$/.exec(verifier);
    assert.ok(match, `Postgres's verifier format: ${verifier}`);
    assert.equal(match[1], 'W22ZaJ0SNY7soEsUEjb6gQ==');
    const storedKey = Buffer.from(match[2]!, 'base64');
    const serverKey = Buffer.from(match[3]!, 'base64');

    const serverSignature = createHmac('sha256', serverKey).update(authMessage).digest('base64');
    assert.equal(serverSignature, '6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=');

    const proof = Buffer.from('dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=', 'base64');
    const clientSignature = createHmac('sha256', storedKey).update(authMessage).digest();
    const clientKey = Buffer.from(proof.map((b, i) => b ^ clientSignature[i]!));
    assert.deepEqual(createHash('sha256').update(clientKey).digest(), storedKey);
  });

  it('refuses passwords that SASLprep could change', () => {
    assert.throws(() => scramSha256Verifier('pässword', salt), /printable ASCII/);
    assert.throws(() => scramSha256Verifier('with space', salt), /printable ASCII/);
  });
});

describe('role comments', () => {
  const comment = { session: 'ab12cd34', class: 'ro-offline', host: 'box', pid: 4242, database: 'app' };

  it('round-trips, and anything else is not a hintbox comment', () => {
    assert.deepEqual(parseRoleComment(encodeRoleComment(comment)), comment);
    for (const other of [null, '', 'a role for reports', '{"session":"x"}', JSON.stringify({ ...comment, pid: '1' })]) {
      assert.equal(parseRoleComment(other), undefined, String(other));
    }
    assert.equal(parseRoleComment(JSON.stringify({ ...comment })), undefined, 'needs the hintbox marker');
  });
});

describe('createRoleStatements', () => {
  const spec = (privilege: DatabasePrivilege): RoleSpec => ({
    name: 'hintbox_ab12cd34_ro_offline',
    password: 'SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy',
    privilege,
    database: 'app',
    schemas: ['app', 'Sales "EU"'],
    validUntil: new Date('2030-01-02T03:04:05.000Z'),
    connectionLimit: 5,
    bounds: sessionBounds(600_000),
    comment: { session: 'ab12cd34', class: 'ro-offline', host: 'box', pid: 4242, database: 'app' },
  });
  const objects: GrantObjects = {
    relations: [
      { schema: 'app', name: 'items', kind: 'table' },
      { schema: 'app', name: 'totals', kind: 'materialized-view' },
      { schema: 'Sales "EU"', name: 'orders', kind: 'partitioned-table' },
    ],
    sequences: [{ schema: 'app', name: 'items_id_seq' }],
  };
  const ROLE = '"hintbox_ab12cd34_ro_offline"';
  const COMMON = [
    `CREATE ROLE ${ROLE} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT CONNECTION LIMIT 5 PASSWORD 'SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy' VALID UNTIL '2030-01-02T03:04:05.000Z'`,
    `COMMENT ON ROLE ${ROLE} IS '{"hintbox":1,"session":"ab12cd34","class":"ro-offline","host":"box","pid":4242,"database":"app"}'`,
    `GRANT CONNECT ON DATABASE "app" TO ${ROLE}`,
    `GRANT USAGE ON SCHEMA "app", "Sales ""EU""" TO ${ROLE}`,
    `GRANT SELECT ON TABLE "app"."items", "app"."totals", "Sales ""EU"""."orders" TO ${ROLE}`,
  ];
  const BOUNDS = [
    `ALTER ROLE ${ROLE} SET statement_timeout = 600000`,
    `ALTER ROLE ${ROLE} SET idle_in_transaction_session_timeout = 60000`,
    `ALTER ROLE ${ROLE} SET idle_session_timeout = 600000`,
  ];

  it('read: CONNECT, USAGE, SELECT, and the read-only default as a second layer', () => {
    assert.deepEqual(createRoleStatements(spec('read'), objects), [
      ...COMMON,
      `ALTER ROLE ${ROLE} SET default_transaction_read_only = on`,
      ...BOUNDS,
    ]);
  });

  it('append: + INSERT (not on a materialized view) and USAGE on the sequences', () => {
    assert.deepEqual(createRoleStatements(spec('append'), objects), [
      ...COMMON,
      `GRANT INSERT ON TABLE "app"."items", "Sales ""EU"""."orders" TO ${ROLE}`,
      `GRANT USAGE ON SEQUENCE "app"."items_id_seq" TO ${ROLE}`,
      ...BOUNDS,
    ]);
  });

  it('write: + UPDATE, DELETE', () => {
    assert.deepEqual(createRoleStatements(spec('write'), objects), [
      ...COMMON,
      `GRANT INSERT ON TABLE "app"."items", "Sales ""EU"""."orders" TO ${ROLE}`,
      `GRANT USAGE ON SEQUENCE "app"."items_id_seq" TO ${ROLE}`,
      `GRANT UPDATE, DELETE ON TABLE "app"."items", "Sales ""EU"""."orders" TO ${ROLE}`,
      ...BOUNDS,
    ]);
  });

  it('never grants TRUNCATE, DDL, TEMP, EXECUTE, ownership or membership, at any privilege', () => {
    for (const privilege of PRIVILEGES) {
      const sql = createRoleStatements(spec(privilege), objects).join(';\n');
      for (const forbidden of [
        /TRUNCATE/,
        /REFERENCES/,
        /TRIGGER/,
        /\bCREATE\b(?! ROLE)/,
        /TEMP/,
        /EXECUTE/,
        /OWNER/,
        /ALL PRIVILEGES/,
        /\bIN ROLE\b/,
        /GRANT "?pg_/,
        /WITH GRANT OPTION/,
        /\b(?<!NO)(SUPERUSER|CREATEDB|CREATEROLE|REPLICATION|BYPASSRLS)\b/,
        /\bINHERIT\b/,
      ]) {
        assert.doesNotMatch(sql, forbidden, `${privilege}: ${forbidden}`);
      }
    }
  });

  it('splits long object lists into statements of at most 100 objects', () => {
    const many: GrantObjects = {
      relations: Array.from({ length: 250 }, (_, i) => ({ schema: 'app', name: `t${i}`, kind: 'table' as const })),
      sequences: [],
    };
    const selects = createRoleStatements(spec('read'), many).filter((s) => s.startsWith('GRANT SELECT'));
    assert.deepEqual(
      selects.map((s) => s.split(', ').length),
      [100, 100, 50],
    );
  });

  it('refuses a name without the prefix, a bad connection limit or an invalid date', () => {
    assert.throws(() => createRoleStatements({ ...spec('read'), name: 'reports' }, objects), /must start with/);
    assert.throws(() => createRoleStatements({ ...spec('read'), connectionLimit: 0 }, objects), /connection limit/);
    assert.throws(() => createRoleStatements({ ...spec('read'), validUntil: new Date('x') }, objects), /validUntil/);
    for (const statementTimeoutMs of [0, 1.5, 2 ** 31]) {
      const bounds = { ...sessionBounds(1_000), statementTimeoutMs };
      assert.throws(() => createRoleStatements({ ...spec('read'), bounds }, objects), /session bounds/);
    }
  });

  // proves: DB-SESSION-BOUNDS
  it('bounds statements and idle sessions by the call timeout, and idle transactions by a minute at most', () => {
    assert.deepEqual(sessionBounds(2_000), {
      statementTimeoutMs: 2_000,
      idleInTransactionTimeoutMs: 2_000,
      idleSessionTimeoutMs: 2_000,
    });
    assert.deepEqual(sessionBounds(600_000), {
      statementTimeoutMs: 600_000,
      idleInTransactionTimeoutMs: 60_000,
      idleSessionTimeoutMs: 600_000,
    });
    assert.equal(sessionBounds(0.4).statementTimeoutMs, 1, 'never 0, which would mean no bound');
  });
});

describe('teardown and revoke statements', () => {
  it('terminates, drops what the role owns, then the role', () => {
    assert.equal(
      terminateSessionsQuery("hintbox_a_b'c"),
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'hintbox_a_b''c' AND pid <> pg_backend_pid()",
    );
    assert.deepEqual(dropRoleStatements('hintbox_a_b'), ['DROP OWNED BY "hintbox_a_b"', 'DROP ROLE "hintbox_a_b"']);
  });

  it('writes REVOKE … FROM PUBLIC for each kind of object', () => {
    assert.equal(
      revokeFromPublicStatement('TEMPORARY', { type: 'DATABASE', name: 'app' }),
      'REVOKE TEMPORARY ON DATABASE "app" FROM PUBLIC',
    );
    assert.equal(
      revokeFromPublicStatement('INSERT', { type: 'TABLE', name: { schema: 'a', name: 't' }, columns: ['x', 'Y'] }),
      'REVOKE INSERT ("x", "Y") ON TABLE "a"."t" FROM PUBLIC',
    );
    assert.equal(
      revokeFromPublicStatement('EXECUTE', { type: 'ROUTINE', signature: 'app.f(integer)' }),
      'REVOKE EXECUTE ON ROUTINE app.f(integer) FROM PUBLIC',
    );
    assert.equal(
      revokeFromPublicStatement('UPDATE', { type: 'LARGE OBJECT', oid: 16400 }),
      'REVOKE UPDATE ON LARGE OBJECT 16400 FROM PUBLIC',
    );
    assert.equal(
      revokeFromPublicStatement('DELETE, INSERT', { type: 'TABLE', name: { schema: 'a', name: 't' } }),
      'REVOKE DELETE, INSERT ON TABLE "a"."t" FROM PUBLIC',
    );
    for (const bad of ['ALL; DROP', 'INSERT,', ', INSERT', 'INSERT,,UPDATE', 'insert']) {
      assert.throws(() => revokeFromPublicStatement(bad, { type: 'DATABASE', name: 'app' }), /not a privilege/, bad);
    }
  });
});

describe('DatabaseSectionSchema', () => {
  const valid = { adminUrlEnv: 'HINTBOX_PG_URL', database: 'app', schemas: ['app'], privilege: 'read' };

  function issues(input: unknown): string[] {
    const parsed = DatabaseSectionSchema.safeParse(input);
    assert.equal(parsed.success, false, 'the section is refused');
    return parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  }

  it('fills in bounded defaults', () => {
    assert.deepEqual(DatabaseSectionSchema.parse(valid), { ...valid, roleTtlMinutes: 480, connectionLimit: 10 });
  });

  it('refuses a connection URL written inline, in any field or under a url-like key, with one clear message', () => {
    for (const [input, at] of [
      [{ ...valid, adminUrlEnv: 'postgres://admin:secret@db/app' }, 'adminUrlEnv'],
      [{ ...valid, database: 'postgresql://admin:secret@db/app' }, 'database'],
      [{ ...valid, schemas: ['POSTGRESQL://db/app'] }, 'schemas.0'],
      [{ ...valid, url: 'postgres://admin:secret@db/app' }, 'url'],
      [{ ...valid, adminUrl: 'postgres://admin:secret@db/app' }, 'adminUrl'],
      [{ ...valid, connectionString: 'host=db' }, 'connectionString'],
    ] as const) {
      const found = issues(input);
      assert.equal(found.length, 1, `one problem for ${at}: ${found.join(' | ')}`);
      assert.match(
        found[0]!,
        new RegExp(`^${at.replace('.', '\\.')}: a connection URL must not be written in the profile`),
      );
    }
    assert.match(issues({ ...valid, password: 'secret' })[0]!, /^password: a password must not be written/);
  });

  it('refuses bad names, an empty schema list, an unknown privilege and out-of-range limits', () => {
    assert.deepEqual(
      issues({
        ...valid,
        adminUrlEnv: 'HINTBOX-PG',
        database: 'a'.repeat(64),
        schemas: [],
        privilege: 'admin',
        roleTtlMinutes: 100_000,
        connectionLimit: 0,
        extra: 1,
      }).map((i) => i.split(':')[0]),
      ['adminUrlEnv', 'database', 'schemas', 'privilege', 'roleTtlMinutes', 'connectionLimit', ''],
    );
  });

  it('needs schema-qualified tables when several schemas are listed, and only from those schemas', () => {
    assert.deepEqual(issues({ ...valid, schemas: ['a', 'b'], tables: ['t', 'c.t', 'a.t'] }), [
      'tables.0: write the table as schema.t: several schemas are listed',
      'tables.1: schema "c" is not in schemas (a, b)',
    ]);
    const parsed = DatabaseSectionSchema.parse({ ...valid, tables: ['items', 'app.orders'] });
    assert.deepEqual(sectionTables(parsed), [
      { schema: 'app', name: 'items' },
      { schema: 'app', name: 'orders' },
    ]);
  });
});
