import { createHash, randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { pinHash, toJsonValue, type JsonValue, type PinnedDefinition, type ToolPin } from '../policy/tool-pin.js';
import { withExclusiveLock, type ExclusiveLockOptions } from '../util/exclusive-lock.js';
import { escapeInvisibleInJson } from '../util/render-server-text.js';
import { HintboxError } from '../util/hintbox-error.js';

/**
 * The lock file of what a person approved, beside the profile (`<profile>.lock.json`), written
 * only by `hintbox approve` and reviewed in version control like any lock file: per tool its
 * whole approved definition (every field of the tool, annotations with their defaults filled
 * in) and its SHA-256 (`policy/tool-pin.ts`), and the server's `instructions` with theirs.
 * `hintbox run` reads it and never writes it.
 */

/** The format this hintbox writes and reads (`lockfileVersion`). */
export const LOCK_FILE_VERSION = 1;

export interface LockedTool {
  /** SHA-256 (hex) of the canonical JSON of `definition`. */
  sha256: string;
  definition: PinnedDefinition;
}

export interface LockFile {
  lockfileVersion: typeof LOCK_FILE_VERSION;
  /** The profile's `name`. */
  server: string;
  /** The server's `instructions` from `initialize` as approved (null: it sent none), and their SHA-256. */
  instructions: { text: string | null; sha256: string | null };
  /** By tool name. */
  tools: Record<string, LockedTool>;
}

/** A lock file that cannot be read as one: names the file and what is wrong, in one line. */
export class LockFileError extends HintboxError {
  constructor(message: string) {
    super(message, { exitCode: 2 });
    this.name = 'LockFileError';
  }
}

export { lockFilePath } from '../profile/profile-paths.js';

/** SHA-256 (hex) of instructions text, null for none. */
export function instructionsHash(text: string | null | undefined): string | null {
  return typeof text === 'string' ? createHash('sha256').update(text, 'utf8').digest('hex') : null;
}

/**
 * The locked tool of this name, if any. Tool names are the server's: `constructor` or
 * `__proto__` are valid ones, so only the lock's own entries count.
 */
export function lockedTool(lock: LockFile, name: string): LockedTool | undefined {
  return Object.hasOwn(lock.tools, name) ? lock.tools[name] : undefined;
}

/**
 * The locked tools as a server would list them (a field the pin holds as `null` left out), in
 * name order: what a cold start serves until the running server is verified. Each pins to its
 * locked hash again.
 */
export function lockedDefinitions(lock: LockFile): Tool[] {
  return Object.keys(lock.tools)
    .sort()
    .map((name) => {
      const { definition } = lock.tools[name]!;
      const listed = Object.fromEntries(Object.entries(definition).filter(([, value]) => value !== null));
      return listed as unknown as Tool;
    });
}

/** An empty lock of a server. */
export function emptyLock(server: string): LockFile {
  return { lockfileVersion: LOCK_FILE_VERSION, server, instructions: { text: null, sha256: null }, tools: {} };
}

/** The lock with one tool's pin set. */
export function lockTool(lock: LockFile, pin: ToolPin): LockFile {
  return { ...lock, tools: { ...lock.tools, [pin.definition.name]: { sha256: pin.hash, definition: pin.definition } } };
}

/**
 * The lock file's text: two-space JSON, tools by name and every object's keys sorted, so that
 * the same approvals always give the same bytes and a change shows as a small diff.
 */
export function serializeLockFile(lock: LockFile): string {
  // Server text that would reorder or hide what a reviewer reads is written escaped.
  return escapeInvisibleInJson(JSON.stringify(sortKeys(toJsonValue(lock)), null, 2)) + '\n';
}

function sortKeys(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, sortKeys(value[key] as JsonValue)]),
    );
  }
  return value;
}

/**
 * Reads and checks a lock file; undefined when there is none. Throws a {@link LockFileError}
 * for anything else: unreadable, not JSON, another format version, another server, a field of
 * the wrong type, or a tool whose hash is not its definition's (edited by hand).
 */
export function readLockFile(file: string, server: string): LockFile | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new LockFileError(`${file}: cannot read it: ${(error as Error).message}`);
  }
  return parseLockFile(text, file, server);
}

