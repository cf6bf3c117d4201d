import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { planImport } from '../../src/import/import-source.js';
import { configText, rewriteClientConfig, RewriteError } from '../../src/import/rewrite-config.js';
import { runsHintbox } from '../../src/import/command-line.js';

const CONFIG = fileURLToPath(new URL('../fixtures/import/claude_desktop_config.json', import.meta.url));
const LAUNCH = { command: '/opt/hintbox/dist/hintbox.mjs', args: [] };

describe('import --rewrite (the pure part)', () => {
  const original = JSON.parse(readFileSync(CONFIG, 'utf8')) as { mcpServers: Record<string, Record<string, unknown>> };
  const plan = planImport(original, CONFIG);
  const imported = plan.outcomes.flatMap((o) =>
    'draft' in o
      ? [{ key: o.draft.key, profile: `/home/me/hintbox/${o.draft.name}.yaml`, addEnv: o.draft.clientEnv }]
      : [],
  );
  const rewritten = rewriteClientConfig(original, 'mcpServers', imported, LAUNCH) as typeof original;

  it('points each imported entry at hintbox run <absolute profile>, its env kept', () => {
    assert.deepEqual(rewritten.mcpServers.github, {
      command: '/opt/hintbox/dist/hintbox.mjs',
      args: ['run', '/home/me/hintbox/github.yaml'],
      env: { GITHUB_PERSONAL_ACCESS_TOKEN: 'ghp_literalTokenThatMustNotLeak0123456789' },
    });
    assert.deepEqual(rewritten.mcpServers.filesystem, {
      command: '/opt/hintbox/dist/hintbox.mjs',
      args: ['run', '/home/me/hintbox/filesystem.yaml'],
    });
  });

  it('adds what the arguments held (a -e NAME=value, a password in a URL) to env, by the name the profile reads', () => {
    assert.deepEqual(rewritten.mcpServers['GitHub Docker']?.env, {
      GITHUB_PERSONAL_ACCESS_TOKEN: 'ghp_anotherLiteralToken9876543210',
      GITHUB_TOOLSETS: 'repos,issues',
    });
    assert.deepEqual(rewritten.mcpServers.postgres?.env, {
      POSTGRES_URL: 'postgresql://app:s3cret-pw@localhost:5432/app',
    });
  });

  it('leaves entries it did not import exactly as they were, and does not change its input', () => {
    for (const key of ['weather', 'notes', 'linear', 'hintbox'])
      assert.deepEqual(rewritten.mcpServers[key], original.mcpServers[key]);
    assert.deepEqual(original, JSON.parse(readFileSync(CONFIG, 'utf8')));
    assert.deepEqual(
      Object.keys(rewritten.mcpServers),
      Object.keys(original.mcpServers),
      'the order of entries is kept',
    );
  });

  it('refuses an entry that already runs hintbox, and an env value its arguments would contradict', () => {
    assert.throws(
      () => rewriteClientConfig(original, 'mcpServers', [{ key: 'hintbox', profile: '/p.yaml', addEnv: {} }], LAUNCH),
      (e: unknown) => e instanceof RewriteError && /already runs hintbox/.test(e.message),
    );
    assert.throws(
      () => rewriteClientConfig(rewritten, 'mcpServers', [{ key: 'github', profile: '/p.yaml', addEnv: {} }], LAUNCH),
      /already runs hintbox/,
      'a config rewritten once is not rewritten again',
    );
    const clash = { mcpServers: { x: { command: 'npx', args: ['a@1.0.0'], env: { API_KEY: 'one' } } } };
    assert.throws(
      () =>
        rewriteClientConfig(
          clash,
          'mcpServers',
          [{ key: 'x', profile: '/p.yaml', addEnv: { API_KEY: 'two' } }],
          LAUNCH,
        ),
      /env API_KEY is set already/,
    );
  });

  it('keeps VS Code keys (type, inputs) and writes JSON as the clients do', () => {
    const vscode = {
      inputs: [{ id: 'k', type: 'promptString' }],
      servers: { f: { type: 'stdio', command: 'uvx', args: ['mcp-server-fetch'] } },
    };
    const out = rewriteClientConfig(vscode, 'servers', [{ key: 'f', profile: '/p/f.yaml', addEnv: {} }], {
      command: '/usr/bin/node',
      args: ['/opt/hintbox/dist/hintbox.mjs'],
    });
    assert.deepEqual(out, {
      inputs: vscode.inputs,
      servers: {
        f: { type: 'stdio', command: '/usr/bin/node', args: ['/opt/hintbox/dist/hintbox.mjs', 'run', '/p/f.yaml'] },
      },
    });
    assert.equal(configText(out), `${JSON.stringify(out, null, 2)}\n`);
  });
});

describe('an entry that already runs hintbox', () => {
  it('is told by its command, or a launcher’s first word; an argument named hintbox is not enough', () => {
    assert.equal(runsHintbox({ command: '/opt/hintbox/dist/hintbox.mjs', args: ['run', '/p.yaml'] }), true);
    assert.equal(runsHintbox({ command: 'npx', args: ['-y', 'hintbox@0.1.0', 'run', '/p.yaml'] }), true);
    assert.equal(
      runsHintbox({ command: '/usr/bin/node', args: ['/opt/hintbox/dist/hintbox.mjs', 'run', '/p.yaml'] }),
      true,
    );
    assert.equal(runsHintbox({ command: 'hintbox', args: ['run', 'p.yaml'] }), true);
    assert.equal(runsHintbox({ command: 'npx', args: ['-y', 'some-server', 'hintbox'] }), false);
    assert.equal(runsHintbox({ command: 'uvx', args: ['hintbox'] }), false);
  });
});
