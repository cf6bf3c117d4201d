import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  DATABASE_CLASSES,
  DatabaseNotPreparedError,
  EGRESS_EXTENSIONS,
  GRANT_CHECKS,
  LARGE_OBJECT_CREATORS,
  checkGrants,
  problemsIn,
  type CheckedSection,
  type DatabaseProblemKind,
  type GrantCheck,
} from '../../src/database/grant-checks.js';

const SECTION: CheckedSection = {
  database: 'app',
  schemas: ['app', 'audit'],
  tables: ['app.items', 'audit.log'],
  connectionLimit: 5,
};

function check(kind: DatabaseProblemKind): GrantCheck {
  const found = GRANT_CHECKS.find((c) => c.kind === kind);
  assert.ok(found, `a check for ${kind}`);
  return found;
}

/** What each check finds for the rows given (no Postgres: the rows are what its query would return). */
function found(kind: DatabaseProblemKind, rows: object[], section: CheckedSection = SECTION) {
  return problemsIn(check(kind), rows, section).map((p) => [p.severity, p.message, p.statement]);
}

/** A query function that answers each check's SQL with the rows given for its kind, and records the calls. */
function fakeCatalog(rows: Partial<Record<DatabaseProblemKind, object[]>>) {
  const calls: { kind: DatabaseProblemKind; params: readonly unknown[] }[] = [];
  const query = (sql: string, params: readonly unknown[]) => {
    const c = GRANT_CHECKS.find((candidate) => candidate.sql === sql);
    assert.ok(c, `an unknown query: ${sql}`);
    calls.push({ kind: c.kind, params });
    return Promise.resolve(rows[c.kind] ?? []);
  };
  return { query, calls };
}