/** Checks a lock file's text (see {@link readLockFile}). Pure. */
export function parseLockFile(text: string, file: string, server: string): LockFile {
  const fail = (field: string, message: string): never => {
    throw new LockFileError(`${file}: ${field}: ${message}`);
  };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return fail('(file)', `not JSON: ${(error as Error).message}`);
  }
  if (!isObject(value)) return fail('(file)', 'expected a JSON object');
  if (value.lockfileVersion !== LOCK_FILE_VERSION) {
    return fail(
      'lockfileVersion',
      `${JSON.stringify(value.lockfileVersion)} is not a version this hintbox reads (${LOCK_FILE_VERSION})`,
    );
  }
  if (value.server !== server)
    fail('server', `the lock is of ${JSON.stringify(value.server)}, the profile of ${server}`);
  const instructions = value.instructions;
  if (!isObject(instructions)) return fail('instructions', 'expected an object');
  if (instructions.text !== null && typeof instructions.text !== 'string') {
    fail('instructions.text', 'expected a string or null');
  }
  if (instructions.sha256 !== instructionsHash(instructions.text as string | null)) {
    fail('instructions.sha256', 'is not the SHA-256 of instructions.text');
  }
  if (!isObject(value.tools)) return fail('tools', 'expected an object');
  const tools: Record<string, LockedTool> = {};
  for (const [name, entry] of Object.entries(value.tools)) {
    if (!isObject(entry) || !isObject(entry.definition) || typeof entry.sha256 !== 'string') {
      return fail(`tools.${name}`, 'expected { sha256, definition }');
    }
    const definition = entry.definition as unknown as PinnedDefinition;
    if (definition.name !== name) fail(`tools.${name}.definition.name`, `is ${JSON.stringify(definition.name)}`);
    if (!isObject(definition.annotations)) fail(`tools.${name}.definition.annotations`, 'expected an object');
    if (pinHash(definition) !== entry.sha256) {
      fail(`tools.${name}.sha256`, 'is not the SHA-256 of its definition (edited by hand?): approve the tool again');
    }
    // An own entry whatever the name: `tools['__proto__'] = …` would set the prototype instead.
    Object.defineProperty(tools, name, {
      value: { sha256: entry.sha256, definition },
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return {
    lockfileVersion: LOCK_FILE_VERSION,
    server,
    instructions: { text: instructions.text as string | null, sha256: instructions.sha256 as string | null },
    tools,
  };
}

/**
 * Writes the lock file atomically: a temporary file in the same folder, synced, renamed over
 * the old one, and the folder synced, so that a reader sees the old lock or the new, never a
 * part. Mode 0644: it is meant to be read and committed.
 */
export function writeLockFile(file: string, lock: LockFile): void {
  const dir = path.dirname(file);
  const temporary = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const fd = openSync(temporary, 'wx', 0o644);
  try {
    writeSync(fd, serializeLockFile(lock));
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    rmSync(temporary, { force: true });
    throw error;
  }
  closeSync(fd);
  try {
    renameSync(temporary, file);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
  try {
    const dirFd = openSync(dir, 'r');
    try {
      fsyncSync(dirFd);
    } finally {
      closeSync(dirFd);
    }
  } catch {
    // a folder that cannot be opened for sync (some file systems): the rename stands
  }
}

/**
 * Changes the lock file: under an exclusive lock (`<file>.lock`, see `util/exclusive-lock.ts`)
 * it reads the file as it is now, applies `edit` and writes the result (when it differs), so
 * that concurrent `hintbox approve` runs each apply their approvals to the others' and none is
 * lost. Returns the lock as read under the lock and as written.
 */
export async function updateLockFile(
  file: string,
  server: string,
  edit: (current: LockFile) => LockFile,
  options?: ExclusiveLockOptions,
): Promise<{ current: LockFile | undefined; updated: LockFile; written: boolean }> {
  return withExclusiveLock(
    file,
    () => {
      const current = readLockFile(file, server);
      const updated = edit(current ?? emptyLock(server));
      const written = !current || serializeLockFile(current) !== serializeLockFile(updated);
      if (written) writeLockFile(file, updated);
      return { current, updated, written };
    },
    options,
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
