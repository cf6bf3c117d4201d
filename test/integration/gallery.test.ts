import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import pg from 'pg';
import { GenericContainer, Wait } from 'testcontainers';
import { ROLE_PREFIX } from '../../src/database/role-grants.js';
import { CANARY_IMAGE, defaultBridgeGateway, mountsOfClass, sandboxOfClass } from './support/docker.js';
import { auditOf, copyOfShippedProfile, hintboxCommand, runHintbox, sandboxFolder } from './support/hintbox-process.js';
import { startPostgres } from './support/postgres.js';
import { scratchFolder } from '../support/scratch-folder.js';

/**
 * The shipped profiles (profiles/*.yaml), each run as an operator would — a copy of it, its
 * tools approved, `hintbox run` — and proven by one real call whose answer is checked, and by
 * where its tools landed. A broken profile (a server that no longer starts, a tool that moved
 * sandbox) fails here.
 */

/** `hintbox approve <profile> --all`, then `hintbox run <profile>`, as the profiles' headers say. */
async function approvedRun(profile: string, env: Record<string, string> = {}) {
  const approved = await hintboxCommand(['approve', profile, '--all'], env);
  assert.equal(approved.code, 0, approved.stderr);
  return runHintbox(profile, { env });
}

/** The text of a tool result's content. */
function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.map((c) => c.text ?? '').join('\n');
}

/** Where each tool's calls ran, by the audit trail (`hintbox audit --json`): tool → sandboxes, in call order. */
async function sandboxesOfCalls(server: string): Promise<Record<string, string[]>> {
  const calls = (await auditOf<{ tool: string; sandbox: string }>(server)).reverse();
  const where: Record<string, string[]> = {};
  for (const { tool, sandbox } of calls) (where[tool] ??= []).push(sandbox);
  return where;
}

/** A folder made a git repository on the host, with one commit and a file not yet added. */
function gitRepository(): string {
  // Made by the host's user, then given to the sandbox user (git refuses a repository of another's).
  const repo = scratchFolder('hintbox-git-');
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=Host', '-c', 'user.email=host@example.invalid', ...args], { cwd: repo });
  git('init', '-q', '-b', 'main');
  writeFileSync(path.join(repo, 'README.md'), 'a repository\n');
  git('add', 'README.md');
  git('commit', '-q', '-m', 'the first commit of the gallery');
  writeFileSync(path.join(repo, 'untracked.txt'), 'new\n');
  if (process.getuid?.() === 0) execFileSync('chown', ['-R', '10001:10001', repo]);
  return repo;
}

/**
 * `hintbox images build` of a shipped profile, with what the profile needs set to load. A
 * profile given as an npm package is built from the package lock shipped beside it, as it is.
 */
async function buildImageOf(name: string, env: Record<string, string> = {}): Promise<void> {
  const built = await hintboxCommand(['images', 'build', copyOfShippedProfile(name)], env);
  assert.equal(built.code, 0, built.stderr);
  assert.doesNotMatch(built.stderr, /resolving/, `${name}: the shipped package lock is current`);
}

