import { readFileSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseDocument } from 'yaml';
import { denyReason, sharedFolderReason } from './host-path-denylist.js';
import { lockFilePath } from './profile-paths.js';
import { operatorFileLinkProblems, type OperatorFile } from './operator-file-links.js';
import { checkSensitive, SENSITIVE_NAMES, sensitivePlaces } from './sensitive-paths.js';
import { packageImageName, packageLockPath, packageSource } from '../packages/package-source.js';
import { processVariables } from '../config/environment.js';
import { hintboxOwnPaths, type OwnPath } from '../config/hintbox-paths.js';
import { isStrictlyInside } from '../util/paths.js';
import { packagePath } from '../util/package-root.js';
import { interpolateTree, UnsetVariableError, type Variables } from './interpolate.js';
import { isSandboxValueField, mountValueName, sandboxValueUses } from './sandbox-values.js';
import { normalizeContainerPath, ProfileSchema, type ParsedProfile } from './profile-schema.js';
import { ineffectiveKeys } from './trust-key-effects.js';
import { formatFieldPath, ProfileError, schemaProblems, type ProfileProblem } from './profile-problems.js';

/** A resolved mount: `source` is an existing, real (symlink-free), allowed host path. */
export interface ResolvedMount {
  /** What `${sandbox:mount.<name>}` calls its target. */
  name?: string;
  source: string;
  target: string;
  /** The operator's ceiling for this mount. */
  mode: 'ro' | 'rw';
  /** Sockets, FIFOs and device nodes in the source are allowed (see sandbox/special-files.ts). */
  allowSpecialFiles?: boolean;
  /** The sensitive places (sensitive-paths.ts) the operator lets this mount hold, by name. */
  allowSensitive?: string[];
}

/** A profile after validation and path resolution. Everything inside is typed and checked. */
export interface Profile extends Omit<ParsedProfile, 'mounts' | 'serverRequests' | 'server'> {
  /** Absolute path of the profile file. */
  file: string;
  /** The image is always named: for a package source, the image hintbox builds for it. */
  server: ParsedProfile['server'] & { image: string };
  mounts: ResolvedMount[];
  /** With the trust's default filled in (sampling: only a trusted server's). */
  serverRequests: { sampling: boolean; elicitation: boolean; urlElicitation: boolean; roots: boolean };
  /** `env` entries left out because their variable is not set (only with `unsetEnv: 'leave-out'`). */
  envLeftOut?: readonly { name: string; variable: string }[];
}

/** One problem in a profile: file, field path and what was expected. */
/** Why a profile file cannot be read, in plain words (not `ENOENT`). */
function unreadable(error: NodeJS.ErrnoException): string {
  switch (error.code) {
    case 'ENOENT':
      return "no such file (give the path of a profile: a .yaml file, such as one of the gallery's profiles/)";
    case 'EACCES':
      return 'not allowed to read this file (permission denied)';
    case 'EISDIR':
      return 'a folder, not a profile file (give the .yaml file in it)';
    default:
      return `cannot read profile: ${error.message}`;
  }
}

/**
 * The variables hintbox gives every profile itself, over the environment's of the same name:
 * `CWD`, the folder hintbox was started in, and `HINTBOX_IMAGES`, the images folder of this
 * hintbox's installation (so a copy of a gallery profile finds its build folder from anywhere).
 */
export function builtinVariables(): Record<'CWD' | 'HINTBOX_IMAGES', string> {
  return { CWD: process.cwd(), HINTBOX_IMAGES: packagePath('images') };
}

/** The variables a profile is loaded with: the process environment, then {@link builtinVariables}. */
export function profileVariables(): Variables {
  return { ...processVariables(), ...builtinVariables() };
}

export interface LoadProfileOptions {
  /** Variables for `${…}`; default: {@link profileVariables}. */
  vars?: Variables;
  /** Home directory for the denylist; default: os.homedir(). */
  home?: string;
  /** hintbox's own folders, never mounted; default: its state folder and installation. */
  ownPaths?: readonly OwnPath[];
  /**
   * An `env` value whose variable is not set (a token): `refuse` (default: a run needs it), or
   * `leave-out` (listing the tools, for approve and plan: the entry is left out, named in
   * `envLeftOut`, and the server is listed without it).
   */
  unsetEnv?: 'refuse' | 'leave-out';
  /**
   * The profile's text, checked as if it were `file` (which need not exist yet): how
   * `hintbox import` validates what it is about to write. Default: read from `file`.
   */
  text?: string;
}

