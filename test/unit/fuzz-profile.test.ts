import assert from 'node:assert/strict';
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { loadProfile, type Profile } from '../../src/profile/load-profile.js';
import { formatProblem, ProfileError } from '../../src/profile/profile-problems.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { anyJson, fuzzParameters, hostileText, nestingDepth } from './support/fuzz.js';

/**
 * The profile loader under hostile text, fuzzed: random bytes, YAML's own traps (aliases that
 * multiply, an alias inside its own anchor, tags, several documents, deep nesting, duplicate
 * and odd keys) and valid profiles with one field broken. Each load is quick and either returns
 * a profile whose mounts are real, allowed folders, or throws a ProfileError of one line per
 * problem, each `file: field.path: message`, nothing else (no line feed or control character of
 * the input inside a line, so a problem cannot pass for another).
 */

const dir = scratchFolder('hintbox-fuzz-profile-');
const home = path.join(dir, 'home');
mkdirSync(path.join(home, '.ssh'), { recursive: true });
writeFileSync(path.join(home, '.ssh', 'id_ed25519'), 'secret');
mkdirSync(path.join(dir, 'profiles', 'data'), { recursive: true });
const file = path.join(dir, 'profiles', 'server.yaml');
const options = { vars: { WORK: path.join(dir, 'profiles', 'data'), EMPTY: '' }, home, ownPaths: [] };

/** A valid profile, with something of everything the loader reads. */
const VALID: Record<string, unknown> = {
  name: 'files',
  server: { image: 'hintbox/files:1', args: ['--root', '/data'] },
  mounts: [
    { source: './data', target: '/data' },
    { source: '${WORK}', target: '/work', mode: 'ro' },
  ],
  env: { LEVEL: '${EMPTY:-info}' },
  limits: { memory: '256m', cpus: 1 },
  tools: { read: { annotations: { readOnlyHint: true }, tags: ['files'] } },
};

/** The fields a mutation aims at (most are the loader's own; the last are anywhere). */
const FIELDS: (string | number)[][] = [
  [],
  ['name'],
  ['server'],
  ['server', 'image'],
  ['server', 'args'],
  ['server', 'args', 0],
  ['server', 'build'],
  ['server', 'npm'],
  ['mounts'],
  ['mounts', 0],
  ['mounts', 0, 'source'],
  ['mounts', 1, 'source'],
  ['mounts', 0, 'target'],
  ['mounts', 1, 'mode'],
  ['env'],
  ['env', 'LEVEL'],
  ['limits', 'memory'],
  ['limits', 'cpus'],
  ['tools', 'read', 'annotations', 'readOnlyHint'],
  ['trust'],
  ['hold'],
  ['network'],
  ['serverRequests'],
  ['database'],
  ['timeouts', 'call'],
  ['__proto__'],
  ['a\nb'],
];

/** What a field is set to: any JSON, host paths a sandbox must never get, interpolations, deep values. */
const fieldValue: fc.Arbitrary<unknown> = fc.oneof(
  anyJson,
  hostileText(),
  fc.constantFrom(
    '/',
    '/etc',
    '~',
    '~/.ssh',
    '../..',
    path.join(dir, 'nowhere'),
    '/data\u0000x',
    '${WORK}',
    '${UNSET}',
    '${UNSET:-${WORK}}',
    '${',
    '$${sandbox:databaseUrl}',
    '${sandbox:databaseUrl}',
    '${sandbox:nope}',
    'trusted',
    'none',
    false,
  ),
  nestingDepth.map((depth) => {
    let value: unknown = 0;
    for (let i = 0; i < Math.min(depth, 200); i++) value = { a: value };
    return value;
  }),
);

type Mutation = { field: (string | number)[]; value?: unknown; drop: boolean };

const mutation: fc.Arbitrary<Mutation> = fc.record(
  { field: fc.constantFrom(...FIELDS), value: fieldValue, drop: fc.boolean() },
  { requiredKeys: ['field', 'drop'] },
);

function mutated(base: Record<string, unknown>, mutations: Mutation[]): unknown {
  let root: unknown = structuredClone(base);
  for (const { field, value, drop } of mutations) {
    if (field.length === 0) {
      if (!drop) root = value;
      continue;
    }
    let at: unknown = root;
    for (const key of field.slice(0, -1)) {
      if (at === null || typeof at !== 'object' || !Object.hasOwn(at, key)) break;
      at = (at as Record<string | number, unknown>)[key];
    }
    if (at === null || typeof at !== 'object') continue;
    const last = field.at(-1)!;
    // An own key whatever its name (a `__proto__` field stays a field).
    if (drop) delete (at as Record<string | number, unknown>)[last];
    else Object.defineProperty(at, last, { value, enumerable: true, writable: true, configurable: true });
  }
  return root;
}

/** How deep YAML is nested (its parser overflows its stack at some thousands, and says so, slowly). */
const yamlDepth = fc.oneof(fc.integer({ min: 0, max: 64 }), fc.constantFrom(1_000, 5_000));