describe('the grant checks table', () => {
  it('reports in a fixed order, one check per kind', () => {
    assert.deepEqual(
      GRANT_CHECKS.map((c) => c.kind),
      [
        'missing-schema',
        'missing-table',
        'public-temp',
        'public-create-database',
        'public-create-schema',
        'public-execute-security-definer',
        'egress-extension',
        'public-usage-foreign-data-wrapper',
        'public-usage-foreign-server',
        'untrusted-language-routine',
        'connection-budget',
        'public-write-relation',
        'public-write-column',
        'public-write-large-object',
        'large-object-compat-privileges',
        'public-create-large-object',
      ],
    );
  });

  it('gives each query exactly the parameters it uses ($1 … $n)', () => {
    for (const c of GRANT_CHECKS) {
      const used = new Set([...c.sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
      const params = c.params?.(SECTION) ?? [];
      assert.deepEqual(
        [...used].sort(),
        params.map((_, i) => i + 1),
        `${c.kind}: placeholders and parameters`,
      );
    }
  });

  it('only the large objects a role creates for itself are a warning; everything else refuses', () => {
    assert.deepEqual(
      GRANT_CHECKS.filter((c) => c.severity === 'warn').map((c) => c.kind),
      ['public-create-large-object'],
    );
  });
});

describe('checkGrants', () => {
  it('runs every check once, in order, with the section as parameters, and finds nothing in a clean catalogue', async () => {
    const { query, calls } = fakeCatalog({
      'connection-budget': [{ max: 100, reserved: 3 }],
      'large-object-compat-privileges': [{ on: false }],
    });
    assert.deepEqual(await checkGrants(query, SECTION), []);
    assert.deepEqual(
      calls.map((c) => c.kind),
      GRANT_CHECKS.map((c) => c.kind),
    );
    const params = Object.fromEntries(calls.map((c) => [c.kind, c.params]));
    assert.deepEqual(params['missing-schema'], [['app', 'audit']]);
    assert.deepEqual(params['missing-table'], [
      ['app', 'audit'],
      ['items', 'log'],
    ]);
    assert.deepEqual(params['egress-extension'], [['app', 'audit'], EGRESS_EXTENSIONS]);
    assert.deepEqual(params['public-create-large-object'], [LARGE_OBJECT_CREATORS]);
    assert.deepEqual(params['public-temp'], []);
  });

  it('without tables in the section, asks for none (a one-schema section names tables without a schema)', async () => {
    const { query, calls } = fakeCatalog({});
    await checkGrants(query, { ...SECTION, tables: undefined });
    assert.deepEqual(calls.find((c) => c.kind === 'missing-table')?.params, [[], []]);
    const oneSchema = fakeCatalog({});
    await checkGrants(oneSchema.query, { ...SECTION, schemas: ['app'], tables: ['items'] });
    assert.deepEqual(oneSchema.calls.find((c) => c.kind === 'missing-table')?.params, [['app'], ['items']]);
  });

  it('reports the problems of every check in table order, each with its fix', async () => {
    const { query } = fakeCatalog({
      'public-create-large-object': [{ signature: 'lo_creat(integer)' }],
      'missing-schema': [{ name: 'audit' }],
      'public-temp': [{ privilege: 'TEMPORARY' }],
    });
    const problems = await checkGrants(query, SECTION);
    assert.deepEqual(
      problems.map((p) => [p.kind, p.severity, p.statement]),
      [
        ['missing-schema', 'refuse', undefined],
        ['public-temp', 'refuse', 'REVOKE TEMPORARY ON DATABASE "app" FROM PUBLIC'],
        ['public-create-large-object', 'warn', 'REVOKE EXECUTE ON ROUTINE pg_catalog.lo_creat(integer) FROM PUBLIC'],
      ],
    );
    assert.ok(!('statement' in problems[0]!), 'no statement key when nothing fixes it');
  });

  it('passes a failing query on', async () => {
    await assert.rejects(
      checkGrants(() => Promise.reject(new Error('permission denied for table pg_authid')), SECTION),
      /permission denied/,
    );
  });
});

describe('what each check makes of catalogue rows', () => {
  it('missing schemas and tables name the database, and have no fix', () => {
    assert.deepEqual(found('missing-schema', [{ name: 'audit' }]), [
      ['refuse', 'schema "audit" does not exist in database "app"', undefined],
    ]);
    assert.deepEqual(found('missing-table', [{ schema: 'app', name: 'items' }]), [
      ['refuse', 'table app.items does not exist in database "app"', undefined],
    ]);
  });

  it("PUBLIC's TEMP and CREATE on the database", () => {
    assert.deepEqual(found('public-temp', [{ privilege: 'TEMPORARY' }], { ...SECTION, database: 'my "db"' }), [
      [
        'refuse',
        'PUBLIC may create temporary tables in database "my \\"db\\"" (TEMP; Postgres grants it by default)',
        'REVOKE TEMPORARY ON DATABASE "my ""db""" FROM PUBLIC',
      ],
    ]);
    assert.deepEqual(found('public-create-database', [{ privilege: 'CREATE' }]), [
      ['refuse', 'PUBLIC may create schemas in database "app" (CREATE)', 'REVOKE CREATE ON DATABASE "app" FROM PUBLIC'],
    ]);
  });

  it('CREATE on schemas, and EXECUTE on SECURITY DEFINER routines', () => {
    assert.deepEqual(found('public-create-schema', [{ name: 'public' }]), [
      [
        'refuse',
        'PUBLIC may create objects in schema "public" (CREATE)',
        'REVOKE CREATE ON SCHEMA "public" FROM PUBLIC',
      ],
    ]);
    assert.deepEqual(found('public-execute-security-definer', [{ signature: 'app.sd_write()' }]), [
      [
        'refuse',
        "PUBLIC may execute the SECURITY DEFINER routine app.sd_write() (it runs with its owner's rights)",
        'REVOKE EXECUTE ON ROUTINE app.sd_write() FROM PUBLIC',
      ],
    ]);
  });

  it('egress: an extension names three of its functions and revokes them all in one statement', () => {
    const routines = ['dblink(text)', 'dblink(text,text)', 'dblink_connect(text)', 'dblink_exec(text)'];
    assert.deepEqual(found('egress-extension', [{ name: 'dblink', routines }]), [
      [
        'refuse',
        'extension dblink is installed and PUBLIC may execute 4 of its functions (dblink(text), dblink(text,text), dblink_connect(text), …): a role without a network could make Postgres connect out',
        'REVOKE EXECUTE ON ROUTINE dblink(text), dblink(text,text), dblink_connect(text), dblink_exec(text) FROM PUBLIC',
      ],
    ]);
    assert.match(
      found('egress-extension', [{ name: 'http', routines: ['http_get(text)'] }])[0]![1]!,
      /\(http_get\(text\)\)/,
    );
  });

  it('egress: USAGE on foreign-data wrappers and servers, and untrusted-language routines', () => {
    assert.deepEqual(found('public-usage-foreign-data-wrapper', [{ name: 'postgres_fdw' }]), [
      [
        'refuse',
        'PUBLIC has USAGE on foreign data wrapper postgres_fdw: a role could define connections to a host of its choice',
        'REVOKE USAGE ON FOREIGN DATA WRAPPER "postgres_fdw" FROM PUBLIC',
      ],
    ]);
    assert.deepEqual(found('public-usage-foreign-server', [{ name: 'elsewhere' }]), [
      [
        'refuse',
        'PUBLIC has USAGE on foreign server elsewhere: a role could define connections to a host of its choice',
        'REVOKE USAGE ON FOREIGN SERVER "elsewhere" FROM PUBLIC',
      ],
    ]);
    assert.deepEqual(found('untrusted-language-routine', [{ signature: 'app.fetch(text)', language: 'plpython3u' }]), [
      [
        'refuse',
        'PUBLIC may execute app.fetch(text), written in the untrusted language plpython3u (it can open files and connections as the server)',
        'REVOKE EXECUTE ON ROUTINE app.fetch(text) FROM PUBLIC',
      ],
    ]);
  });

  it('connection budget: the run may hold at most half of what Postgres leaves to ordinary clients', () => {
    // 100 connections, 4 reserved: 96 left, half is 48, so 16 per role for the run's three roles.
    const settings = [{ max: 100, reserved: 4 }];
    assert.equal(DATABASE_CLASSES, 3);
    assert.deepEqual(found('connection-budget', settings, { ...SECTION, connectionLimit: 16 }), []);
    assert.deepEqual(found('connection-budget', settings, { ...SECTION, connectionLimit: 17 }), [
      [
        'refuse',
        "database.connectionLimit 17: a run's 3 roles could hold 51 of the 96 connections Postgres leaves to ordinary clients (max_connections 100, 4 reserved); at most 16 leaves half for everyone else",
        undefined,
      ],
    ]);
  });

  it('write privileges on relations, sequences and columns', () => {
    assert.deepEqual(
      found('public-write-relation', [
        { schema: 'app', name: 'items', kind: 'r', privileges: ['INSERT'] },
        { schema: 'app', name: 'items_id_seq', kind: 'S', privileges: ['USAGE'] },
        { schema: 'app', name: 'open', kind: 'p', privileges: ['DELETE', 'INSERT', 'TRUNCATE'] },
      ]),
      [
        ['refuse', 'PUBLIC has INSERT on relation app.items', 'REVOKE INSERT ON TABLE "app"."items" FROM PUBLIC'],
        [
          'refuse',
          'PUBLIC has USAGE on sequence app.items_id_seq',
          'REVOKE USAGE ON SEQUENCE "app"."items_id_seq" FROM PUBLIC',
        ],
        [
          'refuse',
          'PUBLIC has DELETE, INSERT, TRUNCATE on relation app.open',
          'REVOKE DELETE, INSERT, TRUNCATE ON TABLE "app"."open" FROM PUBLIC',
        ],
      ],
    );
    assert.deepEqual(
      found('public-write-column', [{ schema: 'app', name: 'items', privilege: 'UPDATE', columns: ['name', 'note'] }]),
      [
        [
          'refuse',
          'PUBLIC has UPDATE on columns name, note of app.items',
          'REVOKE UPDATE ("name", "note") ON TABLE "app"."items" FROM PUBLIC',
        ],
      ],
    );
  });

  it('large objects: PUBLIC writes, compat privileges on, and creating them (a warning)', () => {
    assert.deepEqual(found('public-write-large-object', [{ oid: '16402' }]), [
      ['refuse', 'PUBLIC may write large object 16402 (UPDATE)', 'REVOKE UPDATE ON LARGE OBJECT 16402 FROM PUBLIC'],
    ]);
    assert.deepEqual(found('large-object-compat-privileges', [{ on: false }]), []);
    assert.deepEqual(found('large-object-compat-privileges', [{ on: true }]), [
      [
        'refuse',
        'lo_compat_privileges is on: every role may read and write every large object (set it off in postgresql.conf)',
        undefined,
      ],
    ]);
    assert.deepEqual(found('public-create-large-object', [{ signature: 'lo_from_bytea(oid,bytea)' }]), [
      [
        'warn',
        'PUBLIC may execute lo_from_bytea(oid,bytea): a role can store large objects of its own (dropped with the role)',
        'REVOKE EXECUTE ON ROUTINE pg_catalog.lo_from_bytea(oid,bytea) FROM PUBLIC',
      ],
    ]);
  });
});

describe('DatabaseNotPreparedError', () => {
  it('lists every problem on its own line, with its fix when there is one', () => {
    const error = new DatabaseNotPreparedError('app', [
      { kind: 'missing-schema', severity: 'refuse', message: 'schema "x" does not exist in database "app"' },
      {
        kind: 'public-temp',
        severity: 'refuse',
        message: 'PUBLIC may create temporary tables',
        statement: 'REVOKE TEMPORARY ON DATABASE "app" FROM PUBLIC',
      },
    ]);
    assert.equal(
      error.message,
      [
        'database "app" has grants that would let a hintbox role do more than its hints allow; run `hintbox db prepare` or fix them:',
        '  - schema "x" does not exist in database "app"',
        '  - PUBLIC may create temporary tables (fix: REVOKE TEMPORARY ON DATABASE "app" FROM PUBLIC;)',
      ].join('\n'),
    );
    assert.equal(error.problems.length, 2);
  });
});