/**
 * Reads, interpolates, validates and resolves a profile. Throws a ProfileError listing every
 * problem found (not only the first), so an operator can fix a profile in one pass.
 */
export function loadProfile(file: string, options: LoadProfileOptions = {}): Profile {
  const absFile = path.resolve(file);
  const fail = (message: string, at = ''): never => {
    throw new ProfileError([{ file: absFile, path: at, message }]);
  };

  let text: string;
  try {
    text = options.text ?? readFileSync(absFile, 'utf8');
  } catch (error) {
    return fail(unreadable(error as NodeJS.ErrnoException));
  }

  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ProfileError(
      doc.errors.map((e) => ({
        file: absFile,
        path: e.linePos?.[0] ? `line ${e.linePos[0].line}` : '',
        message: `invalid YAML: ${e.message.split('\n')[0]}`,
      })),
    );
  }
  let raw: unknown;
  try {
    raw = doc.toJS();
  } catch (error) {
    // Aliases that multiply (a billion laughs): the yaml library refuses to expand them.
    return fail(`invalid YAML: ${(error as Error).message.split('\n')[0]}`);
  }

  const vars = options.vars ?? profileVariables();
  const problems: ProfileProblem[] = [];
  const envLeftOut: { name: string; variable: string }[] = [];
  const interpolated = interpolateTree(
    raw,
    vars,
    (at, message, error) => {
      const [section, key, ...deeper] = at;
      if (options.unsetEnv === 'leave-out' && error instanceof UnsetVariableError && section === 'env') {
        if (typeof key === 'string' && deeper.length === 0)
          return void envLeftOut.push({ name: key, variable: error.variable });
      }
      problems.push({ file: absFile, path: formatFieldPath(at), message });
    },
    isSandboxValueField,
  );
  const env = (interpolated as { env?: unknown } | null)?.env;
  if (env && typeof env === 'object') for (const { name } of envLeftOut) delete (env as Record<string, unknown>)[name];
  // Interpolation problems do not stop the schema check: the operator sees every problem at once.
  const parsed = ProfileSchema.safeParse(interpolated);
  if (!parsed.success) {
    const seen = new Set(problems.map((p) => p.path));
    problems.push(...parsed.error.issues.flatMap((i) => schemaProblems(absFile, i)).filter((p) => !seen.has(p.path)));
  }
  const home = options.home ?? os.homedir();
  const ownPaths = (options.ownPaths ?? hintboxOwnPaths()).map((own) => ({ ...own, path: realOrResolved(own.path) }));
  const baseDir = path.dirname(absFile);
  // Host paths are checked even when the schema failed elsewhere, for every source that is a string.
  const rawMounts = (interpolated as { mounts?: unknown } | null)?.mounts;
  const resolvedSources = new Map<number, string>();
  const sensitive = sensitivePlaces([home, realOrResolved(home)], vars, realOrResolved);
  (Array.isArray(rawMounts) ? rawMounts : []).forEach((mount: unknown, index) => {
    const { source, allowSensitive } = (mount ?? {}) as { source?: unknown; allowSensitive?: unknown };
    const at = `mounts[${index}].source`;
    if (typeof source !== 'string' || source === '' || problems.some((p) => p.path === at)) return;
    const resolved = resolveHostPath(
      source,
      baseDir,
      home,
      ownPaths.filter((own) => !own.onlyOwn).map((own) => own.path),
    );
    if ('error' in resolved) return void problems.push({ file: absFile, path: at, message: resolved.error });
    // A name the schema refuses has its line already: only known names are checked against the source.
    const allowed = Array.isArray(allowSensitive)
      ? allowSensitive.filter((n): n is string => SENSITIVE_NAMES.includes(n as string))
      : [];
    const check = checkSensitive([resolved.path, resolved.written], sensitive, allowed);
    for (const name of check.unused) {
      const message = `${name}: ${resolved.path} neither is, holds nor lies in it: list only what this mount holds`;
      problems.push({ file: absFile, path: `mounts[${index}].allowSensitive[${allowed.indexOf(name)}]`, message });
    }
    const shared = check.refused ?? sharedFolderProblem(resolved.path, ownPaths);
    if (shared) problems.push({ file: absFile, path: at, message: shared });
    else resolvedSources.set(index, resolved.path);
  });
  if (!parsed.success) throw new ProfileError(problems);

  const mounts: ResolvedMount[] = parsed.data.mounts.map((mount, index) => ({
    ...mount,
    source: resolvedSources.get(index) ?? mount.source,
  }));
  const targets = new Map<string, number>();
  parsed.data.mounts.forEach((mount, index) => {
    const target = normalizeContainerPath(mount.target);
    const previous = targets.get(target);
    if (previous !== undefined) {
      problems.push({ file: absFile, path: `mounts[${index}].target`, message: `same target as mounts[${previous}]` });
    }
    targets.set(target, index);
  });
  const mountNames = new Map<string, number>();
  parsed.data.mounts.forEach((mount, index) => {
    if (mount.name === undefined) return;
    const previous = mountNames.get(mount.name);
    if (previous !== undefined) {
      problems.push({ file: absFile, path: `mounts[${index}].name`, message: `same name as mounts[${previous}]` });
    } else mountNames.set(mount.name, index);
  });
  if (!parsed.data.hold && parsed.data.trust !== 'trusted') {
    problems.push({
      file: absFile,
      path: 'hold',
      message: 'false is allowed only for a trusted server (trust: trusted): an untrusted server is always held',
    });
  }
  for (const key of ineffectiveKeys(parsed.data)) {
    problems.push({ file: absFile, path: formatFieldPath(key.at), message: key.message });
  }
  for (const use of sandboxValueUses(parsed.data.server.args ?? [], parsed.data.env)) {
    const at = formatFieldPath(use.path);
    // A field whose interpolation failed (an unknown name) has its one line already.
    if (problems.some((p) => p.path === at)) continue;
    const mount = mountValueName(use.name);
    if (mount !== undefined) {
      if (mountNames.has(mount)) continue;
      const named = [...mountNames.keys()];
      const message = `\${sandbox:${use.name}}: no mount is named "${mount}" (${named.length > 0 ? `named: ${named.join(', ')}` : 'no mount has a name: give it one with name:'})`;
      problems.push({ file: absFile, path: at, message });
    } else if (!parsed.data.database) {
      const message = `\${sandbox:${use.name}} needs a database section: hintbox sets it only for a database`;
      problems.push({ file: absFile, path: at, message });
    }
  }
  if (parsed.data.server.build !== undefined) {
    const context = path.resolve(baseDir, parsed.data.server.build);
    if (!isFile(path.join(context, 'Dockerfile'))) {
      problems.push({
        file: absFile,
        path: 'server.build',
        message: `a folder with a Dockerfile (${context} has none)`,
      });
    } else {
      parsed.data.server.build = context;
    }
  }
  const source = packageSource(parsed.data.server);
  const build = source
    ? { path: packageLockPath(absFile, source.kind), what: `the server's ${source.kind} package lock` }
    : parsed.data.server.build && {
        path: parsed.data.server.build,
        what: "the server's build folder (server.build)",
        folder: true,
      };
  const decided: OperatorFile[] = [
    { path: absFile, what: 'the profile file' },
    { path: lockFilePath(absFile), what: 'the lock file of approved definitions' },
    ...(build ? [build] : []),
  ];
  problems.push(...writableMountProblems(absFile, mounts, decided));
  // Paths cannot see a hard link: every file the operator decides, and hintbox's own, has one name.
  const own = ownPaths.filter((o) => o.oneNameEach).map((o) => ({ path: o.path, what: o.what, folder: true }));
  const linked = operatorFileLinkProblems([...decided, ...own]);
  problems.push(...linked.map((message) => ({ file: absFile, path: '', message })));
  if (problems.length > 0) throw new ProfileError(problems);
  const server = { ...parsed.data.server, image: parsed.data.server.image ?? packageImageName(source!) };

  const { sampling, urlElicitation, ...asked } = parsed.data.serverRequests;
  const trusted = parsed.data.trust === 'trusted';
  const serverRequests = { ...asked, sampling: sampling ?? trusted, urlElicitation: urlElicitation ?? trusted };
  return {
    ...parsed.data,
    file: absFile,
    server,
    mounts,
    serverRequests,
    ...(envLeftOut.length ? { envLeftOut } : {}),
  };
}

