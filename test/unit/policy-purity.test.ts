import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';

/**
 * `src/policy` is pure (CONVENTIONS.md): it imports only itself and Node's computing modules.
 * ESLint's rule for it (eslint.config.js) is proved here by planting imports in a file under its
 * scope and linting it with the project's own configuration. The planted file exists only as
 * text: the type-aware parser is let to take it without a tsconfig entry.
 */
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const planted = (folder: string): string => `${REPO}src/${folder}/planted-import.ts`;

const eslint = new ESLint({
  cwd: REPO,
  overrideConfig: {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['src/policy/planted-import.ts', 'src/import/planted-import.ts'] },
      },
    },
  },
});

async function purityErrors(source: string, folder = 'policy'): Promise<string[]> {
  const [result] = await eslint.lintText(`${source}\n`, { filePath: planted(folder) });
  assert.ok(result);
  const fatal = result.messages.filter((m) => m.fatal);
  assert.deepEqual(fatal, [], 'the planted file parses');
  return result.messages
    .filter((m) => m.message.includes(`src/${folder} is pure`))
    .map((m) => `${m.ruleId}: ${m.message}`);
}

describe('the lint rule that keeps src/policy pure', () => {
  const forbidden = [
    "import { readFileSync } from 'node:fs';\nexport const f = readFileSync;",
    "import { spawn } from 'node:child_process';\nexport const f = spawn;",
    "import Docker from 'dockerode';\nexport const f = Docker;",
    "import pg from 'pg';\nexport const f = pg;",
    "import { ROLE_PREFIX } from '../database/role-grants.js';\nexport const f = ROLE_PREFIX;",
    "import type { Profile } from '../profile/load-profile.js';\nexport type F = Profile;",
    "export { hintboxEnvironment } from '../config/environment.js';",
    "import { createHash } from 'crypto';\nexport const f = createHash;",
    "export const f = (): Promise<unknown> => import('node:fs');",
    'export const f = (): string => process.cwd();',
  ];
  for (const source of forbidden) {
    it(`fails on ${source.split('\n')[0]}`, async () => {
      assert.notDeepEqual(await purityErrors(source), [], source);
    });
  }

  const permitted = [
    "import { HINT_DEFAULTS } from './hints.js';\nexport const f = HINT_DEFAULTS;",
    "import type { ToolHints } from './hints.js';\nexport type F = ToolHints;",
    "import { createHash } from 'node:crypto';\nexport const f = createHash;",
    "import path from 'node:path';\nexport const f = path.posix.normalize;",
  ];
  for (const source of permitted) {
    it(`lets ${source.split('\n')[0]} pass`, async () => {
      assert.deepEqual(await purityErrors(source), []);
    });
  }

  it('finds nothing in src/policy as it is', async () => {
    const results = await eslint.lintFiles(['src/policy/**/*.ts']);
    assert.ok(results.length >= 6);
    assert.deepEqual(
      results.flatMap((r) => r.messages.map((m) => `${r.filePath}:${m.line}: ${m.message}`)),
      [],
    );
  });
});

describe('the lint rule that keeps src/import pure', () => {
  it('fails on file system, process and Docker access, and lets its own modules, the package spec and yaml pass', async () => {
    for (const source of [
      "import { readFileSync } from 'node:fs';\nexport const f = readFileSync;",
      "import Docker from 'dockerode';\nexport const f = Docker;",
      "import { loadProfile } from '../profile/load-profile.js';\nexport const f = loadProfile;",
      'export const f = (): string => process.cwd();',
    ])
      assert.notDeepEqual(await purityErrors(source, 'import'), [], source);
    for (const source of [
      "import { literal } from './profile-draft.js';\nexport const f = literal;",
      "import { parsePypiSpec } from '../packages/package-source.js';\nexport const f = parsePypiSpec;",
      "import { stringify } from 'yaml';\nexport const f = stringify;",
    ])
      assert.deepEqual(await purityErrors(source, 'import'), [], source);
  });
});
