import path from 'node:path';

/**
 * A server given as a package (`server.npm`, `server.pypi`) instead of an image: what hintbox
 * builds, the image name it tags, and where the package lock lies beside the profile. Pure.
 */

export type PackageKind = 'npm' | 'pypi';

export interface PackageSource {
  kind: PackageKind;
  /** The package's name as its registry spells it (`@scope/name`, `mcp-server-fetch`). */
  name: string;
  /** What the profile asks for after the name: `1.2.3`, `^1`, `latest` (npm); `==1.2.3` (PyPI); '' for any. */
  version: string;
  /** The profile's text, as written. */
  spec: string;
}

/** An npm package name, scoped or not: `@scope/name`, `mcp-server`. */
const NPM_NAME_SOURCE = '(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*';
export const NPM_NAME = new RegExp(`^${NPM_NAME_SOURCE}$`);
/** `name@version` of an npm package, scoped or not (a range or tag is pinned by the package lock). */
export const NPM_SPEC = new RegExp(`^${NPM_NAME_SOURCE}(@[^\\s@]+)?$`);
/** A PyPI package name, extras allowed: `mcp-server-fetch`, `name[extra]`. */
const PYPI_NAME_SOURCE = '[A-Za-z0-9][A-Za-z0-9._-]*(\\[[A-Za-z0-9._,-]+\\])?';
export const PYPI_NAME = new RegExp(`^${PYPI_NAME_SOURCE}$`);
/** A PyPI requirement: a name, optionally `==`, `>=`… versions (pinned by the package lock). */
export const PYPI_SPEC = new RegExp(`^${PYPI_NAME_SOURCE}\\s*((===?|~=|!=|<=?|>=?)\\s*[A-Za-z0-9.*+!_-]+\\s*,?\\s*)*$`);
/** One exact version, as a registry entry gives it (`1.2.3-beta.1+build`, PEP 440's `2!1.0.post1`): no range, no `$`. */
export const PLAIN_VERSION = /^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,127}$/;

/** The package a profile's server section names, if any. */
export function packageSource(server: {
  npm?: string | undefined;
  pypi?: string | undefined;
}): PackageSource | undefined {
  if (server.npm !== undefined) return parseNpmSpec(server.npm);
  if (server.pypi !== undefined) return parsePypiSpec(server.pypi);
  return undefined;
}

/** `@scope/name@1.2.3` → name `@scope/name`, version `1.2.3`; no version: `latest`. */
export function parseNpmSpec(spec: string): PackageSource {
  const at = spec.indexOf('@', 1);
  const name = at === -1 ? spec : spec.slice(0, at);
  const version = at === -1 ? 'latest' : spec.slice(at + 1);
  return { kind: 'npm', name, version, spec };
}

/** `mcp-server-fetch==1.2` → name `mcp-server-fetch`, version `==1.2`; extras stay with the name. */
export function parsePypiSpec(spec: string): PackageSource {
  const match = /^([A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?)\s*(.*)$/.exec(spec.trim());
  return { kind: 'pypi', name: match?.[1] ?? spec, version: (match?.[2] ?? '').replace(/\s+/g, ''), spec };
}

/** PEP 503's normal form of a PyPI name (`Mcp_Server.Fetch` → `mcp-server-fetch`), extras dropped. */
export function normalizePypiName(name: string): string {
  return name
    .replace(/\[.*$/, '')
    .toLowerCase()
    .replace(/[-_.]+/g, '-');
}

/**
 * The image hintbox tags for a package: `hintbox/npm.scope.name:1.2.3`. A tag is at most 128
 * of `[A-Za-z0-9_.-]`; a range or a missing version gives a tag that says so (`latest`, `any`).
 */
export function packageImageName(source: PackageSource): string {
  const bare = source.kind === 'pypi' ? normalizePypiName(source.name) : source.name;
  const repo = bare
    .replace(/^@/, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '.')
    .replace(/^\.+|\.+$/g, '');
  const version = source.version.replace(/^==/, '');
  const tag = (version || 'any').replace(/[^A-Za-z0-9_.-]+/g, '_').slice(0, 128);
  return `hintbox/${source.kind}.${repo}:${/^[A-Za-z0-9_]/.test(tag) ? tag : `v${tag}`.slice(0, 128)}`;
}

/** `profiles/memory.yaml` → `profiles/memory.npm-lock.json` (npm) or `profiles/memory.pip-lock.txt` (PyPI). */
export function packageLockPath(profileFile: string, kind: PackageKind): string {
  const dir = path.dirname(profileFile);
  const base = path.basename(profileFile).replace(/\.(ya?ml|json)$/i, '');
  return path.join(dir, kind === 'npm' ? `${base}.npm-lock.json` : `${base}.pip-lock.txt`);
}
