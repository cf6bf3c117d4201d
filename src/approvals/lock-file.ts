import { readFileSync } from 'node:fs';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import {
  LIST_FIELD,
  PROMPT_RESOURCE_KINDS,
  keyOf,
  type PromptOrResourceKind,
  type PromptOrResourcePin,
} from '../policy/prompt-resource-pin.js';
import { toJsonValue, type JsonValue, type ToolPin } from '../policy/tool-pin.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { withExclusiveLock, type ExclusiveLockOptions } from '../util/exclusive-lock.js';
import { escapeInvisibleInJson, renderServerText } from '../util/render-server-text.js';
import { HintboxError } from '../util/hintbox-error.js';
import {
  defineEntry,
  isObject,
  LOCK_FILE_VERSION,
  lockFileSchemaOf,
  type LockedPromptOrResource,
  type LockedStandingAnswer,
  type LockedTool,
  type LockFile,
} from './lock-file-schema.js';

export {
  instructionsHash,
  LOCK_FILE_VERSION,
  LockFileSchema,
  type LockedPromptOrResource,
  type LockedStandingAnswer,
  type LockedTool,
  type LockFile,
} from './lock-file-schema.js';

/**
 * The lock file of what a person approved, beside the profile (`<profile>.lock.json`), written
 * only by `hintbox approve` and reviewed in version control like any lock file: per tool its
 * whole approved definition (every field of the tool, annotations with their defaults filled
 * in) and its SHA-256 (`policy/tool-pin.ts`), the server's `instructions` with theirs, and
 * per prompt, resource and resource template its definition as listed and its SHA-256
 * (`policy/prompt-resource-pin.ts`; sections left out while empty, so older lock files read the same).
 * `hintbox run` reads it and never writes it. Its format is a zod schema (`lock-file-schema.ts`):
 * every read goes through it, and so does every write (a lock that would not read back is not
 * written).
 */

/** The lock file's section of each kind of offer. */
export const PROMPT_RESOURCE_SECTION = LIST_FIELD satisfies Record<PromptOrResourceKind, keyof LockFile>;

/** A lock file that cannot be read as one: names the file and what is wrong, in one line. */
export class LockFileError extends HintboxError {
  constructor(message: string) {
    super(message, { exitCode: 2 });
    this.name = 'LockFileError';
  }
}

export { lockFilePath } from '../profile/profile-paths.js';

/**
 * The locked tool of this name, if any. Tool names are the server's: `constructor` or
 * `__proto__` are valid ones, so only the lock's own entries count.
 */
export function lockedTool(lock: LockFile, name: string): LockedTool | undefined {
  return Object.hasOwn(lock.tools, name) ? lock.tools[name] : undefined;
}

/** The locked offer of this kind and key, if any (own entries only, as for tools). */
export function lockedPromptOrResource(
  lock: LockFile,
  kind: PromptOrResourceKind,
  key: string,
): LockedPromptOrResource | undefined {
  const section = lock[PROMPT_RESOURCE_SECTION[kind]];
  return Object.hasOwn(section, key) ? section[key] : undefined;
}

/** The lock with one offer's pin set. */
export function lockPromptOrResource(lock: LockFile, kind: PromptOrResourceKind, pin: PromptOrResourcePin): LockFile {
  const section = PROMPT_RESOURCE_SECTION[kind];
  const entry: LockedPromptOrResource = { sha256: pin.hash, definition: pin.definition };
  return { ...lock, [section]: withEntry(lock[section], keyOf(kind, pin.definition), entry) };
}

/** The lock with every entry of a kind whose key is not kept removed. */
export function keepPromptsOrResources(
  lock: LockFile,
  kind: PromptOrResourceKind,
  keep: (key: string) => boolean,
): LockFile {
  const section = PROMPT_RESOURCE_SECTION[kind];
  const kept: Record<string, LockedPromptOrResource> = {};
  for (const [key, entry] of Object.entries(lock[section])) if (keep(key)) defineEntry(kept, key, entry);
  return { ...lock, [section]: kept };
}

