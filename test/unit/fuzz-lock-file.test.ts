import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import {
  emptyLock,
  instructionsHash,
  LockFileError,
  lockPromptOrResource,
  lockTool,
  parseLockFile,
  readLockFile,
  serializeLockFile,
  type LockFile,
} from '../../src/approvals/lock-file.js';
import { promptOrResourceHash, pinPromptOrResource } from '../../src/policy/prompt-resource-pin.js';
import { pinHash, pinTool } from '../../src/policy/tool-pin.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { anyJson, fuzzParameters, hostileText, nestingDepth } from './support/fuzz.js';

/**
 * The lock file reader under hostile text, fuzzed: random bytes, and lock files hintbox wrote
 * with one thing changed (a value, a key, a type, the text cut short, a value nested deep). It
 * either returns a lock whose every entry is hashed right, and reads back the same once written
 * again, or throws a LockFileError of one line that names the file and the field; and a lock
 * whose approved definitions were edited without their hashes is never taken.
 */

const FILE = '/p/fs.lock.json';
const SERVER = 'fs';

/** A lock hintbox would write: tools (one named like an Object member), instructions, offers of each kind. */
function writtenLock(names: readonly string[], description: string): LockFile {
  let lock = emptyLock(SERVER);
  for (const name of names) {
    const tool: Tool = {
      name,
      description,
      inputSchema: { type: 'object', properties: { path: { type: 'string' } } },
      annotations: { readOnlyHint: true },
    };
    lock = lockTool(lock, pinTool(tool));
  }
  lock = lockPromptOrResource(lock, 'prompt', pinPromptOrResource({ name: 'p', description }));
  lock = lockPromptOrResource(lock, 'resource', pinPromptOrResource({ uri: 'note://1', name: 'one' }));
  lock = lockPromptOrResource(
    lock,
    'resourceTemplate',
    pinPromptOrResource({ uriTemplate: 'note://{id}', name: 'notes' }),
  );
  return { ...lock, instructions: { text: description, sha256: instructionsHash(description) } };
}

const lockArb: fc.Arbitrary<LockFile> = fc
  .tuple(
    fc.uniqueArray(fc.oneof(fc.constantFrom('read', '__proto__', 'constructor'), hostileText(8)), { maxLength: 3 }),
    hostileText(),
  )
  .map(([names, description]) => writtenLock(names, description));

/** Where in a lock file a change is made: a path of keys, followed as far as it goes. */
const where: fc.Arbitrary<string[]> = fc.array(
  fc.oneof(
    fc.constantFrom(
      'lockfileVersion',
      'server',
      'instructions',
      'text',
      'sha256',
      'tools',
      'definition',
      'annotations',
    ),
    fc.constantFrom(
      'prompts',
      'resources',
      'resourceTemplates',
      'name',
      'uri',
      'description',
      'inputSchema',
      '__proto__',
    ),
    fc.constantFrom('read', 'p', 'note://1', 'note://{id}', 'readOnlyHint'),
    hostileText(6),
  ),
  { minLength: 1, maxLength: 5 },
);

type Change = { at: string[]; to: 'value' | 'drop' | 'deep'; value?: unknown; depth: number };

const change: fc.Arbitrary<Change> = fc.record(
  { at: where, to: fc.constantFrom('value', 'drop', 'deep'), value: anyJson, depth: nestingDepth },
  { requiredKeys: ['at', 'to', 'depth'] },
);

const DEEP = '"@deep@"';

/** The lock's text with a change made (a deep value is written as text: JSON.stringify cannot). */
function changed(lock: LockFile, { at, to, value, depth }: Change): string {
  const root = JSON.parse(serializeLockFile(lock)) as Record<string, unknown>;
  let node: Record<string, unknown> = root;
  for (const key of at.slice(0, -1)) {
    // Own entries only: `__proto__` would lead out of the file, into Object.prototype.
    const next = Object.hasOwn(node, key) ? node[key] : undefined;
    if (next === null || typeof next !== 'object') break;
    node = next as Record<string, unknown>;
  }
  const key = at.at(-1)!;
  if (to === 'drop') delete node[key];
  else
    Object.defineProperty(node, key, {
      value: to === 'deep' ? '@deep@' : value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  const text = JSON.stringify(root);
  return to === 'deep' ? text.replace(DEEP, '['.repeat(depth) + ']'.repeat(depth)) : text;
}

const lockText: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(lockArb, change).map(([lock, c]) => changed(lock, c)) },
  {
    weight: 1,
    arbitrary: fc.tuple(lockArb, fc.nat()).map(([lock, cut]) => serializeLockFile(lock).slice(0, cut % 400)),
  },
  { weight: 1, arbitrary: fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), hostileText(40), fc.json()) },
  { weight: 1, arbitrary: nestingDepth.map((depth) => '['.repeat(depth) + ']'.repeat(depth)) },
);

