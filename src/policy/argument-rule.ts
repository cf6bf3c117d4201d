import path from 'node:path';

/**
 * How a pre-approval matches one argument of a call (pure). A server resolves a path argument
 * itself, so a rule meant for a folder must hold for the path the server will use, not for the
 * text: `/workspace/scratch/../notes.txt` is not inside `/workspace/scratch`.
 */
export type ArgumentRule =
  /** The argument's text (a string, or the JSON of any other value) matches the whole pattern. */
  | { kind: 'regex'; pattern: RegExp }
  /** The argument is an absolute path strictly inside `under` (a normalised folder). */
  | { kind: 'path'; under: string };

/** Does the text have a `..` path segment (`a/../b`, `../a`, `a/..`)? Pure. */
export function hasDotDotSegment(text: string): boolean {
  return text.split('/').includes('..');
}

/**
 * Is `value` a path strictly inside `folder`, as a server would resolve it? Only absolute paths
 * without any `..` segment count (a `..` after a symlink leads wherever the link does, so it
 * is refused rather than normalised away); `.` and repeated slashes are normalised. Pure.
 */
export function isPathUnder(value: unknown, folder: string): boolean {
  if (typeof value !== 'string' || !value.startsWith('/') || value.includes('\0')) return false;
  if (hasDotDotSegment(value)) return false;
  const normalized = path.posix.normalize(value);
  const base = normalizeFolder(folder);
  const prefix = base === '/' ? '/' : `${base}/`;
  return normalized.startsWith(prefix) && normalized.replace(/\/+$/, '').length > base.length;
}

/** `/a//b/./c/` is `/a/b/c`. Pure. */
export function normalizeFolder(folder: string): string {
  const normalized = path.posix.normalize(folder);
  return normalized.length > 1 ? normalized.replace(/\/+$/, '') : normalized;
}

/**
 * Does one argument's value satisfy its rule? A regex rule matches raw text, but never a value
 * with a `..` path segment: whatever the pattern meant, a walk out of a folder is put to a person.
 */
export function matchesArgumentRule(rule: ArgumentRule, value: unknown): boolean {
  if (value === undefined) return false;
  if (rule.kind === 'path') return isPathUnder(value, rule.under);
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  if (hasDotDotSegment(text)) return false;
  rule.pattern.lastIndex = 0;
  return rule.pattern.test(text);
}

/** The profile's form of a rule: a regular expression, or `{ under: folder }`. */
export function compileArgumentRule(source: string | { under: string }): ArgumentRule {
  if (typeof source === 'string') return { kind: 'regex', pattern: new RegExp(`^(?:${source})$`, 'u') };
  return { kind: 'path', under: normalizeFolder(source.under) };
}