/** The locked offers of a kind as a server would list them, in key order (a cold start serves them). */
export function lockedPromptsOrResources(lock: LockFile, kind: PromptOrResourceKind): object[] {
  const section = lock[PROMPT_RESOURCE_SECTION[kind]];
  return Object.keys(section)
    .sort()
    .map((key) => section[key]!.definition);
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
  return {
    lockfileVersion: LOCK_FILE_VERSION,
    server,
    instructions: { text: null, sha256: null },
    tools: {},
    prompts: {},
    resources: {},
    resourceTemplates: {},
    standing: {},
  };
}

/** A copy of a section with one entry set. */
function withEntry<T>(section: Record<string, T>, key: string, value: T): Record<string, T> {
  const copy: Record<string, T> = {};
  for (const [k, v] of Object.entries(section)) defineEntry(copy, k, v);
  defineEntry(copy, key, value);
  return copy;
}

/** The standing answer for this tool, if any (own entries only, as for tools). */
export function standingAnswerOf(lock: LockFile, tool: string): LockedStandingAnswer | undefined {
  return Object.hasOwn(lock.standing, tool) ? lock.standing[tool] : undefined;
}

/** The lock with a tool's standing answer set (`answer`) or revoked (undefined). */
export function withStandingAnswer(lock: LockFile, tool: string, answer: LockedStandingAnswer | undefined): LockFile {
  const standing: Record<string, LockedStandingAnswer> = {};
  for (const [k, v] of Object.entries(lock.standing)) if (k !== tool) defineEntry(standing, k, v);
  if (answer) defineEntry(standing, tool, answer);
  return { ...lock, standing };
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
  // Sections of offers only when they hold some: a lock of a server with tools only stays as it was.
  const written: Record<string, unknown> = { ...lock };
  for (const kind of PROMPT_RESOURCE_KINDS) {
    const section = PROMPT_RESOURCE_SECTION[kind];
    if (Object.keys(lock[section] ?? {}).length === 0) delete written[section];
  }
  if (Object.keys(lock.standing ?? {}).length === 0) delete written['standing'];
  // Server text that would reorder or hide what a reviewer reads is written escaped.
  return escapeInvisibleInJson(JSON.stringify(sortKeys(toJsonValue(written)), null, 2)) + '\n';
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

/** Checks a lock file's text with its schema (see {@link readLockFile}). Pure. */
export function parseLockFile(text: string, file: string, server: string): LockFile {
  const fail = (field: string, message: string): never => {
    // One line: what the file holds (a key, a value JSON.parse quotes) may be quoted in it, rendered.
    throw new LockFileError(renderServerText(`${file}: ${field}: ${message}`));
  };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return fail('(file)', `not JSON: ${(error as Error).message}`);
  }
  if (!isObject(value)) return fail('(file)', 'expected a JSON object');
  // Hashing and quoting a value walk it recursively: deeper, they would overflow the stack.
  if (nestedDeeperThan(value, MAX_LOCK_DEPTH)) return fail('(file)', `nested deeper than ${MAX_LOCK_DEPTH} levels`);
  const parsed = lockFileSchemaOf(server).safeParse(value);
  if (parsed.success) return parsed.data;
  // The first problem, as a reader meets it (the schema's fields are in that order).
  const issue = parsed.error.issues[0]!;
  return fail(issue.path.map(String).join('.'), issue.message);
}

/**
 * Writes the lock file atomically: a temporary file in the same folder, synced, renamed over
 * the old one, and the folder synced, so that a reader sees the old lock or the new, never a
 * part. Mode 0644: it is meant to be read and committed.
 */
export function writeLockFile(file: string, lock: LockFile): void {
  const text = serializeLockFile(lock);
  parseLockFile(text, file, lock.server); // a lock that would not read back (a hash not its definition's) is refused
  writeFileAtomic(file, text);
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

/** How deep a lock file may nest (an approved schema is far shallower). */
const MAX_LOCK_DEPTH = 512;

/** Whether a JSON value nests objects or arrays deeper than `limit`; without recursion, whatever its depth. */
function nestedDeeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const [node, depth] = next;
    if (node === null || typeof node !== 'object') continue;
    if (depth >= limit) return true;
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return false;
}
