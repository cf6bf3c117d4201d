import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { namedHosts } from '../../src/import/named-hosts.js';
import { importClientEntry } from '../../src/import/command-line.js';
import { importRegistryServer, type RegistryServer } from '../../src/import/registry-server.js';
import { renderProfile, type ProfileDraft } from '../../src/import/profile-draft.js';

const draftOf = (outcome: ReturnType<typeof importClientEntry>): ProfileDraft => {
  assert.ok('draft' in outcome, JSON.stringify(outcome));
  return outcome.draft;
};

describe('the network an import proposes', () => {
  // proves: IMPORT-NETWORK-ALLOW
  it('proposes network.allow of the public hosts the entry names (host:port only), else none', () => {
    assert.deepEqual(
      namedHosts([
        'https://api.weather.example/v1?key=s3cret',
        'http://user:pw@Files.Example.org:8080/x',
        'https://{HOST}/api',
        'http://localhost:3000',
        'https://127.0.0.1/',
        'https://intranet/',
        'see https://api.weather.example/other',
        42,
      ]),
      ['api.weather.example:443', 'files.example.org:8080'],
    );
    // A client config entry: the URL in its env is proposed; its secret never is.
    const withUrl = draftOf(
      importClientEntry('weather', 'weather', 'config.json, mcpServers.weather', {
        command: 'npx',
        args: ['-y', 'weather-mcp@1.0.0'],
        env: { WEATHER_API: 'https://api.weather.example/v1', WEATHER_KEY: 'k-secret' },
      }),
    );
    const text = renderProfile(withUrl);
    assert.deepEqual((parse(text) as { network: unknown }).network, { allow: ['api.weather.example:443'] });
    assert.match(text.replace(/\n# +/g, ' '), /network: allow api\.weather\.example:443: the hosts its entry names/);
    assert.ok(!text.includes('k-secret'));
    // None named: none, and the header says how to list hosts (never open).
    const none = renderProfile(
      draftOf(importClientEntry('memory', 'memory', 'c', { command: 'npx', args: ['-y', 'mem@1.0.0'], env: {} })),
    );
    assert.equal((parse(none) as { network: unknown }).network, 'none');
    assert.match(none.replace(/\n# +/g, ' '), /network: none \(its entry names no host it reaches\)/);
    // A registry entry: its remotes and its variables' defaults.
    const server = {
      name: 'io.github.example/weather',
      version: '1.0.0',
      remotes: [{ type: 'streamable-http', url: 'https://mcp.weather.example/mcp' }],
      packages: [
        {
          registryType: 'npm',
          identifier: 'weather-mcp',
          version: '1.0.0',
          transport: { type: 'stdio' },
          registryBaseUrl: 'https://registry.npmjs.org',
          environmentVariables: [{ name: 'API_URL', default: 'https://api.weather.example/v1' }],
        },
      ],
    } as unknown as RegistryServer;
    const registry = importRegistryServer(server, 'weather', 'server.json');
    assert.ok('draft' in registry);
    assert.deepEqual(registry.draft.allowHosts, ['api.weather.example:443', 'mcp.weather.example:443']);
  });
});
