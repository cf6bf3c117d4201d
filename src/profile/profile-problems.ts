import type { z } from 'zod';
import { ProfileSchema } from './profile-schema.js';
import { HintboxError } from '../util/hintbox-error.js';
import { renderServerText } from '../util/render-server-text.js';
import { didYouMean } from '../util/did-you-mean.js';

/** What is wrong with a profile, one problem per key: the file, the key's path, the message. */
export interface ProfileProblem {
  file: string;
  path: string;
  message: string;
}

/** A profile that cannot be used. `message` has one line per problem. */
export class ProfileError extends HintboxError {
  readonly problems: ProfileProblem[];
  constructor(problems: ProfileProblem[]) {
    super(problems.map(formatProblem).join('\n'), { exitCode: 2 });
    this.name = 'ProfileError';
    this.problems = problems;
  }
}

/** One line: a key or a value of the profile quoted in it (a line feed, an escape sequence) is rendered. */
export function formatProblem(p: ProfileProblem): string {
  const [file, at, message] = [p.file, p.path, p.message].map(renderServerText);
  return at ? `${file}: ${at}: ${message}` : `${file}: ${message}`;
}

/** `mounts[0].source` from `['mounts', 0, 'source']`. */
export function formatFieldPath(parts: readonly PropertyKey[]): string {
  let out = '';
  for (const part of parts) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}

/** The problems of one schema issue, an unknown key with the keys it may have meant. */
export function schemaProblems(file: string, issue: z.core.$ZodIssue): ProfileProblem[] {
  if (issue.code === 'unrecognized_keys') {
    // One line per key, named by its own path: `limits.swap: unknown key`.
    const known = keysAt(ProfileSchema, issue.path);
    return issue.keys.map((key) => ({
      file,
      path: formatFieldPath([...issue.path, key]),
      message: `unknown key${didYouMean(key, known)}`,
    }));
  }
  return [{ file, path: formatFieldPath(issue.path), message: issue.message }];
}

/** The keys the schema knows at a field path (an object's), for "did you mean". */
function keysAt(schema: unknown, at: readonly PropertyKey[]): string[] {
  const def = (schema as { _zod?: { def?: Record<string, unknown> } } | undefined)?._zod?.def;
  if (!def) return [];
  const [head, ...rest] = at;
  switch (def.type) {
    case 'optional':
    case 'default':
    case 'prefault':
    case 'nullable':
    case 'readonly':
    case 'catch':
      return keysAt(def.innerType, at);
    case 'pipe':
      return keysAt(def.in, at);
    case 'union':
      return [...new Set((def.options as unknown[]).flatMap((option) => keysAt(option, at)))];
    case 'intersection':
      return [...keysAt(def.left, at), ...keysAt(def.right, at)];
    case 'object': {
      const shape = def.shape as Record<string, unknown>;
      return head === undefined ? Object.keys(shape) : keysAt(shape[String(head)], rest);
    }
    case 'array':
      return typeof head === 'number' ? keysAt(def.element, rest) : [];
    case 'record':
      return head === undefined ? [] : keysAt(def.valueType, rest);
    default:
      return [];
  }
}
