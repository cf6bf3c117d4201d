import { MOUNT_NAME, normalizeContainerPath } from './profile-schema.js';

/**
 * Sandbox-side values: `${sandbox:NAME}` in a profile's `server.args` and `env` stands for a
 * value hintbox gives the sandbox (its database role's URL, socket folder, …, or a mount's
 * target: `${sandbox:mount.<name>}` for the mount with `name: <name>`). It is never looked up in
 * the host's environment: profile loading leaves it as written, and it is filled in when the
 * sandbox's container spec is built, from that sandbox's own values. Pure.
 */

/** The names hintbox sets in a sandbox with a database (see `sandboxDatabaseEnv`). */
export const SANDBOX_VALUE_NAMES = ['DATABASE_URL', 'PGHOST', 'PGPORT', 'PGUSER', 'PGPASSWORD', 'PGDATABASE'] as const;
export type SandboxValueName = (typeof SANDBOX_VALUE_NAMES)[number];

/** What `${…}` holds for a sandbox value: `sandbox:NAME`. */
export const SANDBOX_PREFIX = 'sandbox:';
const REFERENCE = /\$\{sandbox:([^}]*)\}/g;
/** Where a reference starts; a profile string holds it only as a reference (see interpolate.ts). */
export const SANDBOX_OPENER = '${' + SANDBOX_PREFIX;

export function isSandboxValueName(name: string): name is SandboxValueName {
  return (SANDBOX_VALUE_NAMES as readonly string[]).includes(name);
}

/** What `${sandbox:…}` holds for a mount's target: `mount.<name>`. */
export const MOUNT_VALUE_PREFIX = 'mount.';

/** The mount name of a `mount.<name>` reference, else undefined. */
export function mountValueName(name: string): string | undefined {
  if (!name.startsWith(MOUNT_VALUE_PREFIX)) return undefined;
  const mount = name.slice(MOUNT_VALUE_PREFIX.length);
  return MOUNT_NAME.test(mount) ? mount : undefined;
}

/** A name `${sandbox:NAME}` may hold: a database value, or `mount.<name>`. */
export function isSandboxReference(name: string): boolean {
  return isSandboxValueName(name) || mountValueName(name) !== undefined;
}

/** The sandbox values of named mounts: `mount.<name>` → its target (normalized, as it is mounted). */
export function mountValues(
  mounts: readonly { name?: string | undefined; target: string }[] | undefined,
): Record<string, string> {
  return Object.fromEntries(
    (mounts ?? []).flatMap((m) =>
      m.name === undefined ? [] : [[`${MOUNT_VALUE_PREFIX}${m.name}`, normalizeContainerPath(m.target)]],
    ),
  );
}

/** The names a loaded profile string refers to, in order. */
export function sandboxReferences(value: string): string[] {
  return [...value.matchAll(REFERENCE)].map((m) => m[1] ?? '');
}

/** Where `${sandbox:NAME}` may be written in a profile: each of `server.args`, each `env` value. */
export function isSandboxValueField(path: readonly (string | number)[]): boolean {
  const [first, second, third] = path;
  if (first === 'env') return path.length === 2 && typeof second === 'string';
  return first === 'server' && second === 'args' && path.length === 3 && typeof third === 'number';
}

/** Every reference in a loaded profile's `server.args` and `env`, with its field path. */
export function sandboxValueUses(
  args: readonly string[],
  env: Readonly<Record<string, string>>,
): { path: (string | number)[]; name: string }[] {
  const fields: [(string | number)[], string][] = [
    ...args.map((arg, i): [(string | number)[], string] => [['server', 'args', i], arg]),
    ...Object.entries(env).map(([key, value]): [(string | number)[], string] => [['env', key], value]),
  ];
  return fields.flatMap(([path, value]) => sandboxReferences(value).map((name) => ({ path, name })));
}

/**
 * Fills in every `${sandbox:NAME}` from the sandbox's values. Throws (one line, naming `where`)
 * when the sandbox has no such value: a string is never passed on with a reference left in it.
 */
export function substituteSandboxValues(
  value: string,
  values: Readonly<Record<string, string>> | undefined,
  where: string,
): string {
  return value.replace(REFERENCE, (_, name: string) => {
    const found = values?.[name];
    if (found === undefined || !isSandboxReference(name)) {
      const needs = mountValueName(name) !== undefined ? 'a mount of that name' : 'a database section';
      throw new Error(`${where}: \${sandbox:${name}} has no value in this sandbox (it needs ${needs})`);
    }
    return found;
  });
}
