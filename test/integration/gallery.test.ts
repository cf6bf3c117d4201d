import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import pg from 'pg';
import { GenericContainer, Wait } from 'testcontainers';
import { ROLE_PREFIX } from '../../src/database/role-grants.js';
import { CANARY_IMAGE, docker, mountsOfClass, sandboxOfClass } from './support/docker.js';
import { parse, stringify } from 'yaml';
import { auditOf, copyOfShippedProfile, hintboxCommand, runHintbox, sandboxFolder } from './support/hintbox-process.js';
import { startPostgres } from './support/postgres.js';
import { canaryCertificate } from './support/canary-tls.js';
import { scratchFolder } from '../support/scratch-folder.js';

/**
 * The shipped profiles (profiles/*.yaml), each run as an operator would — a copy of it, its
 * tools approved, `hintbox run` — and proven by one real call whose answer is checked, and by
 * where its tools landed. A broken profile (a server that no longer starts, a tool that moved
 * sandbox) fails here.
 */

/** `hintbox approve <profile> --all`, then `hintbox run <profile>`, as the profiles' headers say. */
async function approvedRun(profile: string, env: Record<string, string> = {}) {
  const approved = await hintboxCommand(['approve', profile, '--all', '--yes'], env);
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

/**
 * A canary web server standing for the hosts a server reaches, under `names` on an engine network
 * of the test's own (hintbox's egress proxies go out through it: HINTBOX_EGRESS_NETWORK). It
 * answers each path of `pages` on port 8080 (200, its content type from the text) and 404
 * otherwise, the same over HTTPS on 443 with `tls`, and logs every request (`asked <host><path>`).
 */
let canaries = 0;
async function canaryHost(names: string[], pages: Record<string, string>, tls?: { key: string; cert: string }) {
  const network = `hintbox-test-gallery-${process.pid}-${names[0]}`;
  // A public-looking range (the benchmark block, 198.19.150-249.x here; the egress tests take the
  // rest): the proxy refuses a listed name that resolves to a private address, as the engine's are.
  const subnet = `198.19.${150 + (process.pid % 100)}.${16 * canaries++}/28`;
  const server = `const pages = ${JSON.stringify(pages)};
    const answer = (q, s) => { console.log('asked ' + q.headers.host + q.url);
      const page = pages[q.url.split('?')[0]];
      if (page === undefined) { s.writeHead(404); s.end(); return; }
      s.writeHead(200, { 'content-type': page.startsWith('{') ? 'application/json' : 'text/html' }); s.end(page); };
    ${tls ? `require('https').createServer(${JSON.stringify(tls)}, answer).listen(443);` : ''}
    require('http').createServer(answer).listen(8080, () => console.log('canary listening'));`;
  const { docker: d } = await docker();
  const net = await d.createNetwork({
    Name: network,
    Driver: 'bridge',
    IPAM: { Config: [{ Subnet: subnet }] },
    Labels: { 'hintbox-test': 'gallery' },
  });
  const canary = await new GenericContainer(CANARY_IMAGE)
    .withCommand(['node', '-e', server])
    .withLabels({ 'hintbox-test': 'canary' })
    .withNetworkMode(network)
    .withNetworkAliases(...names)
    // Root only to listen on 443, as the host it stands for does.
    .withUser(tls ? '0:0' : '10001:10001')
    .withWaitStrategy(Wait.forLogMessage('canary listening'))
    .start()
    .catch(async (error: Error) => {
      await net.remove();
      throw error;
    });
  return {
    env: { HINTBOX_EGRESS_NETWORK: network },
    /** What the canary was asked, one `asked <host><path>` a line. */
    asked: async () => (await d.getContainer(canary.getId()).logs({ stdout: true, stderr: false })).toString('latin1'),
    async [Symbol.asyncDispose]() {
      await canary.stop();
      await net.remove();
    },
  };
}

/** A copy of a shipped profile with `extra` hosts added to its network list `list`, as an operator would. */
function withHosts(name: string, list: 'allow' | 'backend', extra: string[]): string {
  const profile = copyOfShippedProfile(name);
  const parsed = parse(readFileSync(profile, 'utf8')) as { network: Record<string, string[]> };
  (parsed.network[list] ??= []).push(...extra);
  writeFileSync(profile, stringify(parsed));
  return profile;
}

integrationSuite('the gallery of shipped profiles', { timeout: 1_500_000 }, () => {
  before(async () => {
    // Each server's image takes tens of seconds to build on a cold engine, mostly waiting on npm
    // and Docker: the first builds the Node base too, the others are built side by side.
    await buildImageOf('memory', { MEMORY_DIR: sandboxFolder() });
    await Promise.all([
      buildImageOf('everything'),
      buildImageOf('fetch'),
      buildImageOf('git', { WORKSPACE: sandboxFolder() }),
      buildImageOf('postgres', { POSTGRES_DATABASE: 'gallery' }),
      buildImageOf('sequential-thinking'),
      buildImageOf('context7'),
      buildImageOf('playwright'),
      buildImageOf('github', { GITHUB_PERSONAL_ACCESS_TOKEN: 'gallery-token' }),
      buildImageOf('supabase', { SUPABASE_ACCESS_TOKEN: 'gallery-token' }),
      buildImageOf('chrome-devtools'),
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

  // proves: EGRESS-GALLERY-FETCH
  it("fetch: a listed canary's page comes back through the egress proxy, the server unchanged; an unlisted host is refused", async () => {
    const [listed, unlisted] = [`fetch-canary-${process.pid}.test`, `unlisted-${process.pid}.test`];
    const token = `canary-${process.pid}-${Date.now()}`;
    const page = `<html><head><title>Canary</title></head><body><article><h1>The canary</h1><p>${token}</p></article></body></html>`;
    await using canary = await canaryHost([listed, unlisted], { '/page': page });
    const profile = withHosts('fetch', 'allow', [`${listed}:8080`]);
    await using hintbox = await approvedRun(profile, canary.env);
    const fetched = await hintbox.client.callTool({
      name: 'imageFetch',
      arguments: { url: `http://${listed}:8080/page` },
    });
    assert.notEqual(fetched.isError, true, JSON.stringify(fetched));
    assert.match(textOf(fetched), new RegExp(token), 'the page the canary served');
    const refused = await hintbox.client
      .callTool({ name: 'imageFetch', arguments: { url: `http://${unlisted}:8080/page` } })
      .then(textOf, (error: Error) => error.message);
    assert.doesNotMatch(refused, new RegExp(token));
    const sandbox = await sandboxOfClass(hintbox.pid, 'nomounts-egress');
    assert.equal(
      sandbox.HostConfig.NetworkMode,
      'none',
      "no network: the gate's relay to the proxy is its one way out",
    );
    assert.deepEqual(await sandboxesOfCalls('fetch'), { imageFetch: ['nomounts-egress', 'nomounts-egress'] });
    const asked = await canary.asked();
    assert.ok(asked.includes(`asked ${listed}:8080/page`), asked);
    assert.ok(!asked.includes(unlisted), 'the unlisted name never reached the canary');
  });

  it('context7: a library search reaches only its API host (a canary standing in for it), through the proxy', async () => {
    const host = `context7-canary-${process.pid}.test`;
    const token = `canary-${process.pid}-${Date.now()}`;
    const results = {
      results: [
        {
          id: '/canary/lib',
          title: `Canary ${token}`,
          description: 'from the canary',
          totalSnippets: 1,
          trustScore: 7,
        },
      ],
    };
    await using canary = await canaryHost([host], { '/api/v2/libs/search': JSON.stringify(results) });
    const profile = withHosts('context7', 'backend', [`${host}:8080`]);
    const env = { ...canary.env, CONTEXT7_API_URL: `http://${host}:8080/api` };
    await using hintbox = await approvedRun(profile, env);
    const found = await hintbox.client.callTool({
      name: 'resolve-library-id',
      arguments: { query: 'how the gallery is tested', libraryName: 'canary' },
    });
    assert.notEqual(found.isError, true, JSON.stringify(found));
    assert.match(textOf(found), new RegExp(`Canary ${token}`));
    assert.match(textOf(found), /\/canary\/lib/);
    assert.match(await canary.asked(), new RegExp(`asked ${host.replace(/\./g, '\\.')}:8080/api/v2/libs/search`));
    assert.deepEqual(await sandboxesOfCalls('context7'), { 'resolve-library-id': ['nomounts-backend'] });
  });

  it('github: a repository search reaches api.github.com (a canary under that name on the test network), through the proxy only', async () => {
    const count = 4000 + (process.pid % 1000);
    const search = { total_count: count, incomplete_results: false, items: [] };
    await using canary = await canaryHost(
      ['api.github.com'],
      { '/search/repositories': JSON.stringify(search) },
      canaryCertificate('api.github.com'),
    );
    // The shipped profile as it is; the test's only addition is trusting the canary's certificate.
    const profile = copyOfShippedProfile('github');
    const parsed = parse(readFileSync(profile, 'utf8')) as { env: Record<string, string> };
    parsed.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
    writeFileSync(profile, stringify(parsed));
    await using hintbox = await approvedRun(profile, { ...canary.env, GITHUB_PERSONAL_ACCESS_TOKEN: 'gallery-token' });
    const found = await hintbox.client.callTool({
      name: 'search_repositories',
      arguments: { query: 'hintbox gallery' },
    });
    assert.notEqual(found.isError, true, JSON.stringify(found));
    assert.equal((JSON.parse(textOf(found)) as { total_count: number }).total_count, count);
    assert.match(await canary.asked(), /asked api\.github\.com\/search\/repositories\?q=hintbox/);
    assert.deepEqual(await sandboxesOfCalls('github'), { search_repositories: ['nomounts-backend'] });
  });

  it('supabase: its projects are listed from the Management API (a canary standing in for it), through the proxy', async () => {
    const host = `supabase-canary-${process.pid}.test`;
    const name = `canary-${process.pid}-${Date.now()}`;
    const project = {
      id: 'canaryref',
      ref: 'canaryref',
      organization_id: 'canaryorg',
      name,
      region: 'us-east-1',
      created_at: '2026-01-01T00:00:00Z',
      status: 'ACTIVE_HEALTHY',
    };
    await using canary = await canaryHost([host], { '/v1/projects': JSON.stringify([project]) });
    const profile = withHosts('supabase', 'backend', [`${host}:8080`]);
    const env = { ...canary.env, SUPABASE_ACCESS_TOKEN: 'gallery-token', SUPABASE_API_URL: `http://${host}:8080` };
    await using hintbox = await approvedRun(profile, env);
    const listed = await hintbox.client.callTool({ name: 'list_projects', arguments: {} });
    assert.notEqual(listed.isError, true, JSON.stringify(listed));
    assert.match(textOf(listed), new RegExp(name));
    assert.match(await canary.asked(), new RegExp(`asked ${host.replace(/\./g, '\\.')}:8080/v1/projects`));
    assert.match((await sandboxesOfCalls('supabase')).list_projects?.[0] ?? '', /-backend$/);
  });

  it("chrome-devtools: Debian's chromium in the sandbox opens a listed canary's page and reads it; an unlisted host's never loads", async () => {
    const [listed, unlisted] = [`cd-canary-${process.pid}.test`, `cd-unlisted-${process.pid}.test`];
    const token = `canary-${process.pid}-${Date.now()}`;
    const page = `<html><head><title>Canary page</title></head><body><h1>The canary</h1><p>${token}</p></body></html>`;
    await using canary = await canaryHost([listed, unlisted], { '/page': page });
    await using hintbox = await approvedRun(withHosts('chrome-devtools', 'allow', [`${listed}:8080`]), canary.env);
    const slow = { timeout: 120_000 };
    const call = (name: string, args: Record<string, unknown>) =>
      hintbox.client.callTool({ name, arguments: args }, undefined, slow).then(textOf, (error: Error) => error.message);
    /** Opens a page, then reads its snapshot (by the id the list of pages gives it). */
    const open = async (url: string) => {
      const pages = await call('new_page', { url });
      // Each page a line: `<id>: <title> (<url>)`, or `<id>: <url>` without a title.
      const pageId = new RegExp(`(\\d+): [^\\n]*${url.replace(/[.?]/g, '\\$&')}`).exec(pages)?.[1];
      assert.ok(pageId, pages);
      return call('take_snapshot', { pageId: Number(pageId) });
    };
    assert.match(await open(`http://${listed}:8080/page`), new RegExp(token), "the snapshot of the canary's page");
    assert.doesNotMatch(
      await open(`http://${unlisted}:8080/page`).catch((error: Error) => error.message),
      new RegExp(token),
    );
    const asked = await canary.asked();
    assert.ok(asked.includes(`asked ${listed}:8080/page`), asked);
    assert.ok(!asked.includes(unlisted), 'the unlisted name never reached the canary');
    assert.deepEqual(await mountsOfClass(hintbox.pid, 'nomounts-egress'), {});
  });

  it("playwright: Debian's chromium in the sandbox opens a listed canary's page; an unlisted host's never loads", async () => {
    const [listed, unlisted] = [`pw-canary-${process.pid}.test`, `pw-unlisted-${process.pid}.test`];
    const token = `canary-${process.pid}-${Date.now()}`;
    // In the title: the tool's answer names the page's title (its snapshot goes to a file in the sandbox).
    const page = `<html><head><title>Canary ${token}</title></head><body><h1>The canary</h1><p>${token}</p></body></html>`;
    await using canary = await canaryHost([listed, unlisted], { '/page': page });
    const profile = withHosts('playwright', 'allow', [`${listed}:8080`]);
    await using hintbox = await approvedRun(profile, canary.env);
    const opened = await hintbox.client.callTool(
      { name: 'browser_navigate', arguments: { url: `http://${listed}:8080/page` } },
      undefined,
      { timeout: 120_000 },
    );
    assert.notEqual(opened.isError, true, JSON.stringify(opened));
    assert.match(textOf(opened), new RegExp(`Page Title: Canary ${token}`), 'the page the canary served');
    const refused = await hintbox.client
      .callTool({ name: 'browser_navigate', arguments: { url: `http://${unlisted}:8080/page` } }, undefined, {
        timeout: 120_000,
      })
      .then(textOf, (error: Error) => error.message);
    assert.doesNotMatch(refused, new RegExp(token));
    const asked = await canary.asked();
    assert.ok(asked.includes(`asked ${listed}:8080/page`), asked);
    assert.ok(!asked.includes(unlisted), 'the unlisted name never reached the canary');
    const sandbox = await sandboxOfClass(hintbox.pid, 'nomounts-egress');
    assert.deepEqual(await mountsOfClass(hintbox.pid, 'nomounts-egress'), {});
    assert.equal(sandbox.HostConfig.ReadonlyRootfs, true);
  });

  it('sequential-thinking: a thought is taken and counted, in a sandbox without mounts or network', async () => {
    await using hintbox = await approvedRun(copyOfShippedProfile('sequential-thinking'));
    const thought = await hintbox.client.callTool({
      name: 'sequentialthinking',
      arguments: { thought: 'the gallery thinks', thoughtNumber: 1, totalThoughts: 2, nextThoughtNeeded: true },
    });
    assert.notEqual(thought.isError, true, JSON.stringify(thought));
    assert.match(textOf(thought), /"thoughtHistoryLength":\s*1/);
    const sandbox = await sandboxOfClass(hintbox.pid, 'nomounts-offline');
    assert.equal(sandbox.HostConfig.NetworkMode, 'none');
    assert.deepEqual(await mountsOfClass(hintbox.pid, 'nomounts-offline'), {});
    assert.deepEqual(await sandboxesOfCalls('sequential-thinking'), { sequentialthinking: ['nomounts-offline'] });
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