/**
 * What the operator decides must lie outside every mount a tool may write: a server that could
 * rewrite its profile (or the lock of what was approved, or its build folder or package lock) would hand itself
 * more at the next start. hintbox's own folders are on the denylist already. Also for serve's
 * own settings files (its tokens), against each profile it serves.
 */
export function writableMountProblems(
  file: string,
  mounts: readonly ResolvedMount[],
  operatorFiles: readonly OperatorFile[],
): ProfileProblem[] {
  const decided = operatorFiles.map(({ path: given, what }) => ({
    what,
    real: realOrResolved(given),
    entries: entriesOnTheWay(given),
  }));
  return mounts.flatMap((mount, index) => {
    if (mount.mode !== 'rw') return [];
    const held = decided.flatMap(({ what, real, entries }) => {
      // A symlink on the way that lies in the mount is as good as the file itself: the
      // server could point it elsewhere. A mount inside the folder could rewrite its files.
      const reached = [...entries].reverse().find((e) => e === mount.source || isStrictlyInside(e, mount.source));
      const inside = isStrictlyInside(mount.source, real) ? real : undefined;
      const shown = reached ?? inside;
      return shown ? [`${what} (${shown === real ? real : `${shown}, on the way to ${real}`})`] : [];
    });
    if (held.length === 0) return [];
    // One problem per mount, naming everything of the operator's it holds.
    return [
      {
        file,
        path: `mounts[${index}].source`,
        message: `${mount.source} may be written by the server and holds ${held.join(' and ')}: move it out, or make the mount mode: ro`,
      },
    ];
  });
}

