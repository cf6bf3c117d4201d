import path from 'node:path';
import { stringify } from 'yaml';
import { renderServerText } from '../util/render-server-text.js';

/**
 * What `hintbox import` makes of one server: a draft of its profile, and the text of that
 * profile. Pure: the mapping that fills it (from a client config's command line or a registry
 * `server.json`) lives beside it, and the CLI validates the text through the real loader.
 *
 * A draft is the operator's starting point, never a grant: `trust: untrusted`, `network: none`,
 * every environment variable taken from the host by name, and a header that says what to
 * review. Every string that came from the source is escaped (`$` → `$$`) so that the loader's
 * `${VAR}` interpolation never reads into it.
 */

/** A bind mount the import proposes, for a host path the server was given. */
export interface DraftMount {
  /** Its name, when an argument gives the server its target as `${sandbox:mount.<name>}`. */
  name?: string;
  source: string;
  target: string;
  mode: 'ro' | 'rw';
  /**
   * The host variable its source is (`${NAME}`: a registry import's path argument): the import
   * checks the draft without it when it is unset, since no stand-in is a real path.
   */
  variable?: string;
}

/** The profile's `server` section as the import writes it. */
export interface DraftServer {
  npm?: string;
  pypi?: string;
  bin?: string;
  image?: string;
  command?: string[];
  args?: string[];
  workdir?: string;
}

export interface ProfileDraft {
  /** The profile's name (and file name: `<name>.yaml`). */
  name: string;
  /** The server's key in the source (a client config's entry name, a registry server's name). */
  key: string;
  /** Where it came from, one line: `claude_desktop_config.json, mcpServers.memory`. */
  origin: string;
  /** What it runs, one line for the header. */
  runs: string;
  server: DraftServer;
  mounts: DraftMount[];
  /** Profile text values (`${NAME}`, escaped literals). */
  env: Record<string, string>;
  /** Review notes for the header, one sentence each: what was dropped, what to set, what to check. */
  notes: string[];
  /**
   * Every variable the profile reads from the host when it is loaded (`${NAME}`): env values,
   * arguments moved out of the profile, a registry entry's mount sources. The header lists
   * exactly these (renderProfile checks them against the text). The import validates with a
   * stand-in for those that are unset now, mount sources excepted.
   */
  hostVariables: string[];
  /** What each host variable is for, where the import knows it (a registry entry's: its own names). */
  variableUses?: Record<string, string>;
  /**
   * Environment the rewritten client entry must add for the profile's variables: values the
   * source had in its arguments (`docker -e NAME=value`, a `--token` value), which stay in the
   * client config and out of the profile.
   */
  clientEnv: Record<string, string>;
  /** The hosts its entry says it reaches (named-hosts.ts): proposed as `network.allow`; none: `network: none`. */
  allowHosts?: string[];
}

/** A server the import does not write a profile for, and why. */
export interface SkippedServer {
  key: string;
  reason: string;
}

export type ImportOutcome = { draft: ProfileDraft } | { skipped: SkippedServer };

/** The profile name rule (profile-schema.ts), and the name hintbox keeps for itself. */
const PROFILE_NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `GitHub Search` → `github-search`; a name hintbox reserves or nothing usable gets a stand-in. */
export function profileName(key: string): string {
  const base =
    key
      .toLowerCase()
      .replace(/[^a-z0-9_.-]+/g, '-')
      .replace(/^[^a-z0-9]+/, '')
      .slice(0, 63)
      .replace(/[-.]+$/, '') || 'server';
  const name = base === 'hintbox' ? 'hintbox-server' : base;
  return PROFILE_NAME.test(name) ? name : 'server';
}

/** Names unique within one import: the second `memory` becomes `memory-2`. */
export function uniqueNames(names: readonly string[]): string[] {
  const seen = new Set<string>();
  return names.map((name) => {
    let candidate = name;
    for (let n = 2; seen.has(candidate); n++) candidate = `${name.slice(0, 60)}-${n}`;
    seen.add(candidate);
    return candidate;
  });
}

export function isEnvName(name: string): boolean {
  return ENV_NAME.test(name);
}

/** A literal for a profile string: `$` doubled, so interpolation leaves it as written. */
export function literal(text: string): string {
  return text.replace(/\$/g, '$$$$');
}

/** An absolute POSIX host path (not a URL, not `//host/share`). */
export function isHostPath(text: string): boolean {
  return /^\/(?!\/)/.test(text) && !text.includes('\0');
}