/** YAML's own traps, and text that is barely YAML. */
const yamlTrap: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 60 }),
  hostileText(60),
  fc.constantFrom(
    'a: &a [*a]\n',
    'name: &n files\nserver: {image: *n}\nmounts: &m [*m]\n',
    '!!binary aGVsbG8=',
    'name: !!set {a, b}\nserver: !!omap [image: x]\n',
    'name: !custom x\n',
    'name: files\n---\nname: other\n',
    'name: files\nname: again\n',
    '<<: {name: files}\nserver: {image: x}\n',
    '? [a, b]\n: 1\n',
    '? {a: 1}\n: 1\n',
    'name: "files\\u0000"\nserver: {image: x}\n',
    '"a\\nb": 1\nname: files\nserver: {image: x}\n',
    '\ufeffname: files\nserver: {image: x}\n',
    'name: 0x1f\nserver: {image: .inf}\n',
    'name: files\nserver: {image: x}\nlimits: {cpus: 1e999}\n',
  ),
  // Aliases that multiply: `levels` levels of `width` references each.
  fc
    .record({ levels: fc.integer({ min: 1, max: 9 }), width: fc.integer({ min: 1, max: 10 }) })
    .map(({ levels, width }) => {
      let text = 'l0: &l0 [x]\n';
      for (let i = 1; i <= levels; i++)
        text += `l${i}: &l${i} [${Array(width)
          .fill(`*l${i - 1}`)
          .join(', ')}]\n`;
      return text;
    }),
  yamlDepth.map((depth) => `name: files\nserver: ${'['.repeat(depth)}${']'.repeat(depth)}\n`),
  yamlDepth.map(
    (depth) =>
      `name: files\nenv:\n${Array.from({ length: Math.min(depth, 300) }, (_, i) => `${' '.repeat(i + 2)}k${i}:\n`).join('')}`,
  ),
);

const profileText: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.array(mutation, { minLength: 1, maxLength: 3 }).map((m) => stringify(mutated(VALID, m))) },
  { weight: 2, arbitrary: yamlTrap },
);

/** The property: a profile, or one ProfileError of well-formed lines; quickly. */
function checkLoad(text: string): Profile | ProfileError {
  const started = performance.now();
  let outcome: Profile | ProfileError;
  try {
    outcome = loadProfile(file, { ...options, text });
  } catch (error) {
    assert.ok(error instanceof ProfileError, `not a ProfileError: ${String(error)}\n${(error as Error).stack}`);
    outcome = error;
  }
  const ms = performance.now() - started;
  assert.ok(ms < 2_000, `loading took ${Math.round(ms)} ms`);
  if (outcome instanceof ProfileError) {
    assert.ok(outcome.problems.length > 0, 'at least one problem');
    const lines = outcome.message.split('\n');
    assert.equal(lines.length, outcome.problems.length, `one line per problem:\n${outcome.message}`);
    lines.forEach((line, i) => {
      const problem = outcome.problems[i]!;
      assert.equal(problem.file, file);
      assert.equal(line, formatProblem(problem));
      assert.ok(line.startsWith(`${file}: `), line);
      assert.ok(problem.message.length > 0, `a problem says what is wrong: ${line}`);
      // eslint-disable-next-line no-control-regex
      assert.doesNotMatch(line, /[\u0000-\u0008\u000a-\u001f\u007f\u2028\u2029]/, 'no control character in a line');
    });
    return outcome;
  }
  assert.equal(outcome.file, file);
  for (const mount of outcome.mounts) {
    assert.ok(path.isAbsolute(mount.source) && statSync(mount.source).isDirectory(), `a real folder: ${mount.source}`);
    assert.ok(!mount.source.startsWith(path.join(home, '.ssh')), `a secret folder mounted: ${mount.source}`);
    assert.ok(mount.target.startsWith('/') && mount.target !== '/', `a container path: ${mount.target}`);
  }
  return outcome;
}

describe('fuzz: the profile loader', () => {
  it('the valid profile the fuzzing breaks loads', () => {
    const profile = checkLoad(stringify(VALID));
    assert.ok(!(profile instanceof ProfileError), profile instanceof ProfileError ? profile.message : '');
  });

  // proves: FAIL-CLOSED
  it('returns a profile or throws one ProfileError of well-formed lines, quickly, whatever the text', () => {
    fc.assert(
      fc.property(profileText, (text) => void checkLoad(text)),
      fuzzParameters(250),
    );
  });
});

describe('counterexamples the fuzzing found in the profile loader, kept', () => {
  const failing = (text: string): ProfileError => {
    const outcome = checkLoad(text);
    assert.ok(outcome instanceof ProfileError, 'refused');
    return outcome;
  };

  it('aliases that multiply (a billion laughs) are refused as invalid YAML, not thrown as a ReferenceError', () => {
    const laughs =
      'a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n';
    assert.match(failing(laughs).message, /: invalid YAML: .*alias/i);
  });

  it('an alias inside its own anchor is refused by its field, not a stack overflow', () => {
    assert.match(
      failing('name: files\nserver: {image: x}\nmounts: &m [*m]\n').message,
      /: mounts\[0\]: contains itself/,
    );
  });

  it('a key with a line feed or a control character stays on its problem line', () => {
    const error = failing('"a\\nb\\u001b[2J": 1\nname: files\nserver: {image: x}\n');
    assert.equal(error.message.split('\n').length, error.problems.length);
    assert.match(error.message, /: a\\u000ab\\u001b\[2J: unknown key$/);
  });
});