/**
 * Every directory entry the system goes through to reach `p`, as real locations: each folder
 * on the way, each symlink (where the link itself lies) and what it leads to, and the last
 * entry. Whoever can write any of them decides what `p` is.
 */
function entriesOnTheWay(p: string, depth = 0): string[] {
  const absolute = path.resolve(p);
  const parent = path.dirname(absolute);
  if (parent === absolute) return [absolute];
  const entry = path.join(realOrResolved(parent), path.basename(absolute));
  const out = [...entriesOnTheWay(parent, depth + 1), entry];
  let target: string;
  try {
    target = readlinkSync(entry);
  } catch {
    return out; // not a symlink (or not there)
  }
  // Loops end where realpath would give up.
  return depth > 40 ? out : [...out, ...entriesOnTheWay(path.resolve(path.dirname(entry), target), depth + 1)];
}

/** The real path of `p`, or (when it does not exist yet) of its nearest existing parent, joined with the rest. */
function realOrResolved(p: string): string {
  const absolute = path.resolve(p);
  try {
    return realpathSync(absolute);
  } catch {
    const parent = path.dirname(absolute);
    return parent === absolute ? absolute : path.join(realOrResolved(parent), path.basename(absolute));
  }
}

function resolveHostPath(
  source: string,
  baseDir: string,
  home: string,
  ownPaths: readonly string[],
): { path: string; written: string } | { error: string } {
  const expanded = source === '~' || source.startsWith('~/') ? path.join(home, source.slice(1)) : source;
  const absolute = path.resolve(baseDir, expanded);
  let real: string;
  try {
    real = realpathSync(absolute);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return { error: code === 'ENOENT' ? `${absolute} does not exist` : `${absolute}: ${code ?? String(error)}` };
  }
  // Check both the path as written and where it really leads: a symlink into /etc is /etc.
  const reason = denyReason(real, home, ownPaths) ?? denyReason(absolute, home, ownPaths);
  if (reason) return { error: reason };
  return { path: real, written: absolute };
}

function isFile(p: string): boolean {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

/** Why a resolved source may not be mounted because of a folder only partly hintbox's (see `OwnPath.onlyOwn`). */
function sharedFolderProblem(source: string, ownPaths: readonly OwnPath[]): string | undefined {
  for (const own of ownPaths) {
    const reason = own.onlyOwn && sharedFolderReason(source, own.path, own.onlyOwn, own.what);
    if (reason) return reason;
  }
  return undefined;
}
