import { namedHosts } from './named-hosts.js';
import { z } from 'zod';
import { renderServerText } from '../util/render-server-text.js';
import { NPM_NAME, PLAIN_VERSION, PYPI_NAME } from '../packages/package-source.js';
import { droppedOptionNotes, IMAGE_TAG, imageNotes, isImageReference } from './command-line.js';
import {
  isEnvName,
  isHostPath,
  literal,
  type DraftMount,
  type ImportOutcome,
  type ProfileDraft,
} from './profile-draft.js';

/**
 * An entry of the official MCP registry (`server.json`, schema 2025-09-29 and later: camelCase
 * fields, `transport`, OCI references in `identifier`) as a profile draft. Pure.
 *
 * The first package that hintbox can run is used: `npm` → `server.npm`, `pypi` → `server.pypi`,
 * `oci` → `server.image` (a digest in the reference is kept). `mcpb` bundles and `nuget` are not
 * supported; packages whose transport is not `stdio` are skipped. `runtimeArguments` are the
 * publisher's options for docker or npx and are never trusted: dropped, each named in the header
 * (`-e` excepted: it becomes an env entry).
 *
 * What the publisher wrote never chooses a host path or a host variable: a path argument becomes
 * a mount whose source is a variable hintbox names (`HINTBOX_<PROFILE>_<ARG>`), its value or
 * default shown in the header as text; a secret or a required value is read from a variable
 * hintbox names too, never from one the entry names (`{HOME}`, `GITHUB_TOKEN`). The header
 * lists exactly the variables the profile reads.
 *
 * The package run is named only by a plain package name and version, or an image reference: an
 * entry whose package says anything else (`foo@${GITHUB_TOKEN}`, `x:${HOME}`) is refused whole
 * (RegistryEntryError), never passed over for its next package.
 */

const InputSchema = z.looseObject({
  value: z.string().optional(),
  default: z.string().optional(),
  format: z.string().optional(),
  isRequired: z.boolean().optional(),
  isSecret: z.boolean().optional(),
  description: z.string().optional(),
});
type Input = z.infer<typeof InputSchema>;
const ArgumentSchema = InputSchema.extend({
  type: z.enum(['positional', 'named']),
  name: z.string().optional(),
  valueHint: z.string().optional(),
  variables: z.record(z.string(), InputSchema).optional(),
});
const EnvironmentVariableSchema = InputSchema.extend({
  name: z.string(),
  variables: z.record(z.string(), InputSchema).optional(),
});
const PackageSchema = z.looseObject({
  registryType: z.string(),
  identifier: z.string().min(1),
  version: z.string().optional(),
  fileSha256: z.string().optional(),
  runtimeHint: z.string().optional(),
  transport: z.looseObject({ type: z.string() }).optional(),
  runtimeArguments: z.array(ArgumentSchema).optional(),
  packageArguments: z.array(ArgumentSchema).optional(),
  environmentVariables: z.array(EnvironmentVariableSchema).optional(),
});
type Package = z.infer<typeof PackageSchema>;
export const RegistryServerSchema = z.looseObject({
  name: z.string().min(1),
  description: z.string().optional(),
  version: z.string().optional(),
  packages: z.array(PackageSchema).optional(),
  remotes: z.array(z.unknown()).optional(),
});
export type RegistryServer = z.infer<typeof RegistryServerSchema>;

/** An entry that is refused, not skipped: its message names the field (`packages[0].identifier`), one line. */
export class RegistryEntryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RegistryEntryError';
  }
}

/** Does this JSON look like a registry entry (not a client config)? Also the API's `{ server: … }` wrapper. */
export function registryServerOf(json: unknown): unknown {
  const obj = json as Record<string, unknown> | null;
  if (obj && typeof obj === 'object' && obj.server && typeof obj.server === 'object' && 'name' in obj.server)
    return obj.server;
  return obj &&
    typeof obj === 'object' &&
    typeof obj.name === 'string' &&
    ('packages' in obj || 'remotes' in obj || '$schema' in obj)
    ? obj
    : undefined;
}

