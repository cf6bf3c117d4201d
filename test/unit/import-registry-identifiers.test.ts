import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { importCommand } from '../../src/cli/import-command.js';
import { planImport } from '../../src/import/import-source.js';
import { renderProfile, type ProfileDraft } from '../../src/import/profile-draft.js';
import { loadProfile } from '../../src/profile/load-profile.js';
import { mountValues, substituteSandboxValues } from '../../src/profile/sandbox-values.js';
import { HintboxError } from '../../src/util/hintbox-error.js';

/**
 * A registry entry's package identifier and version are the publisher's text: they reach the
 * profile only as a plain package name and version, or an image reference (IMPORT-REGISTRY-
 * PACKAGE-GRAMMAR); and two path arguments of one valueHint get a mount each (their own name and
 * target), so the profile loads and each argument names its own mount.
 */
const work = mkdtempSync(path.join(tmpdir(), 'hintbox-import-ids-'));
after(() => rmSync(work, { recursive: true, force: true }));

type Pkg = Record<string, unknown>;
const entry = (pkg: Pkg, more: Pkg[] = []) => ({ name: 'io.example/weather', packages: [pkg, ...more] });

/** `hintbox import <file> --out <dir>` in process: its error (or undefined), what it printed, the files it left. */
async function runImport(json: unknown, label: string) {
  const dir = path.join(work, label);
  mkdirSync(dir);
  const file = path.join(dir, 'server.json');
  writeFileSync(file, JSON.stringify(json));
  const out = path.join(dir, 'out');
  const printed: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = (chunk: string | Uint8Array): boolean => (printed.push(String(chunk)), true);
  let error: unknown;
  try {
    await importCommand.run({ positionals: [file], values: { out } });
  } catch (caught) {
    error = caught;
  } finally {
    process.stdout.write = write;
  }
  const files = existsSync(out) ? readdirSync(out, { recursive: true, encoding: 'utf8' }) : [];
  const texts = files.map((f) => readFileSync(path.join(out, f), 'utf8'));
  return { error, printed: printed.join(''), files, texts, out };
}

const NPM_IDENTIFIER: Pkg = { registryType: 'npm', identifier: 'foo@${GITHUB_TOKEN}', version: '1.0.0' };
const NPM_IDENTIFIER_FIELD = /packages\[0\]\.identifier "foo@\$\{GITHUB_TOKEN\}" is not an npm package name/;

/** The import of `pkg` is refused in one line naming `field`, exit 2, and leaves no file (so no `${` in one). */
async function assertRefused(pkg: Pkg, field: RegExp, label: string, more: Pkg[] = []): Promise<void> {
  const result = await runImport(entry(pkg, more), label);
  assert.ok(result.error instanceof Error, 'the import fails');
  const message = result.error.message;
  assert.doesNotMatch(message, /but its notes name/, `the "bug" check, not a refusal: ${message}`);
  assert.ok(result.error instanceof HintboxError && result.error.exitCode === 2, `exit 2: ${message}`);
  assert.equal(message.split('\n').length, 1, message);
  assert.match(message, /^import: .*server\.json: refused: /);
  assert.match(message, field);
  assert.deepEqual(result.files, [], 'nothing written');
  for (const text of result.texts) assert.ok(!text.includes('${'), text);
}

