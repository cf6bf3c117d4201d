import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import type pg from 'pg';
import { integrationSuite } from './support/suite.js';
import { ROLE_PREFIX } from '../../src/database/role-grants.js';
import { auditOf, copyOfShippedProfile, hintboxCommand, runHintbox } from './support/hintbox-process.js';
import { startPostgres, type StartedPostgres } from './support/postgres.js';
import { adminOfNewDatabase } from './support/database.js';
import { scratchFolder } from '../support/scratch-folder.js';

/**
 * Database servers as they are published: a pool of connections that outlives each call. The
 * reference server-postgres 0.6.2 keeps its idle connections in a node-postgres pool with no
 * handler for their errors; hintbox must end only the sessions that still hold something at a
 * call's end, so the pool's clean idle connection lives on. And the sockets hintbox makes for a
 * sandbox (its gate, its database relay) work whatever the length of $TMPDIR.
 */

const DATABASE = 'pooled';

/** The text of a tool result's content. */
function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.map((c) => c.text ?? '').join('\n');
}

integrationSuite('a pooled database server, as published', { timeout: 600_000 }, (suite) => {
  let postgres: StartedPostgres;
  let admin: pg.Client;
  let env: Record<string, string>;

  const count = async (): Promise<number> =>
    (await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM items')).rows[0]!.n;

  before(async () => {
    postgres = await startPostgres();
    suite.use(postgres);
    admin = await adminOfNewDatabase(postgres.adminUrl, DATABASE);
    suite.defer(() => admin.end().catch(() => undefined));
    suite.defer(async () => {
      const { rows } = await admin.query(`SELECT rolname FROM pg_roles WHERE left(rolname, length($1)) = $1`, [
        ROLE_PREFIX,
      ]);
      assert.deepEqual(rows, [], 'no role with the hintbox prefix left');
    });
    await admin.query(`CREATE TABLE public.items (id serial PRIMARY KEY, name text NOT NULL);
      INSERT INTO public.items (name) VALUES ('apple'), ('pear');`);
    env = { POSTGRES_ADMIN_URL: postgres.adminUrl, POSTGRES_DATABASE: DATABASE };
    const profile = copyOfShippedProfile('postgres');
    const built = await hintboxCommand(['images', 'build', profile], env);
    assert.equal(built.code, 0, built.stderr);
    const prepared = await hintboxCommand(['db', 'prepare', profile], env);
    assert.equal(prepared.code, 0, prepared.stderr);
  });

  // proves: DB-POOL-KEPT
  it('server-postgres 0.6.2 as shipped, without a preload, answers 20 calls mixing reads and refused escapes: none dies, each escape is audited as a hint violation', async () => {
    const profile = copyOfShippedProfile('postgres');
    assert.doesNotMatch(readFileSync(profile, 'utf8'), /NODE_OPTIONS/, 'the profile patches nothing of the server');
    const approved = await hintboxCommand(['approve', profile, '--all', '--yes'], env);
    assert.equal(approved.code, 0, approved.stderr);
    await using hintbox = await runHintbox(profile, { env });
    // The server's READ ONLY transaction ends at the COMMIT, and the SET turns off the role's
    // read-only default: the read role's lack of privilege refuses the write.
    const escapes = [
      'SET default_transaction_read_only = off; COMMIT; DELETE FROM items',
      "SET default_transaction_read_only = off; COMMIT; INSERT INTO items (name) VALUES ('plum')",
      "SET default_transaction_read_only = off; COMMIT; UPDATE items SET name = 'fig'",
    ];
    let refused = 0;
    for (let i = 0; i < 20; i++) {
      if (i % 3 === 1) {
        const sql = escapes[refused % escapes.length]!;
        const answer = await hintbox.client
          .callTool({ name: 'query', arguments: { sql } })
          .then(textOf, (error: Error) => error.message);
        assert.match(answer, /permission denied for table items/, `call ${i}: ${answer}`);
        refused++;
      } else {
        const read = await hintbox.client.callTool({
          name: 'query',
          arguments: { sql: 'SELECT count(*)::int AS n FROM items' },
        });
        assert.deepEqual(JSON.parse(textOf(read)), [{ n: 2 }], `call ${i}: ${textOf(read)}`);
      }
    }
    assert.equal(await count(), 2, 'no row was written');
    // In call order: every call audited, none found its sandbox dead, each escape a hint violation.
    const calls = (await auditOf<{ tool: string; outcome: string | null; hintViolation: string | null }>('postgres'))
      .filter((r) => r.tool === 'query')
      .reverse();
    assert.equal(calls.length, 20, 'every call is audited');
    assert.deepEqual(
      calls.filter((r) => r.outcome === 'sandbox-died'),
      [],
      'no call found a dead sandbox',
    );
    calls.forEach((r, i) => {
      if (i % 3 === 1) assert.match(r.hintViolation ?? '', /^readOnlyHint: Postgres refused .*42501/, `call ${i}`);
      else assert.equal(r.hintViolation, null, `call ${i}`);
    });
    assert.doesNotMatch(hintbox.stderr(), /sandbox \S+ (died|exited)/);
  });

  // proves: SOCKET-PATH-LENGTH
  it('runs a database session with TMPDIR a 90-character folder: the gate and relay sockets are made in a short, owner-only folder and removed after', async () => {
    const base = scratchFolder('hintbox-long-tmp-');
    const tmp = path.join(base, 'x'.repeat(90 - base.length - 1));
    assert.equal(tmp.length, 90);
    mkdirSync(tmp);
    const profile = copyOfShippedProfile('postgres');
    const approved = await hintboxCommand(['approve', profile, '--all', '--yes'], env);
    assert.equal(approved.code, 0, approved.stderr);
    const before = new Set(readdirSync('/tmp').filter((name) => /^hintbox-(io|pg)-/.test(name)));
    {
      await using hintbox = await runHintbox(profile, { env: { ...env, TMPDIR: tmp } });
      const read = await hintbox.client.callTool({
        name: 'query',
        arguments: { sql: 'SELECT count(*)::int AS n FROM items' },
      });
      assert.doesNotMatch(textOf(read), /too long|could not/, `${textOf(read)}: ${hintbox.stderr().slice(-400)}`);
      assert.deepEqual(JSON.parse(textOf(read)), [{ n: 2 }], textOf(read));
      // The call went through the gate's socket (whose folder goes once the gate connected); the
      // relay's folder, named with hintbox's pid, is in /tmp: others may not list or write it.
      const own = readdirSync('/tmp').filter((name) => new RegExp(`^hintbox-(io|pg)-${hintbox.pid}-`).test(name));
      assert.equal(
        own.filter((name) => name.startsWith('hintbox-pg-')).length,
        1,
        `the relay's folder in /tmp: ${own.join(', ')}`,
      );
      for (const name of own)
        assert.equal(statSync(path.join('/tmp', name)).mode & 0o066, 0, `${name} is not open to others`);
    }
    const after = readdirSync('/tmp').filter((name) => /^hintbox-(io|pg)-/.test(name) && !before.has(name));
    assert.deepEqual(after, [], 'the socket folders were removed');
  });
});
