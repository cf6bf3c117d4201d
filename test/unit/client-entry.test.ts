import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parse } from 'yaml';
import { CLIENTS, clientConfig, clientEntry, type ClientName, type EntryInputs } from '../../src/cli/client-entry.js';
import { didYouMean } from '../../src/util/did-you-mean.js';

const gallery = parse(`
name: filesystem
server:
  image: hintbox/server-filesystem:2026.8.31
  build: \${HINTBOX_IMAGES}/server-filesystem
  args: ["\${sandbox:mount.workspace}"]
mounts:
  - name: workspace
    source: \${WORKSPACE:-\${CWD}}
    target: /workspace
env:
  LEVEL: \${LEVEL:-info}
  GITHUB_TOKEN: \${GITHUB_TOKEN}
`) as unknown;

function inputs(vars: Record<string, string>, extra: Partial<EntryInputs> = {}): EntryInputs {
  return {
    bin: '/opt/hintbox/bin/hintbox',
    profile: '/srv/mcp/filesystem.yaml',
    tree: gallery,
    vars: { CWD: '/home/me/project', HINTBOX_IMAGES: '/opt/hintbox/lib/images', GITHUB_TOKEN: 'ghp_secret', ...vars },
    builtins: ['CWD', 'HINTBOX_IMAGES'],
    ownVariables: ['DOCKER_HOST', 'HINTBOX_STATE_DIR', 'HINTBOX_DATABASE_URL'],
    nodePath: '/usr/bin/node',
    ...extra,
  };
}

describe('the client entry install prints', () => {
  it('pins a variable whose default is the folder install ran in; leaves other defaults and built-ins out', () => {
    const { entry } = clientEntry(inputs({}));
    assert.equal(entry.command, '/opt/hintbox/bin/hintbox');
    assert.deepEqual(entry.args, ['run', '/srv/mcp/filesystem.yaml']);
    // From a client the folder is / or $HOME, which the mount check refuses: the entry says where it was.
    assert.equal(entry.env.WORKSPACE, '/home/me/project');
    assert.equal('LEVEL' in entry.env, false, 'a default that does not depend on the folder applies anywhere');
    assert.equal('CWD' in entry.env || 'HINTBOX_IMAGES' in entry.env, false);
    assert.equal('PATH' in entry.env, false, 'node is where /usr/bin/env looks');
  });

  it('carries the values set at install: the profile variables and hintbox own ones', () => {
    const { entry } = clientEntry(
      inputs({ WORKSPACE: '/srv/repo', LEVEL: 'debug', HINTBOX_STATE_DIR: '/var/lib/hb', TERM: 'xterm' }),
    );
    assert.equal(entry.env.WORKSPACE, '/srv/repo');
    assert.equal(entry.env.LEVEL, 'debug');
    assert.equal(entry.env.HINTBOX_STATE_DIR, '/var/lib/hb');
    assert.equal('TERM' in entry.env, false, 'a variable neither the profile nor hintbox reads stays out');
  });

  // proves: CLIENT-ENTRY-SECRETS
  it('never prints the value of a secret-looking variable: a placeholder, and the name is reported', () => {
    const { entry, withheld } = clientEntry(inputs({ HINTBOX_DATABASE_URL: 'postgres://a:pw@db/x' }));
    const text = JSON.stringify(entry);
    assert.equal(text.includes('ghp_secret') || text.includes('pw@db'), false, text);
    assert.equal(entry.env.GITHUB_TOKEN, '<GITHUB_TOKEN: fill in>');
    assert.deepEqual(
      withheld.map((w) => w.name),
      ['GITHUB_TOKEN', 'HINTBOX_DATABASE_URL'],
    );
  });

  it('puts node folder first in PATH when /usr/bin/env would not find it', () => {
    const { entry } = clientEntry(inputs({}, { nodePath: '/home/me/.nvm/versions/node/v20/bin/node' }));
    assert.equal(entry.env.PATH, '/home/me/.nvm/versions/node/v20/bin:/usr/local/bin:/usr/bin:/bin');
  });

  it("writes each client's own format", () => {
    const { entry } = clientEntry(inputs({}));
    const wrapper = (client: ClientName): string => Object.keys(clientConfig(client, 'filesystem', entry))[0] ?? '';
    assert.equal(wrapper('claude-desktop'), 'mcpServers');
    assert.equal(wrapper('claude-code'), 'mcpServers');
    assert.equal(wrapper('cursor'), 'mcpServers');
    assert.equal(wrapper('vscode'), 'servers');
    assert.deepEqual(clientConfig('vscode', 'filesystem', entry), {
      servers: { filesystem: { type: 'stdio', ...entry } },
    });
    assert.deepEqual(clientConfig('claude-desktop', 'filesystem', entry), { mcpServers: { filesystem: entry } });
    assert.deepEqual(Object.keys(CLIENTS).sort(), ['claude-code', 'claude-desktop', 'cursor', 'vscode']);
  });
});

describe('did you mean', () => {
  it('names the close candidate, and none when nothing is close', () => {
    assert.equal(didYouMean('mount', ['mounts', 'network', 'limits']), ' (did you mean mounts?)');
    assert.equal(didYouMean('netwrok', ['mounts', 'network', 'limits']), ' (did you mean network?)');
    assert.equal(didYouMean('--rebiuld', ['--rebuild', '--client']), ' (did you mean --rebuild?)');
    assert.equal(didYouMean('zzz', ['mounts', 'network']), '');
  });
});