/** `reserved`: names a variable hintbox makes must not take (hintbox's own, from the CLI). */
export function importRegistryServer(
  server: RegistryServer,
  name: string,
  origin: string,
  reserved: ReadonlySet<string> = new Set(),
): ImportOutcome {
  const notes: string[] = [];
  const key = server.name;
  for (const [index, pkg] of (server.packages ?? []).entries()) {
    const transport = pkg.transport?.type ?? 'stdio';
    const what = `${pkg.registryType} package ${pkg.identifier}`;
    if (transport !== 'stdio') {
      notes.push(`${what}: transport ${transport}, not stdio (hintbox runs stdio servers)`);
    } else if (pkg.registryType === 'mcpb') {
      notes.push(
        `${what}: MCP bundles are not supported${pkg.fileSha256 ? ` (its fileSha256 is ${pkg.fileSha256})` : ''}`,
      );
    } else if (pkg.registryType === 'npm' || pkg.registryType === 'pypi' || pkg.registryType === 'oci') {
      const mapped = fromPackage(pkg, name, reserved, `packages[${index}]`);
      if (typeof mapped === 'string') notes.push(`${what}: ${mapped}`);
      else {
        const others = notes.length > 0 ? [`Not used: ${notes.join('; ')}.`] : [];
        const allowHosts = hostsOfEntry(server, pkg);
        const draft = { name, key, origin, ...mapped, notes: [...mapped.notes, ...others] };
        return { draft: allowHosts.length ? { ...draft, allowHosts } : draft };
      }
    } else notes.push(`${what}: ${pkg.registryType} packages are not supported`);
  }
  if ((server.remotes ?? []).length > 0 && (server.packages ?? []).length === 0)
    notes.push('it is a remote server only (no package to run)');
  return { skipped: { key, reason: notes.length > 0 ? notes.join('; ') : 'it lists no package' } };
}

type Mapped = Pick<
  ProfileDraft,
  'runs' | 'server' | 'mounts' | 'env' | 'notes' | 'hostVariables' | 'variableUses' | 'clientEnv'
>;

/** What a registry value becomes in the profile, and the host variables (hintbox's names) it reads. */
interface Resolved {
  text: string;
  variables: string[];
}

/** `MY_VAR` from `my-var`, `--api-key` or `target_dir`; never empty. */
function upperName(raw: string): string {
  return (
    raw
      .toUpperCase()
      .replace(/[^A-Z0-9]+/g, '_')
      .replace(/^_+|_+$/g, '') || 'VALUE'
  );
}

/**
 * The host variables of one imported entry, named by hintbox, never by the publisher:
 * `HINTBOX_<PROFILE>_<WHAT>` in [A-Z0-9_], each name once (`_2`, `_3` after), never one of
 * `reserved` (hintbox's own). `uses` says what each is for (the profile's header lists them).
 */
function hostVariableNames(
  profile: string,
  reserved: ReadonlySet<string>,
): {
  take: Take;
  uses: Record<string, string>;
} {
  const prefix = `HINTBOX_${upperName(profile)}_`;
  const uses: Record<string, string> = {};
  const take: Take = (stem, use) => {
    const base = prefix + upperName(stem);
    let name = base;
    for (let n = 2; name in uses || reserved.has(name); n++) name = `${base}_${n}`;
    const own = name.slice(prefix.length);
    uses[name] = typeof use === 'string' ? use : use(own);
    return name;
  };
  return { take, uses };
}

/**
 * A fresh variable for `stem`; `use` says what it is for, given the variable's own part (`DIR_2`
 * of `HINTBOX_X_DIR_2`), unique among this entry's variables like the name itself.
 */
type Take = (stem: string, use: string | ((own: string) => string)) => string;

/** A path argument's mount name, from its variable's own part (`DIR_2` → `dir_2`): unique as the variable is. */
const mountNameOf = (own: string): string => own.toLowerCase();

/**
 * A registry input as profile text: its fixed value (each `{placeholder}` resolved the same way),
 * else its default as written, else (required) a host variable named by hintbox; undefined when
 * it is optional and has neither. A secret is never written, not even a default: a required one
 * is a host variable, an optional one is left to the operator.
 */
function resolveInput(
  input: Input & { variables?: Record<string, Input> },
  stem: string,
  use: string,
  take: Take,
): Resolved | undefined {
  const fromHost = (what: string): Resolved => {
    const name = take(stem, what);
    return { text: `\${${name}}`, variables: [name] };
  };
  if (input.isSecret) return input.isRequired ? fromHost(`the secret ${use}`) : undefined;
  if (input.value !== undefined) {
    const variables: string[] = [];
    const text = literal(input.value).replace(/\{([A-Za-z0-9_]+)\}/g, (whole, key: string) => {
      const inner = input.variables?.[key];
      if (!inner) return whole;
      const resolved = resolveInput(inner, key, `{${key}} of ${use}`, take);
      variables.push(...(resolved?.variables ?? []));
      return resolved?.text ?? '';
    });
    return { text, variables };
  }
  if (input.default !== undefined) return { text: literal(input.default), variables: [] };
  if (input.isRequired) return fromHost(use);
  return undefined;
}