/** Words of a flag that make its value a secret: `--api-key`, `--token`, `--github-pat`, `--password` (not `--db-path`). */
const SECRET_WORDS = new Set([
  'token',
  'key',
  'apikey',
  'secret',
  'password',
  'passwd',
  'pat',
  'credential',
  'credentials',
  'auth',
  'authorization',
]);
const isSecretFlag = (flag: string): boolean =>
  /^--?[A-Za-z]/.test(flag) &&
  flag
    .replace(/^-+/, '')
    .toLowerCase()
    .split(/[-_.]+/)
    .some((w) => SECRET_WORDS.has(w));
/** A URL with a password in it: `postgresql://user:pw@host/db`. */
const URL_WITH_PASSWORD = /^[a-z][a-z0-9+.-]*:\/\/[^/@:\s]*:[^/@\s]+@/i;
/** Flags after which a path is plainly read-only context: `--read-only /x`, `--ro=/x`. */
const READ_ONLY_FLAG = /^--?(read-?only|ro|readonly-dir|allowed-read)[A-Za-z-]*$/i;

/** What {@link mapHostArguments} made of a command line run on the host. */
export interface MappedArguments {
  args: string[];
  mounts: DraftMount[];
  env: Record<string, string>;
  clientEnv: Record<string, string>;
  hostVariables: string[];
  notes: string[];
}

/**
 * Arguments of a command that ran on the host (npx, uvx), as the sandbox needs them: an
 * absolute host path becomes a proposed mount (`/data/<name>`) and the argument its container
 * path; a secret (a `--token` flag's value, a URL with a password) moves out of the profile into
 * a host variable the client passes; everything else stays, escaped.
 */
export function mapHostArguments(
  raw: readonly string[],
  /** The profile's name: a secret argument without a flag becomes `<NAME>_URL`. */
  profile: string,
  taken: ReadonlySet<string> = new Set(),
): MappedArguments {
  const out: MappedArguments = { args: [], mounts: [], env: {}, clientEnv: {}, hostVariables: [], notes: [] };
  const targets = new Map<string, string>();
  const relative: string[] = [];
  const names = new Set(taken);
  const mountFor = (source: string, readOnly: boolean): string => {
    const known = targets.get(source);
    if (known) return known;
    const base =
      path.posix
        .basename(source)
        .replace(/[^A-Za-z0-9_.-]+/g, '-')
        .replace(/^[.-]+/, '') || 'root';
    let target = `/data/${base}`;
    for (let n = 2; [...targets.values()].includes(target); n++) target = `/data/${base}-${n}`;
    targets.set(source, target);
    out.mounts.push({ source: literal(source), target, mode: readOnly ? 'ro' : 'rw' });
    return target;
  };
  const secretVariable = (flag: string | undefined, value: string): string => {
    const stem =
      (flag ?? `${profile}_url`)
        .replace(/^-+/, '')
        .replace(/[^A-Za-z0-9]+/g, '_')
        .toUpperCase() || 'SECRET';
    let name = /^[A-Z_]/.test(stem) ? stem : `ARG_${stem}`;
    for (let n = 2; names.has(name); n++) name = `${stem}_${n}`;
    names.add(name);
    out.clientEnv[name] = value;
    out.hostVariables.push(name);
    out.notes.push(
      `${flag ? `The value of ${flag}` : 'An argument with a password in it'} was a literal in the client config: ` +
        `the profile takes it from the host as \${${name}}, which the client passes (set it where hintbox runs).`,
    );
    return `\${${name}}`;
  };
  const valueOf = (flag: string | undefined, value: string): string => {
    if ((flag !== undefined && isSecretFlag(flag)) || URL_WITH_PASSWORD.test(value)) {
      return secretVariable(flag, value);
    }
    if (isHostPath(value)) return mountFor(value, flag !== undefined && READ_ONLY_FLAG.test(flag));
    return literal(value);
  };
  for (let i = 0; i < raw.length; i++) {
    const arg = raw[i] as string;
    const assigned = /^(--?[A-Za-z0-9][A-Za-z0-9-]*)=([\s\S]*)$/.exec(arg);
    if (assigned) {
      out.args.push(`${assigned[1]}=${valueOf(assigned[1], assigned[2] as string)}`);
      continue;
    }
    const previous = i > 0 ? raw[i - 1] : undefined;
    const flag =
      previous !== undefined && /^--?[A-Za-z]/.test(previous) && !previous.includes('=') ? previous : undefined;
    out.args.push(/^--?[A-Za-z]/.test(arg) ? literal(arg) : valueOf(flag, arg));
    if (/^(\.\.?|~)\//.test(arg)) relative.push(arg);
  }
  if (relative.length > 0) {
    out.notes.push(
      `${relative.map(literal).join(', ')} ${relative.length === 1 ? 'is a path' : 'are paths'} relative to the client's ` +
        'folder or your home, which the sandbox does not see: make it absolute in a mount and give the server its target.',
    );
  }
  if (out.mounts.length > 0) {
    out.notes.push(
      `Host paths among the arguments became mounts (${out.mounts.map((m) => `${m.source} → ${m.target} ${m.mode}`).join(', ')}) ` +
        'and the arguments their container paths: check each is what the server needs, and make it mode: ro where it only reads.',
    );
  }
  return out;
}

/**
 * The environment of a client config's entry, taken by name: `NAME: ${NAME}`. Values never
 * enter the profile (the client config keeps them and passes them to hintbox).
 */
export function envByName(env: Readonly<Record<string, unknown>>): {
  env: Record<string, string>;
  hostVariables: string[];
  notes: string[];
} {
  const out: Record<string, string> = {};
  const notes: string[] = [];
  const pathValued: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!isEnvName(name)) {
      notes.push(`The variable "${literal(name)}" is not a valid name and was left out.`);
      continue;
    }
    out[name] = `\${${name}}`;
    if (typeof value === 'string' && isHostPath(value)) pathValued.push(name);
  }
  if (pathValued.length > 0) {
    notes.push(
      `${pathValued.join(', ')} hold${pathValued.length === 1 ? 's' : ''} a host path in the client config, which the sandbox ` +
        'cannot see: add a mount for it and set the variable to its container path.',
    );
  }
  return { env: out, hostVariables: Object.keys(out), notes };
}

