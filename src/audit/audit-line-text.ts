import { HINT_NAMES } from '../policy/hints.js';
import { normalizeTag } from '../policy/tool-tags.js';
import {
  AUDIT_SCHEMA_VERSION,
  AuditRecordError,
  storedText,
  type AuditEvent,
  type AuditIntent,
} from './audit-record.js';
import { isoTime } from '../util/iso-time.js';

/**
 * The pieces of an audit line written as JSON text (the writer builds each line as text, not as
 * an object given to JSON.stringify: the same bytes, less work per call).
 */

/** Tag names remembered as stored, at most: a server's claimed tags are its own. */
const MAX_CACHED_TAGS = 1000;

/** The fields every line starts with, as JSON text without the closing brace. */
export function lineHead(id: string, time: Date, type: string): string {
  return `{"v":${AUDIT_SCHEMA_VERSION},"id":${JSON.stringify(id)},"time":"${isoTime(time)}","type":${JSON.stringify(type)}`;
}

export function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/** `,"name":<JSON>`, or nothing when the value has no JSON (undefined), as JSON.stringify leaves it out of an object. */
export function field(name: string, value: unknown): string {
  const text = JSON.stringify(value) as string | undefined;
  return text === undefined ? '' : `,"${name}":${text}`;
}

/** Fields as JSON text to follow others: `,"a":1,"b":"x"` (empty for no fields). */
export function fieldsText(fields: Record<string, unknown>): string {
  const text = JSON.stringify(fields);
  return text === '{}' ? '' : `,${text.slice(1, -1)}`;
}

/** The four hints, each a boolean, as JSON: a record says what was decided on, nothing else. */
export function hintsText(hints: unknown): string {
  if (hints === null || typeof hints !== 'object') return '{}';
  let text = '';
  for (const name of HINT_NAMES) {
    const value = (hints as Record<string, unknown>)[name];
    if (typeof value === 'boolean') text += `${text === '' ? '' : ','}"${name}":${value}`;
  }
  return `{${text}}`;
}

export function oneOf<T extends string>(value: unknown, allowed: readonly T[], what: string): T {
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  throw new AuditRecordError(`${what}: expected one of ${allowed.join(', ')}, got ${JSON.stringify(value)}`);
}

/** An event's fields but its type, every text capped ({@link storedText}): some are a server's (a violation's message). */
export function withoutType(event: AuditEvent): Record<string, unknown> {
  const rest: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(event)) {
    if (key === 'type') continue;
    rest[key] =
      typeof value === 'string'
        ? storedText(value)
        : Array.isArray(value)
          ? value.map((v: unknown) => (typeof v === 'string' ? storedText(v) : v))
          : value;
  }
  return rest;
}

/** Tag lists as stored: normalised, capped, as JSON; a tag's text is remembered (up to a bound). */
export class StoredTags {
  private readonly cache = new Map<string, string>();

  text(tags: AuditIntent['tags'], source: 'profile' | 'server'): string {
    let text = '';
    for (const tag of tags) {
      if (tag.source !== source) continue;
      let stored = this.cache.get(tag.name);
      if (stored === undefined) {
        stored = JSON.stringify(storedText(normalizeTag(tag.name)));
        if (this.cache.size < MAX_CACHED_TAGS) this.cache.set(tag.name, stored);
      }
      text += text === '' ? stored : `,${stored}`;
    }
    return `[${text}]`;
  }
}