/** Does the publisher's text for an argument name a host path (`/x`, `~/x`, `{HOME}/x`)? */
function looksLikeHostPath(text: string | undefined): boolean {
  return text !== undefined && (isHostPath(text) || /^~(\/|$)/.test(text) || /^\{[A-Za-z0-9_]+\}\//.test(text));
}

/** The publisher's word on a path, quoted for the header: text to read, never a path hintbox uses. */
function suggested(arg: Input): string {
  const text = arg.value ?? arg.default;
  return text === undefined
    ? ''
    : ` The entry suggests ${renderServerText(JSON.stringify(text))}: never used as a path.`;
}

/**
 * What the profile runs: a package name and version, or an image reference, each checked against
 * its grammar (no `${`, no space, no newline can pass) and written as a literal. Throws
 * RegistryEntryError naming the field (`at`) otherwise.
 */
function packageServer(pkg: Package, at: string): { server: ProfileDraft['server']; runs: string; notes: string[] } {
  const refuse = (field: 'identifier' | 'version', what: string): never => {
    const value = renderServerText(JSON.stringify(pkg[field]));
    throw new RegistryEntryError(`${at}.${field} ${value} is not ${what}`);
  };
  if (pkg.version !== undefined && pkg.registryType !== 'oci' && !PLAIN_VERSION.test(pkg.version))
    refuse('version', 'a plain version (such as 1.2.3)');
  if (pkg.registryType === 'npm') {
    if (!NPM_NAME.test(pkg.identifier)) refuse('identifier', 'an npm package name (such as @scope/name)');
    const spec = `${pkg.identifier}@${pkg.version ?? 'latest'}`;
    return { server: { npm: literal(spec) }, runs: `npm package ${spec}`, notes: [] };
  }
  if (pkg.registryType === 'pypi') {
    if (!PYPI_NAME.test(pkg.identifier)) refuse('identifier', 'a PyPI package name (such as mcp-server-fetch)');
    const spec = pkg.version ? `${pkg.identifier}==${pkg.version}` : pkg.identifier;
    return { server: { pypi: literal(spec) }, runs: `PyPI package ${spec}`, notes: [] };
  }
  if (!isImageReference(pkg.identifier)) refuse('identifier', 'an image reference (such as ghcr.io/org/name:1.0)');
  // Before 2025-09-29 the tag was a field of its own.
  const untagged = !/[:@][^/]*$/.test(pkg.identifier) && pkg.version !== undefined;
  if (untagged && !IMAGE_TAG.test(pkg.version ?? '')) refuse('version', 'an image tag (such as 1.0)');
  const tagged = untagged ? `${pkg.identifier}:${pkg.version}` : pkg.identifier;
  return { server: { image: literal(tagged) }, runs: `image ${tagged}`, notes: imageNotes(tagged) };
}

function fromPackage(pkg: Package, profile: string, reserved: ReadonlySet<string>, at: string): Mapped | string {
  const hostVariables: string[] = [];
  const mounts: DraftMount[] = [];
  const env: Record<string, string> = {};
  const onHost = pkg.registryType !== 'oci';
  const { take, uses } = hostVariableNames(profile, reserved);
  const { server, runs, notes } = packageServer(pkg, at);
  if (!pkg.version && pkg.registryType !== 'oci')
    notes.push('The registry gives no version: the package lock written beside this profile pins what it resolves to.');
  if (pkg.fileSha256) notes.push(`The registry gives fileSha256 ${pkg.fileSha256} for it.`);

  // Runtime arguments configure docker or npx: the publisher's, not the operator's.
  const dropped: string[] = [];
  for (const arg of pkg.runtimeArguments ?? []) {
    const flag = arg.type === 'named' ? (arg.name ?? '') : (arg.value ?? arg.valueHint ?? '');
    const value = arg.value ?? arg.default;
    if (!onHost && (flag === '-e' || flag === '--env') && value) {
      const [variable, assigned] = value.split(/=(.*)/s) as [string, string | undefined];
      if (isEnvName(variable)) {
        const use = `the server's ${variable}`;
        const resolved =
          assigned === undefined
            ? resolveInput({ isRequired: true, ...(arg.isSecret ? { isSecret: true } : {}) }, variable, use, take)
            : resolveInput({ ...arg, value: assigned }, variable, use, take);
        if (resolved === undefined)
          notes.push(`The optional secret ${variable} is left out: add it to env if you want it.`);
        else {
          env[variable] = resolved.text;
          hostVariables.push(...resolved.variables);
        }
        continue;
      }
    }
    dropped.push(value !== undefined && arg.type === 'named' ? `${flag} ${literal(value)}` : literal(flag));
  }
  notes.push(
    ...droppedOptionNotes(dropped, onHost ? `Runtime options (${pkg.runtimeHint ?? 'npx or uvx'})` : 'Docker options'),
  );

  const args: string[] = [];
  for (const arg of pkg.packageArguments ?? []) {
    const label = arg.type === 'named' ? (arg.name ?? '') : (arg.valueHint ?? 'argument');
    const stem = upperName(arg.valueHint ?? arg.name ?? 'arg');
    const isPath = arg.format === 'filepath' || looksLikeHostPath(arg.value) || looksLikeHostPath(arg.default);
    let text: string;
    if (onHost && isPath) {
      // A host path is the operator's to choose: a mount from a variable hintbox names, never
      // the publisher's value or default (a path, or a placeholder the host would fill in).
      if (!arg.isRequired && arg.value === undefined && arg.default === undefined) {
        notes.push(
          `The optional argument ${label} (a host path) is not set: add a mount and the argument if you want it.`,
        );
        continue;
      }
      // Named after the variable, not the stem: two arguments of one valueHint (DIR, DIR_2) get
      // a mount each. 56 leaves room for a _N within a mount name's 63 characters.
      let mountName = '';
      const variable = take(stem.slice(0, 56), (own) => {
        mountName = mountNameOf(own);
        return `the host path for ${label}, mounted read-only at /data/${mountName}`;
      });
      const target = `/data/${mountName}`;
      hostVariables.push(variable);
      mounts.push({ name: mountName, source: `\${${variable}}`, target, mode: 'ro', variable });
      notes.push(
        `${label} is a host path: the one you set in ${variable} is mounted at ${target}, read-only (make it ` +
          `mode: rw only if the server must write there), and the server is given that target.${suggested(arg)}`,
      );
      // The argument names the mount's target as the sandbox sees it: written once, in the mount.
      text = `\${sandbox:mount.${mountName}}`;
    } else {
      const resolved = resolveInput(arg, stem, label, take);
      if (resolved === undefined) {
        notes.push(`The optional argument ${label} is not set: add it to server.args if you want it.`);
        continue;
      }
      hostVariables.push(...resolved.variables);
      text = resolved.text;
    }
    if (arg.type === 'named') args.push(literal(arg.name ?? ''), text);
    else args.push(text);
  }
  if (args.length > 0) server.args = args;

  const optional: string[] = [];
  for (const variable of pkg.environmentVariables ?? []) {
    if (!isEnvName(variable.name)) {
      notes.push(`The variable "${literal(variable.name)}" is not a valid name and was left out.`);
      continue;
    }
    const resolved = resolveInput(variable, variable.name, `the server's ${variable.name}`, take);
    if (resolved === undefined) {
      optional.push(variable.name);
      continue;
    }
    env[variable.name] = resolved.text;
    hostVariables.push(...resolved.variables);
  }
  if (optional.length > 0)
    notes.push(`Optional variables left out (add them to env if you want them): ${optional.join(', ')}.`);
  const read = [...new Set(hostVariables)];
  const variableUses = Object.fromEntries(read.map((name) => [name, uses[name] ?? '']));
  return { runs, server, mounts, env, notes, hostVariables: read, variableUses, clientEnv: {} };
}

/** The hosts a registry entry names for its package: its remotes, and its arguments' and variables' values and defaults. */
function hostsOfEntry(server: RegistryServer, pkg: Package): string[] {
  const remotes = (server.remotes ?? []).map((r) => (r as { url?: unknown } | null)?.url);
  const given = [...(pkg.packageArguments ?? []), ...(pkg.runtimeArguments ?? []), ...(pkg.environmentVariables ?? [])];
  return namedHosts([
    ...remotes,
    ...given.flatMap((g) => [(g as { value?: unknown }).value, (g as { default?: unknown }).default]),
  ]);
}
