// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// V8's toISOString reads ICU's zone data on its first call (~0.6 MB resident): src/util/iso-time.ts.
const NO_TO_ISO_STRING = {
  selector: "CallExpression[callee.property.name='toISOString']",
  message: 'use isoTime (src/util/iso-time.ts): the same text without loading ICU zone data',
};

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'images/**/node_modules/', 'test/fixtures/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      // McpError.code is a number; comparing it with the SDK's ErrorCode enum is the SDK's idiom.
      '@typescript-eslint/no-unsafe-enum-comparison': 'off',
    },
  },
  // stdout is the MCP transport under `hintbox run`: library code logs through the logger only.
  // The environment is read in one module (src/config/environment.ts), where it is checked.
  {
    files: ['src/**/*.ts'],
    ignores: ['src/config/environment.ts'],
    rules: {
      'no-console': 'error',
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'read the environment through src/config/environment.ts' },
      ],
      'no-restricted-syntax': ['error', NO_TO_ISO_STRING],
    },
  },
  {
    files: ['src/config/environment.ts'],
    rules: { 'no-console': 'error', 'no-restricted-syntax': ['error', NO_TO_ISO_STRING] },
  },
  // The policy is pure: it imports only its own modules and Node's computing ones (hashing, path
  // text), never I/O (node:fs, node:child_process, dockerode, pg) nor another layer of hintbox.
  // test/unit/policy-purity.test.ts plants imports to prove this rule bites.
  {
    files: ['src/policy/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(?!\\./[^/]+\\.js$|node:(crypto|path)$)',
              message: 'src/policy is pure: import only ./<module>.js, node:crypto or node:path',
            },
          ],
        },
      ],
      // A block's no-restricted-syntax replaces an earlier one's: the toISOString ban is repeated.
      'no-restricted-syntax': [
        'error',
        { selector: 'ImportExpression', message: 'src/policy is pure: no dynamic import' },
        NO_TO_ISO_STRING,
      ],
      'no-restricted-globals': [
        'error',
        { name: 'process', message: 'src/policy is pure: what it needs is passed in' },
        { name: 'fetch', message: 'src/policy is pure: no network' },
        { name: 'require', message: 'src/policy is pure: no require' },
      ],
    },
  },
  // The import's mapping is pure too: config text in, profile drafts out. The CLI reads and
  // writes the files (src/cli/import-command.ts) and checks the drafts with the real loader.
  {
    files: ['src/import/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex:
                '^(?!\\./[^/]+\\.js$|\\.\\./packages/package-source\\.js$|\\.\\./util/render-server-text\\.js$|node:path$|zod$|yaml$)',
              message:
                'src/import is pure: import only ./<module>.js, ../packages/package-source.js, ../util/render-server-text.js, node:path, zod or yaml',
            },
          ],
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'process', message: 'src/import is pure: what it needs is passed in' },
      ],
    },
  },
  // Only the Docker engine knows Docker: everything else goes through the sandbox engine port
  // (src/engine/sandbox-engine.ts), so that another engine can take its place.
  {
    files: ['src/**/*.ts'],
    ignores: ['src/engine/docker/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: [{ name: 'dockerode', message: 'use the SandboxEngine port; only src/engine/docker/ uses Docker' }] },
      ],
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['describe', 'it', 'suite', 'test'] },
          ],
        },
      ],
    },
  },
  { files: ['eslint.config.js', 'scripts/**/*.mjs', 'bench/**/*.mjs'], ...tseslint.configs.disableTypeChecked },
  // The Node base's egress preload: plain CommonJS that runs inside the sandboxes' Node.
  {
    files: ['images/**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'commonjs',
      globals: { require: 'readonly', process: 'readonly', Buffer: 'readonly', URL: 'readonly' },
    },
    rules: { ...tseslint.configs.disableTypeChecked.rules, '@typescript-eslint/no-require-imports': 'off' },
  },
);
