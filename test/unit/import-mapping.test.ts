import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { planImport, ImportSourceError, type ImportPlan, type RegistryPick } from '../../src/import/import-source.js';
import { profileName, renderProfile, type ProfileDraft } from '../../src/import/profile-draft.js';
import { importClientEntry } from '../../src/import/command-line.js';
import { interpolateTree } from '../../src/profile/interpolate.js';
import { isSandboxValueField } from '../../src/profile/sandbox-values.js';
import { ProfileSchema } from '../../src/profile/profile-schema.js';

/**
 * The import's mapping over real-world sources: a Claude Desktop config with the lines the
 * servers' READMEs give, a VS Code mcp.json, and the MCP registry's own server.json examples
 * (docs/reference/server-json/generic-server-json.md; the database manager's with a digest, and
 * --privileged and -v among its runtime arguments, added).
 */
const FIXTURES = fileURLToPath(new URL('../fixtures/import/', import.meta.url));

function planOf(file: string, pick?: RegistryPick): ImportPlan {
  return planImport(JSON.parse(readFileSync(path.join(FIXTURES, file), 'utf8')), path.join(FIXTURES, file), pick);
}

function draftOf(plan: ImportPlan, key: string): ProfileDraft {
  for (const outcome of plan.outcomes) if ('draft' in outcome && outcome.draft.key === key) return outcome.draft;
  assert.fail(
    `no profile for ${key}: ${JSON.stringify(plan.outcomes.find((o) => 'skipped' in o && o.skipped.key === key))}`,
  );
}

function skippedOf(plan: ImportPlan, key: string): string {
  for (const outcome of plan.outcomes)
    if ('skipped' in outcome && outcome.skipped.key === key) return outcome.skipped.reason;
  assert.fail(`${key} was not skipped`);
}

/** The profile text as the loader would read it: YAML, `${VAR}` from `vars`, the strict schema. */
function loaded(draft: ProfileDraft, vars: Record<string, string> = {}) {
  const text = renderProfile(draft);
  const problems: string[] = [];
  const raw: unknown = parse(text);
  const interpolated = interpolateTree(
    raw,
    vars,
    (at, message) => problems.push(`${at.join('.')}: ${message}`),
    isSandboxValueField,
  );
  assert.deepEqual(problems, []);
  const parsed = ProfileSchema.safeParse(interpolated);
  assert.ok(parsed.success, JSON.stringify(parsed.error?.issues));
  return { text, profile: parsed.data, raw: raw as Record<string, unknown> };
}

const placeholders = (draft: ProfileDraft): Record<string, string> =>
  Object.fromEntries(draft.hostVariables.map((n) => [n, 'x']));