const FIELD =
  /^(\(file\)|lockfileVersion|server|instructions(\.text|\.sha256)?|(tools|prompts|resources|resourceTemplates)(\..*)?): \S/;

/** The property: a lock hashed right, or one LockFileError line naming the file and the field. */
function checkRead(text: string): LockFile | LockFileError {
  let lock: LockFile;
  try {
    lock = parseLockFile(text, FILE, SERVER);
  } catch (error) {
    assert.ok(error instanceof LockFileError, `not a LockFileError: ${String(error)}\n${(error as Error).stack}`);
    assert.ok(error.message.startsWith(`${FILE}: `), error.message);
    assert.match(error.message.slice(FILE.length + 2), FIELD, 'names the field');
    // eslint-disable-next-line no-control-regex
    assert.doesNotMatch(error.message, /[\u0000-\u0008\u000a-\u001f\u007f\u2028\u2029]/, `one line: ${error.message}`);
    return error;
  }
  for (const [name, entry] of Object.entries(lock.tools)) {
    assert.equal(entry.definition.name, name);
    assert.equal(pinHash(entry.definition), entry.sha256, `tools.${name} hashed right`);
  }
  for (const section of ['prompts', 'resources', 'resourceTemplates'] as const) {
    for (const entry of Object.values(lock[section]))
      assert.equal(promptOrResourceHash(entry.definition), entry.sha256);
  }
  assert.equal(lock.instructions.sha256, instructionsHash(lock.instructions.text));
  assert.deepEqual(parseLockFile(serializeLockFile(lock), FILE, SERVER), lock, 'reads back the same once written');
  return lock;
}

describe('fuzz: the lock file reader', () => {
  // proves: FAIL-CLOSED
  it('returns a lock hashed right, or throws one LockFileError line naming the field, whatever the text', () => {
    fc.assert(
      fc.property(lockText, (text) => void checkRead(text)),
      fuzzParameters(300),
    );
  });

  // proves: PINS
  it('never takes an approved definition edited without its hash', () => {
    const edit = fc.record({ tool: fc.nat(), at: where, value: anyJson });
    fc.assert(
      fc.property(lockArb, edit, (lock, { tool, at, value }) => {
        const names = Object.keys(lock.tools);
        fc.pre(names.length > 0);
        const name = names[tool % names.length]!;
        const before = JSON.stringify(lock.tools[name]!.definition);
        const text = changed(lock, { at: ['tools', name, 'definition', ...at], to: 'value', value, depth: 0 });
        const after = (JSON.parse(text) as LockFile).tools[name]?.definition;
        fc.pre(after !== undefined && JSON.stringify(after) !== before); // the definition did change
        assert.ok(checkRead(text) instanceof LockFileError, 'refused');
      }),
      fuzzParameters(300),
    );
  });
});

describe('counterexamples the fuzzing found in the lock file reader, kept', () => {
  it('a tool name with a line feed or an escape sequence stays on the error line, rendered', () => {
    const text = JSON.stringify({
      lockfileVersion: 1,
      server: SERVER,
      instructions: { text: null, sha256: null },
      tools: { 'a\n\u001b[2Jb': { sha256: 'x', definition: {} } },
    });
    const error = checkRead(text);
    assert.ok(error instanceof LockFileError);
    assert.match(error.message, /tools\.a\\u000a\\u001b\[2Jb\.definition\.name: is undefined$/);
  });

  it('a value nested too deep to hash is refused as a LockFileError, not a RangeError', () => {
    const lock = writtenLock(['read'], 'd');
    for (const at of [
      ['lockfileVersion'],
      ['tools', 'read', 'definition', 'inputSchema'],
      ['prompts', 'p', 'definition', 'x'],
    ]) {
      const error = checkRead(changed(lock, { at, to: 'deep', depth: 100_000 }));
      assert.ok(error instanceof LockFileError, at.join('.'));
    }
  });

  it('reads no lock where there is none, and refuses a folder in its place', () => {
    const dir = scratchFolder('hintbox-fuzz-lock-');
    assert.equal(readLockFile(path.join(dir, 'none.lock.json'), SERVER), undefined);
    mkdirSync(path.join(dir, 'folder.lock.json'));
    assert.throws(() => readLockFile(path.join(dir, 'folder.lock.json'), SERVER), LockFileError);
  });
});
