/**
 * A list of MCP registry entries, as a file the user gives (never fetched): the registry API's
 * answer to `GET /v0/servers` (`{ servers: [{ server, _meta }], metadata }`) or a plain array of
 * `server.json` entries, and the one entry `--server NAME [--version V]` picks from it. Pure.
 *
 * Of several versions of a name, `--version` picks one; else the one the official registry marks
 * latest (`_meta["io.modelcontextprotocol.registry/official"].isLatest`); else the highest
 * version, when every listed version reads as one (`1.2.3`, `v1.2.3-beta.1`); else none (the
 * caller asks for `--version`).
 */

/** Where the official registry keeps its own facts about an entry. */
export const OFFICIAL_META = 'io.modelcontextprotocol.registry/official';

export interface ListedServer {
  /** The `server.json` itself. */
  server: Record<string, unknown> & { name: string };
  version?: string;
  isLatest: boolean;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The entries of a registry list, or undefined when `json` is not one. */
export function registryListOf(json: unknown): ListedServer[] | undefined {
  const items = Array.isArray(json) ? json : isObject(json) && Array.isArray(json.servers) ? json.servers : undefined;
  if (items === undefined || items.length === 0) return undefined;
  const listed: ListedServer[] = [];
  for (const item of items) {
    if (!isObject(item)) return undefined;
    // The API wraps each entry (`{ server, _meta }`); a plain list holds server.json as is.
    const server = isObject(item.server) ? item.server : item;
    if (typeof server.name !== 'string' || server.name === '') return undefined;
    const meta = [item._meta, server._meta].find((m) => isObject(m) && isObject(m[OFFICIAL_META])) as
      Record<string, Record<string, unknown>> | undefined;
    listed.push({
      server: server as ListedServer['server'],
      ...(typeof server.version === 'string' ? { version: server.version } : {}),
      isLatest: meta?.[OFFICIAL_META]?.isLatest === true,
    });
  }
  return listed;
}

/** Thrown when the pick is not in the list; its message is one line. */
export class RegistryPickError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RegistryPickError';
  }
}

/** The entry `name` (and `version`) picks; `file` names the list in messages. */
export function pickListed(
  listed: readonly ListedServer[],
  file: string,
  name: string,
  version?: string,
): ListedServer {
  const named = listed.filter((l) => l.server.name === name);
  if (named.length === 0) {
    const names = [...new Set(listed.map((l) => l.server.name))];
    const close = closeNames(name, names);
    throw new RegistryPickError(
      `${file} lists no server named ${name} (` +
        (close.length > 0 ? `close: ${close.join(', ')}` : `it lists ${names.length}: ${sample(names)}`) +
        '); nothing written',
    );
  }
  const versions = named.map((l) => l.version ?? '(no version)');
  if (version !== undefined) {
    const found = named.find((l) => l.version === version);
    if (!found) {
      throw new RegistryPickError(
        `${file} lists no version ${version} of ${name} (listed: ${versions.join(', ')}); nothing written`,
      );
    }
    return found;
  }
  if (named.length === 1) return named[0] as ListedServer;
  const latest = named.find((l) => l.isLatest);
  if (latest) return latest;
  const highest = highestVersion(named);
  if (highest) return highest;
  throw new RegistryPickError(
    `${file} lists ${named.length} versions of ${name} (${versions.join(', ')}) and marks none latest: ` +
      'pick one with --version V; nothing written',
  );
}

/** The names of a list, for a message: the first few. */
export function sample(names: readonly string[], most = 5): string {
  return names.length > most ? `${names.slice(0, most).join(', ')}, …` : names.join(', ');
}

/** Listed names near `name`: a small edit distance, or the same last part (`…/filesystem`). */
function closeNames(name: string, names: readonly string[]): string[] {
  const tail = (n: string): string => n.split('/').pop()?.toLowerCase() ?? n;
  return names
    .map((n) => ({ n, d: editDistance(name.toLowerCase(), n.toLowerCase()) }))
    .filter(
      ({ n, d }) =>
        d <= Math.max(2, Math.floor(name.length / 5)) ||
        tail(n) === tail(name) ||
        n.toLowerCase().includes(name.toLowerCase()),
    )
    .sort((a, b) => a.d - b.d)
    .slice(0, 3)
    .map(({ n }) => n);
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(
        (previous[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = row;
  }
  return previous[b.length] as number;
}

interface Version {
  release: number[];
  pre: string[];
}

/** `1.2.3`, `v1.2`, `1.0.0-beta.2` (`+build` ignored); anything else is not read. */
function parseVersion(text: string): Version | undefined {
  const match = /^v?(\d+(?:\.\d+)*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$/.exec(text);
  if (!match) return undefined;
  return { release: (match[1] as string).split('.').map(Number), pre: match[2] ? match[2].split('.') : [] };
}

function compareVersions(a: Version, b: Version): number {
  for (let i = 0; i < Math.max(a.release.length, b.release.length); i++) {
    const d = (a.release[i] ?? 0) - (b.release[i] ?? 0);
    if (d !== 0) return d;
  }
  // A pre-release comes before its release.
  if (a.pre.length === 0 || b.pre.length === 0) return b.pre.length - a.pre.length;
  for (let i = 0; i < Math.max(a.pre.length, b.pre.length); i++) {
    const [x, y] = [a.pre[i], b.pre[i]];
    if (x === undefined || y === undefined) return x === undefined ? -1 : 1;
    if (x === y) continue;
    const numeric = /^\d+$/.test(x) && /^\d+$/.test(y);
    return numeric ? Number(x) - Number(y) : x < y ? -1 : 1;
  }
  return 0;
}

/** The entry of the highest version, when every one reads as a version. */
function highestVersion(named: readonly ListedServer[]): ListedServer | undefined {
  const parsed = named.map((l) => ({ l, v: l.version === undefined ? undefined : parseVersion(l.version) }));
  if (parsed.some((p) => p.v === undefined)) return undefined;
  return parsed.reduce((best, p) => (compareVersions(p.v as Version, best.v as Version) > 0 ? p : best)).l;
}
