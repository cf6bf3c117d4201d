/**
 * A JSON value as Postgres `jsonb` can hold it. Pure.
 *
 * jsonb refuses, in keys as in values, what a JSON text may escape but its text type cannot be:
 * NUL (`\u0000`, "unsupported Unicode escape sequence") and lone surrogates. An audit line
 * carries what a client (or, under `run`, the model) chose as argument keys and values, so the
 * sink's queryable copy of a record replaces them with U+FFFD, keys as values; the exact line
 * stays in the row's `text` (the chain's hashes are of it). Two keys that differ only there
 * become one (the last); a value nested deeper than {@link MAX_JSONB_DEPTH} becomes a string
 * saying so: both only in the queryable copy.
 */

/** Arrays and objects nested deeper than this are cut in the queryable copy (Postgres parses jsonb recursively). */
export const MAX_JSONB_DEPTH = 256;

// eslint-disable-next-line no-control-regex -- NUL is what is looked for
const NOT_FOR_JSONB = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** A string as jsonb and a Postgres text column can hold it: NUL and lone surrogates as U+FFFD. */
export function jsonbString(text: string): string {
  return text.replace(NOT_FOR_JSONB, '\ufffd');
}

/** The JSON text of `value` (as JSON.stringify writes it) with every key and string cleaned ({@link jsonbString}). */
export function jsonbText(value: unknown): string {
  return write(value, 0) ?? 'null';
}

/** undefined: no JSON (left out of an object, `null` in an array, as JSON.stringify does). */
function write(value: unknown, depth: number): string | undefined {
  if (typeof value === 'string') return JSON.stringify(jsonbString(value));
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if ('toJSON' in value && typeof value.toJSON === 'function') return write((value.toJSON as () => unknown)(), depth);
  if (depth >= MAX_JSONB_DEPTH) return JSON.stringify(`(nested deeper than ${MAX_JSONB_DEPTH} levels: see the text)`);
  if (Array.isArray(value)) return `[${value.map((v: unknown) => write(v, depth + 1) ?? 'null').join(',')}]`;
  const fields: string[] = [];
  for (const [key, v] of Object.entries(value)) {
    const text = write(v, depth + 1);
    if (text !== undefined) fields.push(`${JSON.stringify(jsonbString(key))}:${text}`);
  }
  return `{${fields.join(',')}}`;
}
