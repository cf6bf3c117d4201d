import { z } from 'zod';
import { droppedOptionNotes, imageNotes } from './command-line.js';
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
 * (`-e` excepted: it becomes an env entry). Secrets are always taken from the host by name.
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

export function importRegistryServer(server: RegistryServer, name: string, origin: string): ImportOutcome {
  const notes: string[] = [];
  const key = server.name;
  for (const pkg of server.packages ?? []) {
    const transport = pkg.transport?.type ?? 'stdio';
    const what = `${pkg.registryType} package ${pkg.identifier}`;
    if (transport !== 'stdio') {
      notes.push(`${what}: transport ${transport}, not stdio (hintbox runs stdio servers)`);
    } else if (pkg.registryType === 'mcpb') {
      notes.push(
        `${what}: MCP bundles are not supported${pkg.fileSha256 ? ` (its fileSha256 is ${pkg.fileSha256})` : ''}`,
      );
    } else if (pkg.registryType === 'npm' || pkg.registryType === 'pypi' || pkg.registryType === 'oci') {
      const mapped = fromPackage(pkg);
      if (typeof mapped === 'string') notes.push(`${what}: ${mapped}`);
      else {
        const others = notes.length > 0 ? [`Not used: ${notes.join('; ')}.`] : [];
        return { draft: { name, key, origin, ...mapped, notes: [...mapped.notes, ...others] } };
      }
    } else notes.push(`${what}: ${pkg.registryType} packages are not supported`);
  }
  if ((server.remotes ?? []).length > 0 && (server.packages ?? []).length === 0)
    notes.push('it is a remote server only (no package to run)');
  return { skipped: { key, reason: notes.length > 0 ? notes.join('; ') : 'it lists no package' } };
}

type Mapped = Pick<ProfileDraft, 'runs' | 'server' | 'mounts' | 'env' | 'notes' | 'hostVariables' | 'clientEnv'>;

/** What a registry value becomes in the profile; where a variable of the host stands for it. */
interface Resolved {
  text: string;
  hostVariable?: string;
}

/** `MY_VAR` from `my-var`, `--api-key` or `target_dir`. */
function variableName(raw: string): string {
  const name = raw
    .replace(/^-+/, '')
    .replace(/[^A-Za-z0-9]+/g, '_')
    .toUpperCase();
  return /^[A-Z_]/.test(name) ? name : `ARG_${name}`;
}

/**
 * A registry input as profile text: its fixed value, else its default, else a host variable.
 * A default is written as is, or (`overridable`: an env value, whose name is the server's own,
 * and a host path, whose default is rarely yours) as `${NAME:-default}`. A named argument's
 * default is never made a variable: `--host` would read the shell's HOST.
 */
function resolveInput(
  input: Input & { variables?: Record<string, Input> },
  variable: string,
  overridable = true,
): Resolved | undefined {
  // A secret is never written, not even a default; an optional one is left to the operator.
  if (input.isSecret) return input.isRequired ? { text: `\${${variable}}`, hostVariable: variable } : undefined;
  if (input.value !== undefined) {
    let hostVariable: string | undefined;
    const text = literal(input.value).replace(/\{([A-Za-z0-9_]+)\}/g, (whole, key: string) => {
      const inner = input.variables?.[key];
      if (!inner) return whole;
      const resolved = resolveInput(inner, variableName(key));
      hostVariable ??= resolved?.hostVariable;
      return resolved?.text ?? '';
    });
    return { text, ...(hostVariable ? { hostVariable } : {}) };
  }
  if (input.default !== undefined)
    return { text: overridable ? `\${${variable}:-${literal(input.default)}}` : literal(input.default) };
  if (input.isRequired) return { text: `\${${variable}}`, hostVariable: variable };
  return undefined;
}

function fromPackage(pkg: Package): Mapped | string {
  const notes: string[] = [];
  const hostVariables: string[] = [];
  const mounts: DraftMount[] = [];
  const env: Record<string, string> = {};
  const onHost = pkg.registryType !== 'oci';
  let server: ProfileDraft['server'];
  let runs: string;
  if (pkg.registryType === 'npm') {
    const spec = `${pkg.identifier}@${pkg.version ?? 'latest'}`;
    server = { npm: spec };
    runs = `npm package ${spec}`;
  } else if (pkg.registryType === 'pypi') {
    const spec = pkg.version ? `${pkg.identifier}==${pkg.version}` : pkg.identifier;
    server = { pypi: spec };
    runs = `PyPI package ${spec}`;
  } else {
    // Before 2025-09-29 the tag was a field of its own.
    const tagged =
      /[:@][^/]*$/.test(pkg.identifier) || !pkg.version ? pkg.identifier : `${pkg.identifier}:${pkg.version}`;
    server = { image: tagged };
    runs = `image ${tagged}`;
    notes.push(...imageNotes(tagged));
  }
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
        const resolved = assigned === undefined ? undefined : resolveInput({ ...arg, value: assigned }, variable);
        env[variable] = resolved?.text ?? `\${${variable}}`;
        if (resolved?.hostVariable ?? assigned === undefined) hostVariables.push(resolved?.hostVariable ?? variable);
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
    const variable = variableName(arg.valueHint ?? arg.name ?? 'arg');
    let resolved = resolveInput(arg, variable, arg.format === 'filepath');
    if (resolved === undefined) {
      notes.push(`The optional argument ${label} is not set: add it to server.args if you want it.`);
      continue;
    }
    const isPath = arg.format === 'filepath' || (resolved.hostVariable === undefined && isHostPath(resolved.text));
    if (onHost && isPath) {
      const target = `/data/${variable.toLowerCase()}`;
      // The argument names the mount's target as the sandbox sees it: written once, in the mount.
      const mountName =
        variable
          .toLowerCase()
          .replace(/^[^a-z0-9]+/, '')
          .slice(0, 63) || 'path';
      mounts.push({ name: mountName, source: resolved.text, target, mode: 'rw' });
      const value = `\${sandbox:mount.${mountName}}`;
      notes.push(
        `${label} is a host path: it became a mount at ${target}, and the argument ${value} (that target); ` +
          `set ${variable} to the folder before hintbox loads this profile, and make it mode: ro where the server only reads.`,
      );
      resolved = { text: value };
    } else if (resolved.hostVariable) {
      hostVariables.push(resolved.hostVariable);
      notes.push(`${label} is taken from the host as \${${resolved.hostVariable}}: set it where hintbox runs.`);
    }
    if (arg.type === 'named') args.push(literal(arg.name ?? ''), resolved.text);
    else args.push(resolved.text);
  }
  if (args.length > 0) server.args = args;

  const optional: string[] = [];
  for (const variable of pkg.environmentVariables ?? []) {
    if (!isEnvName(variable.name)) {
      notes.push(`The variable "${literal(variable.name)}" is not a valid name and was left out.`);
      continue;
    }
    const resolved = resolveInput(variable, variable.name);
    if (resolved === undefined) {
      optional.push(variable.name);
      continue;
    }
    env[variable.name] = resolved.text;
    if (resolved.hostVariable) hostVariables.push(resolved.hostVariable);
  }
  const secrets = (pkg.environmentVariables ?? []).filter((v) => v.isSecret).map((v) => v.name);
  if (secrets.length > 0)
    notes.push(`Secrets (${secrets.join(', ')}) are taken from the environment hintbox runs with, never written here.`);
  if (optional.length > 0)
    notes.push(`Optional variables left out (add them to env if you want them): ${optional.join(', ')}.`);
  return { runs, server, mounts, env, notes, hostVariables: [...new Set(hostVariables)], clientEnv: {} };
}
