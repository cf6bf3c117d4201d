import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { ENVIRONMENT_VARIABLES } from '../../src/config/environment.js';
import { planImport } from '../../src/import/import-source.js';
import { renderProfile, type ProfileDraft } from '../../src/import/profile-draft.js';
import { referencedVariables } from '../../src/profile/interpolate.js';

/**
 * What a publisher writes never chooses a host path or a host variable (IMPORT-PUBLISHER-NO-HOST):
 * over every import fixture and a hostile registry entry, the written profile reads only
 * variables hintbox named, and its header names exactly the variables it reads.
 */
const FIXTURES = fileURLToPath(new URL('../fixtures/import/', import.meta.url));

function draftsOf(file: string, json: unknown = JSON.parse(readFileSync(path.join(FIXTURES, file), 'utf8'))) {
  const pick = file === 'registry-list.json' ? { server: 'io.github.modelcontextprotocol/filesystem' } : {};
  // As the CLI calls it: hintbox's own variables are reserved.
  const reserved = new Set(ENVIRONMENT_VARIABLES.map((v) => v.name));
  return planImport(json, path.join(FIXTURES, file), pick, reserved).outcomes.flatMap((o) =>
    'draft' in o ? [o.draft] : [],
  );
}

/** The written profile: what its fields read from the host, and the names its header tells the operator to set. */
function written(draft: ProfileDraft): {
  reads: string[];
  told: string[];
  text: string;
  body: Record<string, unknown>;
} {
  const text = renderProfile(draft);
  const body = parse(text) as Record<string, unknown>;
  const header = text
    .split('\n')
    .filter((l) => l.startsWith('#'))
    .join('\n')
    .replace(/\n# +/g, ' ');
  const line = /Reads from the environment hintbox runs with only: ([A-Za-z0-9_, ]+)\. Set/.exec(header);
  const told = line ? line[1]!.split(', ') : [];
  if (!line) assert.match(header, /Reads no variable of the environment hintbox runs with\./);
  return { reads: referencedVariables(body), told: told.sort(), text, body };
}

const hostile = (): ProfileDraft => {
  const [draft] = draftsOf('registry-hostile.json');
  assert.ok(draft);
  return draft;
};

describe('import: the publisher never chooses a host path or a host variable', () => {
  // proves: IMPORT-PUBLISHER-NO-HOST
  it("the hostile entry's profile reads only HINTBOX_WEATHER_… variables; its mounts' sources are those variables", () => {
    const draft = hostile();
    const { reads, body, text } = written(draft);
    assert.deepEqual(reads, [
      'HINTBOX_WEATHER_AWS_SECRET_ACCESS_KEY',
      'HINTBOX_WEATHER_CACHE',
      'HINTBOX_WEATHER_CONFIG',
      'HINTBOX_WEATHER_GH_HOSTS',
      'HINTBOX_WEATHER_GITHUB_TOKEN',
      'HINTBOX_WEATHER_HOST',
      'HINTBOX_WEATHER_SSH_AUTH_SOCK',
    ]);
    const mounts = body.mounts as { source: string; mode: string }[];
    assert.deepEqual(
      mounts.map((m) => m.source),
      ['${HINTBOX_WEATHER_CONFIG}', '${HINTBOX_WEATHER_GH_HOSTS}', '${HINTBOX_WEATHER_CACHE}'],
    );
    assert.ok(
      mounts.every((m) => m.mode === 'ro'),
      'a proposed mount is read-only',
    );
    assert.deepEqual(body.env, {
      PYNOTES_FILE: '/data/config',
      AWS_SECRET_ACCESS_KEY: '${HINTBOX_WEATHER_AWS_SECRET_ACCESS_KEY}',
      GITHUB_TOKEN: '${HINTBOX_WEATHER_GITHUB_TOKEN}',
      SSH_AUTH_SOCK: '${HINTBOX_WEATHER_SSH_AUTH_SOCK}',
      UPSTREAM: 'https://${HINTBOX_WEATHER_HOST}/api',
    });
    // The publisher's paths are shown to the operator, as text in the header, and nowhere else.
    const fields = text
      .split('\n')
      .filter((l) => !l.startsWith('#'))
      .join('\n');
    for (const path of ['.bashrc', '.config/gh', '~', '{HOME}']) assert.ok(!fields.includes(path), path);
    const header = text.replace(/\n# +/g, ' ');
    assert.match(header, /The entry suggests "\{HOME\}\/\.bashrc": never used as a path\./);
    assert.match(header, /The entry suggests "~\/\.config\/gh": never used as a path\./);
  });

  // proves: IMPORT-PUBLISHER-NO-HOST
  it("the notes name exactly the variables the written profile reads (every fixture, the hostile entry's included)", () => {
    const files = readdirSync(FIXTURES).filter((f) => f.endsWith('.json'));
    assert.ok(files.includes('registry-hostile.json'));
    let checked = 0;
    for (const file of files) {
      for (const draft of draftsOf(file)) {
        const { reads, told } = written(draft);
        assert.deepEqual(told, reads, `${file}: ${draft.key}`);
        assert.deepEqual([...draft.hostVariables].sort(), reads, `${file}: ${draft.key} (the import's own list)`);
        if (file.startsWith('registry-'))
          for (const name of reads)
            assert.match(
              name,
              new RegExp(`^HINTBOX_${draft.name.toUpperCase().replace(/[^A-Z0-9]+/g, '_')}_[A-Z0-9_]+$`),
            );
        checked++;
      }
    }
    assert.ok(checked >= 15, `${checked} profiles checked`);
  });

  // proves: IMPORT-PUBLISHER-NO-HOST
  it('names are [A-Z0-9_], collision-free, and never one of hintbox’s own variables', () => {
    const entry = {
      name: 'io.example/log',
      packages: [
        {
          registryType: 'npm',
          identifier: 'log-mcp',
          version: '1.0.0',
          packageArguments: [
            { type: 'named', name: '--api-key', isRequired: true, isSecret: true },
            { type: 'named', name: '--api_key', isRequired: true, isSecret: true },
            { type: 'positional', valueHint: 'größe!', isRequired: true },
          ],
          environmentVariables: [
            { name: 'LEVEL', isRequired: true },
            { name: 'API_KEY', isRequired: true, isSecret: true },
          ],
        },
      ],
    };
    const [draft] = draftsOf('log.json', entry);
    assert.ok(draft);
    const { reads, told } = written(draft);
    assert.deepEqual(told, reads);
    for (const name of reads) assert.match(name, /^[A-Z0-9_]+$/);
    assert.deepEqual(draft.server.args, [
      '--api-key',
      '${HINTBOX_LOG_API_KEY}',
      '--api_key',
      '${HINTBOX_LOG_API_KEY_2}',
      '${HINTBOX_LOG_GR_SSE}',
    ]);
    // HINTBOX_LOG_LEVEL is hintbox's own (its log level): the server's LEVEL gets another name.
    assert.deepEqual(draft.env, { LEVEL: '${HINTBOX_LOG_LEVEL_2}', API_KEY: '${HINTBOX_LOG_API_KEY_3}' });
  });
});