/**
 * The profile's text: a header saying where it came from and what to review, then the YAML.
 * Trust and network are always written out, at their strictest.
 */
export function renderProfile(draft: ProfileDraft): string {
  const server = Object.fromEntries(Object.entries(draft.server).filter(([, v]) => v !== undefined));
  const mounts = draft.mounts.map(({ variable: _, ...mount }) => mount);
  const body: Record<string, unknown> = {
    name: draft.name,
    server,
    trust: 'untrusted',
    network: draft.allowHosts?.length ? { allow: draft.allowHosts } : 'none',
    ...(mounts.length > 0 ? { mounts } : {}),
    ...(Object.keys(draft.env).length > 0 ? { env: draft.env } : {}),
  };
  const envNames = Object.keys(draft.env);
  // The CLI checks these against what the text reads (import-command.ts), before writing it.
  const reads = [...new Set(draft.hostVariables)].sort();
  const review = [
    'trust: untrusted. Every call that can change something is confirmed; change it only if you trust the code itself.',
    draft.allowHosts?.length
      ? `network: allow ${draft.allowHosts.join(', ')}: the hosts its entry names (URLs in what it is given). Only its open-world tools get a network, and through hintbox's egress proxy they reach these hosts only: remove any you do not expect, add the ones it needs, or set network: none.`
      : "network: none (its entry names no host it reaches). If the server needs the network (an API, a web fetch), list its hosts: network: { allow: [host:443] }: only its open-world tools reach them, through hintbox's egress proxy.",
    draft.mounts.length > 0
      ? `mounts: ${draft.mounts.map((m) => `${m.source} at ${m.target} (${m.mode})`).join(', ')}. The most it may see of your files.`
      : 'mounts: none. The server sees none of your files; add mounts if it needs some.',
    envNames.length > 0
      ? `env: ${envNames.join(', ')}: all the environment the server gets (no value of the source's secrets is written here).`
      : 'env: none.',
    reads.length > 0
      ? `Reads from the environment hintbox runs with only: ${reads.join(', ')}. Set ${reads.length === 1 ? 'it' : 'them'} there before hintbox loads this profile.`
      : 'Reads no variable of the environment hintbox runs with.',
    ...reads.flatMap((n) => (draft.variableUses?.[n] ? [`${n}: ${draft.variableUses[n]}.`] : [])),
    ...draft.notes,
  ];
  const header = [
    `Imported by "hintbox import" from ${draft.origin}.`,
    `Runs: ${draft.runs}.`,
    'Review before you approve it (hintbox approve <this file> --all, then hintbox plan <this file>):',
    ...review.map((line) => `- ${line}`),
  ];
  // Notes quote the source (a publisher's names and paths): shown, never obeyed by a terminal or editor.
  return `${header
    .flatMap((line) => wrap(renderServerText(line), 96))
    .map((line) => (line ? `# ${line}` : '#'))
    .join('\n')}\n${stringify(body, { lineWidth: 0 })}`;
}

/** Words of `text` in lines of at most `width` (a longer word stands alone); list items hang. */
function wrap(text: string, width: number): string[] {
  const indent = text.startsWith('- ') ? '  ' : '';
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = indent + word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}
