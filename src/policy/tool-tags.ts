/**
 * Tool tags: labels for choosing which tools a session exposes (`hintbox run --tags k8s,helm`),
 * shown in confirmations and recorded with every call. The operator's tags come from the
 * profile; a server may claim tags in a tool's `_meta`, and those stay marked as its claim.
 * Pure: no I/O.
 */

/** Where a tag came from: the operator's profile (trusted) or the server's `_meta` (a claim). */
export type TagSource = 'profile' | 'server';

/** A tag, lower-case, with its source. */
export interface ToolTag {
  name: string;
  source: TagSource;
}

/**
 * What a server-claimed tag must look like (after trimming and lower-casing): a letter or
 * digit, then up to 62 of letters, digits, `.`, `_`, `-`, `:` and `/`. The limit keeps a
 * server from putting text of its choosing (newlines, escape sequences, a fake "approved")
 * into a confirmation through a tag.
 */
export const SERVER_TAG_PATTERN = /^[a-z0-9][a-z0-9._:/-]{0,62}$/;

/** At most this many tags are taken from a tool's `_meta`; the rest are ignored. */
export const MAX_SERVER_TAGS = 16;

/**
 * The `_meta` paths read for server-claimed tags, each expected to be an array of strings:
 * `_meta.tags` (hintbox's convention), and FastMCP's `_meta.fastmcp.tags` and legacy
 * `_meta._fastmcp.tags` (FastMCP servers publish their `tags=` there).
 */
export const META_TAG_PATHS: readonly (readonly string[])[] = [['tags'], ['fastmcp', 'tags'], ['_fastmcp', 'tags']];

/** Tags compare case-insensitively; surrounding white space is not part of a tag. */
export function normalizeTag(tag: string): string {
  return tag.trim().toLowerCase();
}

function at(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const key of path) {
    if (current === null || typeof current !== 'object' || Array.isArray(current)) return undefined;
    current = Object.hasOwn(current, key) ? (current as Record<string, unknown>)[key] : undefined;
  }
  return current;
}

/**
 * The tags a server claims in a tool's `_meta`. Lenient: a `_meta` that is not an object, a
 * value that is not an array, entries that are not strings or do not match
 * {@link SERVER_TAG_PATTERN} are ignored, never an error. Duplicates are dropped; at most
 * {@link MAX_SERVER_TAGS} are kept.
 */
export function serverClaimedTags(meta: unknown): string[] {
  const out = new Set<string>();
  for (const path of META_TAG_PATHS) {
    const value = at(meta, path);
    if (!Array.isArray(value)) continue;
    for (const entry of value as unknown[]) {
      if (typeof entry !== 'string') continue;
      const tag = normalizeTag(entry);
      if (SERVER_TAG_PATTERN.test(tag)) out.add(tag);
      if (out.size >= MAX_SERVER_TAGS) return [...out];
    }
  }
  return [...out];
}

/** The inputs of {@link toolTags}. */
export interface ToolTagSources {
  /** The profile's `tags`: every tool of the server. Default none. */
  serverTags?: readonly string[];
  /** The profile's `tools.<name>.tags`. Default none. */
  toolTags?: readonly string[];
  /** The tool's `_meta` as the server listed it. Default none. */
  meta?: unknown;
}

/**
 * All tags of a tool: the profile's (server-level, then per tool) and the server's claims, in
 * that order, without duplicates. A tag that both the profile and the server name is the
 * profile's: the operator vouched for it.
 */
export function toolTags(sources: ToolTagSources): ToolTag[] {
  const tags = new Map<string, TagSource>();
  for (const raw of [...(sources.serverTags ?? []), ...(sources.toolTags ?? [])]) {
    const tag = normalizeTag(raw);
    if (tag !== '' && !tags.has(tag)) tags.set(tag, 'profile');
  }
  for (const tag of serverClaimedTags(sources.meta)) {
    if (!tags.has(tag)) tags.set(tag, 'server');
  }
  return [...tags].map(([name, source]) => ({ name, source }));
}

/** Thrown for a `--tags` value that names no tag. */
export class TagFilterError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TagFilterError';
  }
}

/** Parses `--tags k8s,helm` into normalized tag names. Throws {@link TagFilterError} when it names none. */
export function parseTagFilter(text: string): string[] {
  const tags = [...new Set(text.split(',').map(normalizeTag))].filter((t) => t !== '');
  if (tags.length === 0) throw new TagFilterError(`--tags: expected tag names separated by commas, got '${text}'`);
  return tags;
}

/** Options of {@link matchesTagFilter}. */
export interface TagFilterOptions {
  /**
   * Whether tags the server claims count. Pass `trust === 'trusted'`: an untrusted server must
   * not get a tool into a filtered session by tagging it (its claims add friction, never remove
   * it). The claims are shown either way.
   */
  countServerClaims: boolean;
}

/**
 * Does a tool pass the `--tags` filter? True when it has *any* of the wanted tags (so
 * `--tags k8s,helm` exposes the k8s tools and the helm tools). An empty filter passes all.
 */
export function matchesTagFilter(
  tags: readonly ToolTag[],
  wanted: readonly string[],
  options: TagFilterOptions,
): boolean {
  if (wanted.length === 0) return true;
  const want = new Set(wanted.map(normalizeTag));
  return tags.some((t) => (t.source === 'profile' || options.countServerClaims) && want.has(t.name));
}

/** `k8s, helm, fs (server's claim)`: for confirmations and logs. */
export function formatTags(tags: readonly ToolTag[]): string {
  return tags.map((t) => (t.source === 'server' ? `${t.name} (server's claim)` : t.name)).join(', ');
}
