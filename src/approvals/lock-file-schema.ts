import { createHash } from 'node:crypto';
import { z } from 'zod';
import {
  LIST_FIELD,
  promptOrResourceHash,
  KEY_FIELD,
  type PromptOrResourceKind,
} from '../policy/prompt-resource-pin.js';
import { pinHash, type JsonValue, type PinnedDefinition } from '../policy/tool-pin.js';

/**
 * The lock file's format as a zod schema, its types derived from it (`lock-file.ts` reads and
 * writes the file through it). An approved definition is not parsed but hashed: it is kept as
 * the very object read (no field dropped or added), and an entry whose SHA-256 is not its
 * definition's is refused. Sections are read key by key, so a key like `__proto__` is an entry
 * like any other (a plain `z.record` would drop it).
 */

/** The format this hintbox writes and reads (`lockfileVersion`). */
export const LOCK_FILE_VERSION = 1;

/** SHA-256 (hex) of instructions text, null for none. */
export function instructionsHash(text: string | null | undefined): string | null {
  return typeof text === 'string' ? createHash('sha256').update(text, 'utf8').digest('hex') : null;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** An own entry whatever the key: `section['__proto__'] = …` would set the prototype instead. */
export function defineEntry<T>(section: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(section, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A JSON object taken as it is (the same object, not a copy): what is hashed is what is kept. */
const definitionOf = <T>() => z.custom<T>(isObject, { error: 'expected an object' });
const sha256 = z.string({ error: 'expected a string' });

/** Checks an entry against its key; the field (below the entry) and the problem, or nothing. */
type EntryCheck<T> = (key: string, entry: T) => { at: string; message: string } | undefined;

/**
 * A section of entries by key: each own key kept, each entry
 * parsed by `entry`, then checked against its key, in key order, so the first problem is the
 * first a reader meets.
 */
function section<T extends z.ZodType>(entry: T, check: EntryCheck<z.output<T>>) {
  return z.custom<Record<string, unknown>>(isObject, { error: 'expected an object' }).transform((value, ctx) => {
    const entries: Record<string, z.output<T>> = {};
    for (const [key, raw] of Object.entries(value)) {
      const parsed = entry.safeParse(raw);
      const problem = parsed.success ? check(key, parsed.data) : firstProblem(parsed.error);
      if (problem) {
        const path = problem.at === '' ? [key] : [key, ...problem.at.split('.')];
        ctx.addIssue({ code: 'custom', path, message: problem.message, input: raw });
        return z.NEVER;
      }
      if (parsed.success) defineEntry(entries, key, parsed.data);
    }
    return entries;
  });
}

/** The first problem zod found in an entry, below it. */
function firstProblem(error: z.ZodError): { at: string; message: string } {
  const issue = error.issues[0];
  return { at: issue?.path.join('.') ?? '', message: issue?.message ?? 'invalid' };
}

const ENTRY = 'expected { sha256, definition }';

export const LockedToolSchema = z.object({ sha256, definition: definitionOf<PinnedDefinition>() }, { error: ENTRY });

/** An approved prompt, resource or resource template. */
export const LockedPromptOrResourceSchema = z.object(
  { sha256, definition: definitionOf<{ [key: string]: JsonValue }>() },
  { error: ENTRY },
);

const checkTool: EntryCheck<z.output<typeof LockedToolSchema>> = (name, { sha256, definition }) => {
  if (definition.name !== name) return { at: 'definition.name', message: `is ${JSON.stringify(definition.name)}` };
  if (!isObject(definition.annotations)) return { at: 'definition.annotations', message: 'expected an object' };
  if (pinHash(definition) !== sha256) {
    return { at: 'sha256', message: 'is not the SHA-256 of its definition (edited by hand?): approve the tool again' };
  }
  return undefined;
};

const checkPromptOrResource =
  (kind: PromptOrResourceKind): EntryCheck<z.output<typeof LockedPromptOrResourceSchema>> =>
  (key, { sha256, definition }) => {
    // The field itself, not `keyOf` (which is `String(…)`: a name 123 or none would pass as "123" or "undefined").
    const own = definition[KEY_FIELD[kind]];
    if (own !== key) return { at: 'definition', message: `is of ${String(JSON.stringify(own))}` };
    if (promptOrResourceHash(definition) !== sha256) {
      return { at: 'sha256', message: 'is not the SHA-256 of its definition (edited by hand?): approve it again' };
    }
    return undefined;
  };

/** A section of prompts, resources or templates: absent while empty, so older lock files read the same. */
const listedSection = (kind: PromptOrResourceKind) =>
  section(LockedPromptOrResourceSchema, checkPromptOrResource(kind))
    .optional()
    .transform((entries) => entries ?? {});

/** The server's `instructions` from `initialize` as approved (null: it sent none), and their SHA-256. */
const InstructionsSchema = z
  .object(
    {
      text: z.string({ error: 'expected a string or null' }).nullable(),
      sha256: z.string({ error: 'expected a string or null' }).nullable(),
    },
    { error: 'expected an object' },
  )
  .superRefine((value, ctx) => {
    if (value.sha256 !== instructionsHash(value.text)) {
      ctx.addIssue({ code: 'custom', path: ['sha256'], message: 'is not the SHA-256 of instructions.text' });
    }
  });

/**
 * A person's standing answer for one tool (`hintbox approve --always`): calls of the tool whose
 * arguments match run without asking, while the tool's definition is the one it was given for
 * (`sha256`, the approved pin's hash). Patterns as in a pre-approval: a regular expression
 * matching the whole value, or `{ under: <folder> }`; none: every call of the tool.
 */
export const StandingAnswerSchema = z.strictObject(
  {
    sha256: z
      .string({ error: 'expected a SHA-256 (hex)' })
      .regex(/^[0-9a-f]{64}$/, { error: 'expected a SHA-256 (hex)' }),
    arguments: z.record(
      z.string(),
      z.union([z.string(), z.strictObject({ under: z.string().regex(/^\/[^\0]*$/) })], {
        error: 'expected a regular expression or { under: <absolute folder> }',
      }),
      { error: 'expected an object' },
    ),
    by: z.string({ error: 'expected a string' }),
    at: z.string({ error: 'expected a string' }),
  },
  { error: 'expected { sha256, arguments, by, at }' },
);

const checkStanding: EntryCheck<z.output<typeof StandingAnswerSchema>> = (_tool, { arguments: patterns }) => {
  for (const [name, pattern] of Object.entries(patterns)) {
    if (typeof pattern !== 'string') continue;
    try {
      new RegExp(pattern, 'u');
    } catch (error) {
      return { at: `arguments.${name}`, message: `not a regular expression: ${(error as Error).message}` };
    }
  }
  return undefined;
};

const version = z.literal(LOCK_FILE_VERSION, {
  error: (issue) => `${JSON.stringify(issue.input)} is not a version this hintbox reads (${LOCK_FILE_VERSION})`,
});

/** The lock file; its fields in the order they are checked (the first problem is the one named). */
export const LockFileSchema = z.object({
  lockfileVersion: version,
  /** The profile's `name`. */
  server: z.string({ error: 'expected a string' }),
  instructions: InstructionsSchema,
  /** By tool name. */
  tools: section(LockedToolSchema, checkTool),
  /** By prompt name; sections of offers are left out while empty, so older lock files read the same. */
  [LIST_FIELD.prompt]: listedSection('prompt'),
  /** By URI. */
  [LIST_FIELD.resource]: listedSection('resource'),
  /** By URI template. */
  [LIST_FIELD.resourceTemplate]: listedSection('resourceTemplate'),
  /** Standing answers by tool name; left out while empty, so older lock files read the same. */
  standing: section(StandingAnswerSchema, checkStanding)
    .optional()
    .transform((entries) => entries ?? {}),
});

export type LockFile = z.output<typeof LockFileSchema>;
export type LockedTool = z.output<typeof LockedToolSchema>;
export type LockedPromptOrResource = z.output<typeof LockedPromptOrResourceSchema>;
export type LockedStandingAnswer = z.output<typeof StandingAnswerSchema>;

/** The schema of the lock of one server: another server's lock is refused, naming both. */
export function lockFileSchemaOf(server: string) {
  return LockFileSchema.extend({
    server: z.literal(server, {
      error: (issue) => `the lock is of ${JSON.stringify(issue.input)}, the profile of ${server}`,
    }),
  });
}