describe('import: a Claude Desktop config', () => {
  const plan = planOf('claude_desktop_config.json');

  it('is told by its shape and file name', () => {
    assert.equal(plan.kind, 'claude-desktop');
    assert.equal(plan.section, 'mcpServers');
  });

  it('npx with a version → server.npm as given; untrusted, no network, a header saying what to review', () => {
    const draft = draftOf(plan, 'brave-search');
    const { text, profile } = loaded(draft, placeholders(draft));
    assert.equal(profile.server.npm, '@modelcontextprotocol/server-brave-search@0.6.2');
    assert.equal(profile.trust, 'untrusted');
    assert.equal(profile.network, 'none');
    assert.match(text, /^# Imported by "hintbox import" from claude_desktop_config\.json, mcpServers\.brave-search\./);
    for (const word of ['trust: untrusted', 'network: none', 'mounts: none'])
      assert.match(text, new RegExp(`# - ${word}`));
    assert.doesNotMatch(text, /package lock/, 'a fixed version needs no word on pinning');
  });

  it('a bare npx name gets latest, and the header says the package lock pins it', () => {
    const draft = draftOf(plan, 'github');
    const { text, profile } = loaded(draft, placeholders(draft));
    assert.equal(profile.server.npm, '@modelcontextprotocol/server-github@latest');
    assert.match(
      text.replace(/\n# +/g, ' '),
      /the package lock hintbox writes beside this profile at the first build pins/,
    );
  });

  // proves: IMPORT-UNTRUSTED
  it('never copies a literal secret from env: the variable is taken from the host by name', () => {
    const config = readFileSync(path.join(FIXTURES, 'claude_desktop_config.json'), 'utf8');
    const literals = [...config.matchAll(/"(ghp_[A-Za-z0-9]+|BSA-[a-z0-9-]+|s3cret-pw)"?/g)].map((m) => m[1]!);
    assert.ok(literals.length >= 3, 'the fixture has literal secrets');
    for (const outcome of plan.outcomes) {
      if (!('draft' in outcome)) continue;
      const text = renderProfile(outcome.draft);
      for (const secret of literals)
        assert.ok(!text.includes(secret), `${outcome.draft.key}'s profile holds ${secret}`);
      for (const secret of ['s3cret-pw', 'ghp_']) assert.ok(!text.includes(secret));
    }
    const github = draftOf(plan, 'github');
    assert.deepEqual(github.env, { GITHUB_PERSONAL_ACCESS_TOKEN: '${GITHUB_PERSONAL_ACCESS_TOKEN}' });
    const { profile } = loaded(github, { GITHUB_PERSONAL_ACCESS_TOKEN: 'from-the-host' });
    assert.equal(profile.env.GITHUB_PERSONAL_ACCESS_TOKEN, 'from-the-host');
  });

  it('a URL with a password among the arguments moves to a host variable the rewritten entry passes', () => {
    const draft = draftOf(plan, 'postgres');
    assert.deepEqual(draft.server.args, ['${POSTGRES_URL}']);
    assert.deepEqual(draft.clientEnv, { POSTGRES_URL: 'postgresql://app:s3cret-pw@localhost:5432/app' });
    assert.deepEqual(draft.hostVariables, ['POSTGRES_URL']);
    assert.equal(loaded(draft, { POSTGRES_URL: 'postgresql://h/db' }).profile.server.args?.[0], 'postgresql://h/db');
  });

  it('absolute host paths among the arguments become proposed mounts, the arguments their container paths', () => {
    const fs = draftOf(plan, 'filesystem');
    assert.deepEqual(fs.server.args, ['/data/Desktop', '/data/Downloads']);
    assert.deepEqual(fs.mounts, [
      { source: '/Users/me/Desktop', target: '/data/Desktop', mode: 'rw' },
      { source: '/Users/me/Downloads', target: '/data/Downloads', mode: 'rw' },
    ]);
    const sqlite = draftOf(plan, 'sqlite');
    assert.deepEqual(sqlite.server.args, ['--db-path', '/data/test.db']);
    assert.deepEqual(sqlite.mounts, [{ source: '/Users/me/test.db', target: '/data/test.db', mode: 'rw' }]);
    assert.match(renderProfile(fs), /# - mounts: \/Users\/me\/Desktop at \/data\/Desktop \(rw\)/);
  });

  it('uvx → server.pypi with bin; --from names the package apart from the command; other arguments stay', () => {
    const fetch = draftOf(plan, 'fetch');
    assert.deepEqual(fetch.server, { pypi: 'mcp-server-fetch', bin: 'mcp-server-fetch' });
    assert.match(renderProfile(fetch).replace(/\n# +/g, ' '), /pins what it resolves to \(with hashes\)/);
    const time = draftOf(plan, 'time');
    assert.deepEqual(time.server, {
      pypi: 'mcp-server-time==0.6.2',
      bin: 'mcp-server-time',
      args: ['--local-timezone=Europe/Berlin'],
    });
  });

  // proves: IMPORT-UNTRUSTED
  it('docker run → server.image; --network host, --privileged and -v are dropped and named; -e becomes env', () => {
    const draft = draftOf(plan, 'GitHub Docker');
    assert.equal(draft.name, 'github-docker');
    assert.deepEqual(draft.server, { image: 'ghcr.io/github/github-mcp-server' });
    assert.deepEqual(draft.env, {
      GITHUB_PERSONAL_ACCESS_TOKEN: '${GITHUB_PERSONAL_ACCESS_TOKEN}',
      GITHUB_TOOLSETS: '${GITHUB_TOOLSETS}',
    });
    assert.deepEqual(
      draft.clientEnv,
      { GITHUB_TOOLSETS: 'repos,issues' },
      '-e NAME=value: the value stays with the client',
    );
    const { text, profile } = loaded(draft, placeholders(draft));
    assert.equal(profile.network, 'none');
    assert.deepEqual(profile.mounts, []);
    const header = text.replace(/\n# +/g, ' ');
    for (const dropped of ['--network host', '--privileged', '-v /var/run/docker.sock:/var/run/docker.sock'])
      assert.ok(header.includes(dropped), `the header names ${dropped}`);
    assert.doesNotMatch(
      text
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .join('\n'),
      /privileged|host|docker\.sock/,
    );
    assert.match(header, /named by tag, not digest/);
  });

  it('skips what it cannot map, saying why: a bare node or python script, a remote server, an entry that runs hintbox', () => {
    assert.match(skippedOf(plan, 'weather'), /^write its profile by hand: "node" is not npx/);
    assert.match(skippedOf(plan, 'notes'), /^write its profile by hand: "python"/);
    assert.match(skippedOf(plan, 'linear'), /remote server/);
    assert.equal(skippedOf(plan, 'hintbox'), 'it already runs hintbox');
    assert.equal(plan.outcomes.length, 12, 'one outcome per entry');
  });
});

describe('import: a VS Code mcp.json', () => {
  const plan = planOf('vscode-mcp.json');

  it('reads servers (type stdio); an ${input:…} env value is not copied, the variable is taken by name', () => {
    assert.equal(plan.kind, 'vscode');
    assert.equal(plan.section, 'servers');
    const draft = draftOf(plan, 'Perplexity');
    assert.equal(draft.name, 'perplexity');
    assert.deepEqual(draft.env, { PERPLEXITY_API_KEY: '${PERPLEXITY_API_KEY}' });
    assert.doesNotMatch(renderProfile(draft), /input:/);
  });

  it('names an envFile it does not read', () => {
    const plan = planImport(
      { servers: { x: { type: 'stdio', command: 'npx', args: ['x@1.0.0'], envFile: '${workspaceFolder}/.env' } } },
      'mcp.json',
    );
    assert.match(renderProfile(draftOf(plan, 'x')).replace(/\n# +/g, ' '), /reads more variables from its envFile/);
  });

  it("uvx's pkg@version is a pinned requirement", () => {
    assert.deepEqual(draftOf(plan, 'fetch').server, { pypi: 'mcp-server-fetch==2025.4.7', bin: 'mcp-server-fetch' });
  });

  it('skips a client variable in the command line (hintbox cannot see ${workspaceFolder}) and http servers', () => {
    assert.match(skippedOf(plan, 'workspace-files'), /write its profile by hand: .*\$\{workspaceFolder\}/);
    assert.match(skippedOf(plan, 'github-remote'), /remote server \(http\)/);
  });
});

describe('import: MCP registry server.json', () => {
  it('npm with a secret: server.npm at its version, the secret from a variable hintbox names', () => {
    const plan = planOf('registry-brave-search.json');
    assert.equal(plan.kind, 'registry');
    const draft = draftOf(plan, 'io.modelcontextprotocol.anonymous/brave-search');
    assert.equal(draft.name, 'brave-search');
    assert.equal(draft.server.npm, '@modelcontextprotocol/server-brave-search@1.0.2');
    assert.deepEqual(draft.env, { BRAVE_API_KEY: '${HINTBOX_BRAVE_SEARCH_BRAVE_API_KEY}' });
    loaded(draft, placeholders(draft));
  });

  it('pypi: server.pypi pinned; a non-secret default is written as is, the secret is not', () => {
    const draft = draftOf(planOf('registry-weather.json'), 'io.github.example/weather-mcp');
    assert.deepEqual(draft.server, { pypi: 'weather-mcp-server==0.5.0' });
    assert.deepEqual(draft.env, {
      WEATHER_API_KEY: '${HINTBOX_WEATHER_MCP_WEATHER_API_KEY}',
      WEATHER_UNITS: 'celsius',
    });
    assert.equal(loaded(draft, placeholders(draft)).profile.env.WEATHER_UNITS, 'celsius');
  });

  // proves: IMPORT-UNTRUSTED
  it('oci: the digest is kept; runtimeArguments --network host, --privileged and -v are dropped and named; -e becomes env', () => {
    const draft = draftOf(planOf('registry-database-manager.json'), 'io.github.example/database-manager');
    assert.equal(
      draft.server.image,
      'docker.io/example/database-manager-mcp:3.1.0@sha256:4f6d8a1c2b3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a',
    );
    assert.deepEqual(
      draft.server.args,
      ['--host', 'localhost', '${HINTBOX_DATABASE_MANAGER_DATABASE_NAME}'],
      "a default as is: --host never reads the shell's HOST",
    );
    assert.deepEqual(draft.env, {
      DB_TYPE: '${HINTBOX_DATABASE_MANAGER_DB_TYPE}',
      DB_USERNAME: '${HINTBOX_DATABASE_MANAGER_DB_USERNAME}',
      DB_PASSWORD: '${HINTBOX_DATABASE_MANAGER_DB_PASSWORD}',
      SSL_MODE: 'prefer',
    });
    const { text, profile } = loaded(draft, placeholders(draft));
    assert.equal(profile.network, 'none');
    assert.deepEqual(profile.mounts, []);
    const header = text.replace(/\n# +/g, ' ');
    for (const dropped of ['--network host', '--privileged', '-v /:/host'])
      assert.ok(header.includes(dropped), dropped);
    assert.match(header, /The optional argument --port is not set/);
    assert.match(header, /pinned by its digest/);
  });

  it('a filepath package argument becomes a read-only mount from a variable hintbox names, the argument its target; the default is only shown', () => {
    const draft = draftOf(planOf('registry-filesystem.json'), 'io.github.modelcontextprotocol/filesystem');
    assert.equal(draft.server.npm, '@modelcontextprotocol/server-filesystem@1.0.2');
    assert.deepEqual(draft.server.args, ['${sandbox:mount.target_dir}'], 'the target is written once, in the mount');
    const variable = 'HINTBOX_FILESYSTEM_TARGET_DIR';
    assert.deepEqual(draft.mounts, [
      { name: 'target_dir', source: `\${${variable}}`, target: '/data/target_dir', mode: 'ro', variable },
    ]);
    assert.deepEqual(draft.hostVariables, [variable]);
    assert.deepEqual(draft.env, { LOG_LEVEL: 'info' });
    const text = renderProfile(draft);
    const header = text.replace(/\n# +/g, ' ');
    assert.match(header, /Runtime options \(npx or uvx\) of the source were dropped.*: --yes/);
    assert.match(header, /The entry suggests "\/Users\/username\/Desktop": never used as a path\./);
    assert.ok(!/^[^#].*\/Users\/username/m.test(text), 'the default is in no field, only in the header');
    assert.equal(loaded(draft, { [variable]: '/srv/project' }).profile.mounts[0]?.source, '/srv/project');
  });

  it('refuses mcpb (unsupported), naming its fileSha256; a remote is not run either', () => {
    const reason = skippedOf(planOf('registry-text-editor.json'), 'io.modelcontextprotocol/text-editor');
    assert.match(reason, /MCP bundles are not supported \(its fileSha256 is fe333e59/);
  });

  it('skips packages whose transport is not stdio, and says which were not used', () => {
    const plan = planImport(
      {
        name: 'io.example/both',
        packages: [
          { registryType: 'npm', identifier: 'x-http', version: '1.0.0', transport: { type: 'streamable-http' } },
          { registryType: 'npm', identifier: 'x-stdio', version: '1.0.0', transport: { type: 'stdio' } },
        ],
      },
      'server.json',
    );
    const draft = draftOf(plan, 'io.example/both');
    assert.equal(draft.server.npm, 'x-stdio@1.0.0');
    assert.match(
      renderProfile(draft).replace(/\n# +/g, ' '),
      /Not used: npm package x-http: transport streamable-http/,
    );
  });
});

describe("import: a registry list (the API's GET /v0/servers answer, or an array of server.json) and --server", () => {
  const FS = 'io.github.modelcontextprotocol/filesystem';
  const entry = (name: string, version: string, isLatest?: boolean) => ({
    server: {
      name,
      version,
      packages: [{ registryType: 'npm', identifier: 'pkg', version, transport: { type: 'stdio' } }],
    },
    ...(isLatest === undefined ? {} : { _meta: { 'io.modelcontextprotocol.registry/official': { isLatest } } }),
  });

  it('picks the entry by name; of several versions, the one the registry marks latest', () => {
    const plan = planOf('registry-list.json', { server: FS });
    assert.equal(plan.kind, 'registry');
    assert.equal(plan.outcomes.length, 1);
    const draft = draftOf(plan, FS);
    assert.equal(draft.server.npm, '@modelcontextprotocol/server-filesystem@1.0.3');
    assert.match(
      draft.origin,
      /registry-list\.json \(MCP registry entry io\.github\.modelcontextprotocol\/filesystem 1\.0\.3\)/,
    );
    assert.equal(draft.name, 'filesystem');
    assert.equal(loaded(draft, { HINTBOX_FILESYSTEM_TARGET_DIR: '/srv' }).profile.name, 'filesystem');
  });

  it('--version picks that version; one not listed is refused, naming those that are', () => {
    assert.equal(
      draftOf(planOf('registry-list.json', { server: FS, version: '1.0.2' }), FS).server.npm,
      '@modelcontextprotocol/server-filesystem@1.0.2',
    );
    assert.throws(
      () => planOf('registry-list.json', { server: FS, version: '9.9.9' }),
      (error: unknown) =>
        error instanceof ImportSourceError &&
        /lists no version 9\.9\.9 of io\.github\.modelcontextprotocol\/filesystem \(listed: 1\.0\.2, 1\.0\.3\)/.test(
          error.message,
        ) &&
        !error.message.includes('\n'),
    );
  });

  it('a plain array of server.json; without a latest mark the highest version, else it asks for --version', () => {
    const plain = [
      entry('io.example/a', '1.2.0').server,
      entry('io.example/a', '1.10.0').server,
      entry('io.example/b', '1.0.0').server,
    ];
    assert.equal(
      draftOf(planImport(plain, 'servers.json', { server: 'io.example/a' }), 'io.example/a').server.npm,
      'pkg@1.10.0',
    );
    const unmarked = {
      servers: [entry('io.example/a', '2.0.0-beta', false), entry('io.example/a', 'latest-ish', false)],
    };
    assert.throws(
      () => planImport(unmarked, 'l.json', { server: 'io.example/a' }),
      /lists 2 versions of io\.example\/a \(2\.0\.0-beta, latest-ish\).*--version/,
    );
    const one = { servers: [entry('io.example/a', 'whatever')] };
    assert.equal(
      draftOf(planImport(one, 'l.json', { server: 'io.example/a' }), 'io.example/a').server.npm,
      'pkg@whatever',
    );
  });

  it('a name not listed: one line naming the close names listed; no name: one line asking for --server', () => {
    assert.throws(
      () => planOf('registry-list.json', { server: 'io.github.modelcontextprotocol/filesytem' }),
      (error: unknown) =>
        error instanceof ImportSourceError &&
        error.message.includes('lists no server named io.github.modelcontextprotocol/filesytem') &&
        error.message.includes('close: io.github.modelcontextprotocol/filesystem') &&
        !error.message.includes('\n'),
    );
    assert.throws(
      () => planOf('registry-list.json', { server: 'zzz' }),
      /lists no server named zzz \(it lists 2: io\.github/,
    );
    assert.throws(
      () => planOf('registry-list.json'),
      /a list of 2 MCP registry servers: pick one with --server NAME \(io\.github\.modelcontextprotocol\/filesystem, io\.github\.modelcontextprotocol\/memory\)/,
    );
  });

  it('--server and --version are for registry files: a client config refuses them; a server.json must match', () => {
    assert.throws(
      () => planOf('claude_desktop_config.json', { server: 'memory' }),
      /--server picks a server of an MCP registry list/,
    );
    assert.equal(
      draftOf(planOf('registry-filesystem.json', { server: FS }), FS).server.npm,
      '@modelcontextprotocol/server-filesystem@1.0.2',
    );
    assert.throws(
      () => planOf('registry-filesystem.json', { server: 'io.example/other' }),
      /is io\.github\.modelcontextprotocol\/filesystem, not io\.example\/other/,
    );
  });
});

describe('import: one entry at a time', () => {
  const entry = (command: string, args: string[], env: Record<string, string> = {}) =>
    importClientEntry('k', 'k', 'test', { command, args, env });

  it('npx -p <pkg> <bin>, uv tool run and pipx run --spec', () => {
    const npx = entry('npx', ['-y', '-p', '@acme/tools@2.0.0', 'acme-mcp', '--stdio']);
    assert.ok('draft' in npx);
    assert.deepEqual(npx.draft.server, { npm: '@acme/tools@2.0.0', bin: 'acme-mcp', args: ['--stdio'] });
    const uv = entry('uv', ['tool', 'run', 'mcp-server-git', '--repository', '/srv/repo']);
    assert.ok('draft' in uv);
    assert.deepEqual(uv.draft.server, {
      pypi: 'mcp-server-git',
      bin: 'mcp-server-git',
      args: ['--repository', '/data/repo'],
    });
    const pipx = entry('/usr/bin/pipx', ['run', '--spec', 'acme-mcp==1.2', 'acme']);
    assert.ok('draft' in pipx);
    assert.deepEqual(pipx.draft.server, { pypi: 'acme-mcp==1.2', bin: 'acme' });
  });

  it('a --token flag value moves out of the profile; a read-only flag gives a read-only mount', () => {
    const draft = entry('npx', ['-y', 'acme-mcp@1.0.0', '--api-key', 'sk-123', '--read-only=/srv/docs']);
    assert.ok('draft' in draft);
    assert.deepEqual(draft.draft.server.args, ['--api-key', '${API_KEY}', '--read-only=/data/docs']);
    assert.deepEqual(draft.draft.clientEnv, { API_KEY: 'sk-123' });
    assert.deepEqual(draft.draft.mounts, [{ source: '/srv/docs', target: '/data/docs', mode: 'ro' }]);
    assert.ok(!renderProfile(draft.draft).includes('sk-123'));
  });

  it('a relative or home path among the arguments is named: the sandbox does not see it', () => {
    const draft = entry('uvx', ['mcp-server-sqlite', '--db-path', '~/data/test.db']);
    assert.ok('draft' in draft);
    assert.deepEqual(draft.draft.mounts, []);
    assert.match(
      renderProfile(draft.draft).replace(/\n# +/g, ' '),
      /~\/data\/test\.db is a path relative to the client's folder or your home/,
    );
  });

  it('a literal $ from the source stays literal (the loader never interpolates it)', () => {
    const draft = entry('npx', ['-y', 'acme-mcp@1.0.0', '--greeting', 'costs $HOME ${HOME}']);
    assert.ok('draft' in draft);
    assert.deepEqual(loaded(draft.draft, { HOME: '/root' }).profile.server.args, ['--greeting', 'costs $HOME ${HOME}']);
  });

  it('skips docker options it does not know rather than guess where the image is, and other docker commands', () => {
    const unknown = entry('docker', ['run', '-i', '--frobnicate', 'x', 'mcp/x']);
    assert.ok('skipped' in unknown);
    assert.match(unknown.skipped.reason, /docker option --frobnicate is not understood/);
    const exec = entry('docker', ['exec', '-i', 'c', 'server']);
    assert.ok('skipped' in exec);
    assert.match(exec.skipped.reason, /only "docker run"/);
    const path = entry('npx', ['-y', './local-server']);
    assert.ok('skipped' in path);
    assert.match(path.skipped.reason, /not an npm package name/);
  });

  it('docker: -it clusters, --entrypoint and -w are kept as command and workdir, the rest of the line is args', () => {
    const draft = entry('docker', [
      'run',
      '-it',
      '--rm',
      '--entrypoint',
      '/bin/server',
      '-w',
      '/app',
      'mcp/x:1',
      '--stdio',
    ]);
    assert.ok('draft' in draft);
    assert.deepEqual(draft.draft.server, {
      image: 'mcp/x:1',
      command: ['/bin/server'],
      workdir: '/app',
      args: ['--stdio'],
    });
    assert.deepEqual(
      draft.draft.notes.filter((n) => /dropped/.test(n)),
      [],
      '-i, -t, --rm are what hintbox does anyway',
    );
  });
});

describe('import: the file kind and names', () => {
  it('a file that is none of the kinds is one clear error', () => {
    assert.throws(() => planImport({ foo: 1 }, 'x.json'), ImportSourceError);
    assert.throws(() => planImport([1, 2], 'x.json'), /neither a client config .* nor an MCP registry server\.json/);
  });

  it('profile names follow the profile rule, and never take "hintbox"', () => {
    assert.equal(profileName('GitHub Docker'), 'github-docker');
    assert.equal(profileName('hintbox'), 'hintbox-server');
    assert.equal(profileName('...'), 'server');
    assert.match(profileName('x'.repeat(100)), /^[a-z0-9][a-z0-9_.-]{0,62}$/);
    const plan = planImport(
      { mcpServers: { Memory: { command: 'npx', args: ['m@1.0.0'] }, memory: { command: 'npx', args: ['m@1.0.0'] } } },
      'c.json',
    );
    assert.deepEqual(
      plan.outcomes.map((o) => ('draft' in o ? o.draft.name : '')),
      ['memory', 'memory-2'],
    );
  });
});