describe('import: a registry package is a plain package name and version, or an image reference', () => {
  // proves: IMPORT-REGISTRY-PACKAGE-GRAMMAR
  it('an npm identifier foo@${GITHUB_TOKEN}: refused in one line naming the field (exit 2), nothing written, no ${ in any file', async () => {
    await assertRefused(NPM_IDENTIFIER, NPM_IDENTIFIER_FIELD, 'npm-identifier');
  });

  // proves: IMPORT-REGISTRY-PACKAGE-GRAMMAR
  it('an npm version ${GITHUB_TOKEN}: refused in one line naming the field (exit 2), nothing written, no ${ in any file', async () => {
    await assertRefused(
      { registryType: 'npm', identifier: 'foo', version: '${GITHUB_TOKEN}' },
      /packages\[0\]\.version "\$\{GITHUB_TOKEN\}" is not a plain version/,
      'npm-version',
    );
  });

  // proves: IMPORT-REGISTRY-PACKAGE-GRAMMAR
  it('a PyPI identifier x${HOME}: refused in one line naming the field (exit 2), nothing written, no ${ in any file', async () => {
    await assertRefused(
      { registryType: 'pypi', identifier: 'x${HOME}', version: '1.0' },
      /packages\[0\]\.identifier "x\$\{HOME\}" is not a PyPI package name/,
      'pypi-identifier',
    );
  });

  // proves: IMPORT-REGISTRY-PACKAGE-GRAMMAR
  it('an OCI image x:${HOME}: refused in one line naming the field (exit 2), nothing written, no ${ in any file', async () => {
    await assertRefused(
      { registryType: 'oci', identifier: 'x:${HOME}' },
      /packages\[0\]\.identifier "x:\$\{HOME\}" is not an image reference/,
      'oci-identifier',
    );
  });

  // proves: IMPORT-REGISTRY-PACKAGE-GRAMMAR
  it('an OCI version ${HOME} (the tag of an untagged image): refused in one line naming the field (exit 2), nothing written, no ${ in any file', async () => {
    await assertRefused(
      { registryType: 'oci', identifier: 'ghcr.io/example/weather', version: '${HOME}' },
      /packages\[0\]\.version "\$\{HOME\}" is not an image tag/,
      'oci-version',
    );
  });

  // proves: IMPORT-REGISTRY-PACKAGE-GRAMMAR
  it('a hostile package is not passed over for the next one: the whole entry is refused', async () => {
    await assertRefused(NPM_IDENTIFIER, NPM_IDENTIFIER_FIELD, 'hostile-then-plain', [
      { registryType: 'npm', identifier: 'weather-mcp', version: '1.0.0' },
    ]);
  });

  it('plain names, versions and image references are imported as written', () => {
    const cases: [Pkg, Record<string, string>][] = [
      [
        { registryType: 'npm', identifier: '@scope/weather-mcp', version: '1.2.3-beta.1' },
        { npm: '@scope/weather-mcp@1.2.3-beta.1' },
      ],
      [{ registryType: 'npm', identifier: 'weather-mcp' }, { npm: 'weather-mcp@latest' }],
      [
        { registryType: 'pypi', identifier: 'Weather_MCP', version: '2!1.0.post1' },
        { pypi: 'Weather_MCP==2!1.0.post1' },
      ],
      [
        { registryType: 'oci', identifier: 'localhost:5000/team/weather', version: '1.0' },
        { image: 'localhost:5000/team/weather:1.0' },
      ],
      [
        { registryType: 'oci', identifier: `ghcr.io/x/weather@sha256:${'a'.repeat(64)}` },
        { image: `ghcr.io/x/weather@sha256:${'a'.repeat(64)}` },
      ],
    ];
    for (const [pkg, server] of cases) {
      const [outcome] = planImport(entry(pkg), 'server.json').outcomes;
      assert.ok(outcome && 'draft' in outcome, JSON.stringify(outcome));
      assert.deepEqual({ ...outcome.draft.server, args: undefined }, { ...server, args: undefined });
    }
  });
});

describe('import: path arguments of one valueHint', () => {
  const twoDirs = {
    name: 'io.example/sync',
    packages: [
      {
        registryType: 'npm',
        identifier: 'sync-mcp',
        version: '1.0.0',
        packageArguments: [
          { type: 'positional', valueHint: 'dir', format: 'filepath', isRequired: true },
          { type: 'positional', valueHint: 'dir', format: 'filepath', isRequired: true },
        ],
      },
    ],
  };

  // proves: IMPORT-REGISTRY-MOUNT-NAMES
  it('get a mount each (dir, dir_2): the profile loads, and each argument names its own mount', () => {
    const [outcome] = planImport(twoDirs, 'server.json').outcomes;
    assert.ok(outcome && 'draft' in outcome);
    const draft: ProfileDraft = outcome.draft;
    assert.deepEqual(draft.hostVariables, ['HINTBOX_SYNC_DIR', 'HINTBOX_SYNC_DIR_2']);
    const first = mkdtempSync(path.join(work, 'first-'));
    const second = mkdtempSync(path.join(work, 'second-'));
    const profile = loadProfile(path.join(work, 'sync.yaml'), {
      text: renderProfile(draft),
      vars: { HINTBOX_SYNC_DIR: first, HINTBOX_SYNC_DIR_2: second },
      home: '/nonexistent-home',
      ownPaths: [],
    });
    assert.deepEqual(
      profile.mounts.map((m) => [m.name, m.source, m.target, m.mode]),
      [
        ['dir', first, '/data/dir', 'ro'],
        ['dir_2', second, '/data/dir_2', 'ro'],
      ],
    );
    assert.deepEqual(profile.server.args, ['${sandbox:mount.dir}', '${sandbox:mount.dir_2}']);
    const values = mountValues(profile.mounts);
    assert.deepEqual(
      (profile.server.args ?? []).map((arg) => substituteSandboxValues(arg, values, 'server.args')),
      ['/data/dir', '/data/dir_2'],
    );
  });
});