integrationSuite('the gallery of shipped profiles', { timeout: 900_000 }, () => {
  before(async () => {
    // Each server's image takes tens of seconds to build on a cold engine, mostly waiting on npm
    // and Docker: the first builds the Node base too, the others are built side by side.
    await buildImageOf('memory', { MEMORY_DIR: sandboxFolder() });
    await Promise.all([
      buildImageOf('everything'),
      buildImageOf('fetch'),
      buildImageOf('git', { WORKSPACE: sandboxFolder() }),
      buildImageOf('postgres', { POSTGRES_DATABASE: 'gallery' }),
    ]);
  });

  it('memory: an entity created is read back; the read tool reads from a read-only mount', async () => {
    const data = sandboxFolder('hintbox-memory-');
    await using hintbox = await approvedRun(copyOfShippedProfile('memory'), { MEMORY_DIR: data });
    const created = await hintbox.client.callTool({
      name: 'create_entities',
      arguments: { entities: [{ name: 'gallery', entityType: 'test', observations: ['remembered by the gallery'] }] },
    });
    assert.notEqual(created.isError, true, JSON.stringify(created));
    const found = await hintbox.client.callTool({ name: 'open_nodes', arguments: { names: ['gallery'] } });
    assert.match(textOf(found), /remembered by the gallery/);
    assert.match(readFileSync(path.join(data, 'memory.jsonl'), 'utf8'), /remembered by the gallery/);
    assert.deepEqual(await mountsOfClass(hintbox.pid, 'ro-offline'), { '/data': true }, 'open_nodes: read-only');
    assert.deepEqual(await mountsOfClass(hintbox.pid, 'rw-offline'), { '/data': false });
    assert.deepEqual(await sandboxesOfCalls('memory'), {
      create_entities: ['rw-offline'],
      open_nodes: ['ro-offline'],
    });
  });

  it('everything: echo answers, from its one sandbox without mounts or network', async () => {
    await using hintbox = await approvedRun(copyOfShippedProfile('everything'));
    const echoed = await hintbox.client.callTool({ name: 'echo', arguments: { message: 'through the gallery' } });
    assert.equal(textOf(echoed), 'Echo: through the gallery');
    const sandbox = await sandboxOfClass(hintbox.pid, 'nomounts-offline');
    assert.equal(sandbox.HostConfig.NetworkMode, 'none');
    assert.deepEqual(await mountsOfClass(hintbox.pid, 'nomounts-offline'), {});
    assert.deepEqual(await sandboxesOfCalls('everything'), { echo: ['nomounts-offline'] });
  });

  it("fetch: a canary's page on a private address of the host comes back through the open-world sandbox; as shipped, the server's guard refuses it", async () => {
    const profile = copyOfShippedProfile('fetch');
    // The canary is on a private address (its port published at the host's address on the
    // default bridge): the server's own SSRF guard, on in the profile by default, would refuse
    // it. hintbox does not restrict addresses either way.
    const env = { MCP_FETCH_DISABLE_SSRF_GUARD: '1' };
    const approved = await hintboxCommand(['approve', profile, '--all'], env);
    assert.equal(approved.code, 0, approved.stderr);
    const token = `canary-${process.pid}-${Date.now()}`;
    const page = `<html><head><title>Canary</title></head><body><article><h1>The canary</h1><p>${token}</p></article></body></html>`;
    const server = `require('http').createServer((q, s) => {
      if (q.url !== '/page') { s.writeHead(404); s.end(); return; }
      s.writeHead(200, { 'content-type': 'text/html' }); s.end(${JSON.stringify(page)}); })
      .listen(8080, () => console.log('canary listening'))`;
    const canary = await new GenericContainer(CANARY_IMAGE)
      .withCommand(['node', '-e', server])
      .withLabels({ 'hintbox-test': 'canary' })
      .withExposedPorts(8080)
      .withWaitStrategy(Wait.forLogMessage('canary listening'))
      .start();
    const url = `http://${await defaultBridgeGateway(canary.getId())}:${canary.getMappedPort(8080)}/page`;
    try {
      await using hintbox = await runHintbox(profile, { env });
      const fetched = await hintbox.client.callTool({ name: 'imageFetch', arguments: { url } });
      assert.notEqual(fetched.isError, true, JSON.stringify(fetched));
      assert.match(textOf(fetched), new RegExp(token), 'the page the canary served');
      const sandbox = await sandboxOfClass(hintbox.pid, 'nomounts-online');
      assert.match(sandbox.HostConfig.NetworkMode ?? '', /^hintbox-.*-open$/, "the session's own network");
      assert.deepEqual(await sandboxesOfCalls('fetch'), { imageFetch: ['nomounts-online'] });
      await hintbox[Symbol.asyncDispose]();

      // As shipped (the guard's variable unset), the server refuses the private address itself.
      await using guarded = await runHintbox(profile);
      const refused = await guarded.client
        .callTool({ name: 'imageFetch', arguments: { url } })
        .then(textOf, (error: Error) => error.message);
      assert.match(refused, /private\/reserved/);
      assert.doesNotMatch(refused, new RegExp(token));
    } finally {
      await canary.stop();
    }
  });

  // proves: RO-MOUNTS
  it('git: status and log of a host repository answer from a read-only sandbox, and leave .git as it was', async () => {
    const repo = gitRepository();
    const index = readFileSync(path.join(repo, '.git', 'index'));
    await using hintbox = await approvedRun(copyOfShippedProfile('git'), { WORKSPACE: repo });
    const status = await hintbox.client.callTool({ name: 'git_status', arguments: { path: '/workspace' } });
    assert.notEqual(status.isError, true, JSON.stringify(status));
    assert.match(textOf(status), /untracked\.txt/);
    const log = await hintbox.client.callTool({ name: 'git_log', arguments: { path: '/workspace' } });
    assert.match(textOf(log), /the first commit of the gallery/);
    assert.deepEqual(await mountsOfClass(hintbox.pid, 'ro-offline'), { '/workspace': true }, 'git_status: read-only');
    assert.deepEqual(await sandboxesOfCalls('git'), { git_status: ['ro-offline'], git_log: ['ro-offline'] });
    assert.deepEqual(readFileSync(path.join(repo, '.git', 'index')), index, 'the index was not rewritten');
  });

  // proves: DB-READ
  it('postgres: a SELECT through the server answers; a write after COMMIT; fails for the read role, rows unchanged', async () => {
    await using postgres = await startPostgres();
    const database = 'gallery';
    const setup = new pg.Client({ connectionString: postgres.adminUrl });
    await setup.connect();
    await setup.query(`CREATE DATABASE ${database}`);
    await setup.end();
    const admin = new pg.Client({ connectionString: postgres.adminUrl.replace(/\/postgres$/, `/${database}`) });
    await admin.connect();
    try {
      await admin.query(`CREATE TABLE public.items (id serial PRIMARY KEY, name text NOT NULL);
        INSERT INTO public.items (name) VALUES ('apple'), ('pear');`);
      const count = async () => (await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM items')).rows[0]?.n;
      const profile = copyOfShippedProfile('postgres');
      const env = { POSTGRES_ADMIN_URL: postgres.adminUrl, POSTGRES_DATABASE: database };
      const prepared = await hintboxCommand(['db', 'prepare', profile], env);
      assert.equal(prepared.code, 0, prepared.stderr);

      {
        await using hintbox = await approvedRun(profile, env);
        const selected = await hintbox.client.callTool({
          name: 'query',
          arguments: { sql: 'SELECT name FROM items ORDER BY id' },
        });
        assert.deepEqual(JSON.parse(textOf(selected)), [{ name: 'apple' }, { name: 'pear' }]);

        // The server's READ ONLY transaction ends at the COMMIT, and the SET before it turns off
        // the role's read-only default (hintbox's second layer): what refuses the DELETE is the
        // read role's lack of privilege.
        const escape = 'SET default_transaction_read_only = off; COMMIT; DELETE FROM items';
        const deleted = await hintbox.client
          .callTool({ name: 'query', arguments: { sql: escape } })
          .then(textOf, (error: Error) => error.message);
        assert.match(deleted, /permission denied for table items/);
        assert.equal(await count(), 2, 'no row was deleted');
        // The server lives on (its pool's closed connection is not fatal) and answers the next call.
        const counted = await hintbox.client.callTool({
          name: 'query',
          arguments: { sql: 'SELECT count(*)::int AS n FROM items' },
        });
        assert.deepEqual(JSON.parse(textOf(counted)), [{ n: 2 }]);
        const ran = (await sandboxesOfCalls('postgres')).query ?? [];
        assert.equal(ran.length, 3, 'every call is audited');
        for (const sandbox of ran) assert.match(sandbox, /^\S+-dbread$/, 'query: the read role');
        assert.match(hintbox.stderr(), /hint violation: server postgres, tool query, sandbox \S+-dbread/);
      }
      const { rows } = await admin.query<{ name: string }>(
        `SELECT rolname AS name FROM pg_roles WHERE left(rolname, length($1)) = $1`,
        [ROLE_PREFIX],
      );
      assert.deepEqual(rows, [], 'the run dropped its roles');
    } finally {
      await admin.end();
    }
  });
});
