import type { PackageSource } from '../../packages/package-source.js';

/**
 * Keeps npm from reading a path of this host that a publisher named. A dependency spec (at any
 * depth) that is a `file:` tarball, a local folder, or a git repository is refused while npm
 * resolves the lock, before npm reads or clones it (`npm install --package-lock-only` already
 * reads a `file:` tarball, for its manifest and integrity): a preload wraps arborist's `Edge`,
 * so the refusal names the dependency and the package that asked, in one stderr line that starts
 * with {@link NPM_GUARD_PREFIX}. Behind it, npm's own `allow-file`/`allow-directory`/`allow-git`
 * set to `root` refuse the same should the preload miss (a later arborist), where npm has them
 * (npm 11.14 and later; npm 10, which Node 20 and 22 ship, and npm 11 before 11.14 have none): without them the preload
 * must prove it wrapped arborist (it writes {@link NPM_GUARD_PROOF_VARIABLE}'s file), else the
 * resolution is refused. Only the profile's own package (the operator's choice) may be such a
 * spec. A lock, written by hintbox or not, is checked by {@link lockHostPath} before `npm ci`.
 */

/** The start of the one line the guard writes when it refuses (exit 3). */
const NPM_GUARD_PREFIX = 'hintbox-npm-guard: ';

/** npm's own fence: only the root's dependencies (the profile's package) may be local or git. */
export const NPM_ALLOW_ARGS = ['--allow-file=root', '--allow-directory=root', '--allow-git=root'];

/** The variable naming the file the preload writes once it has wrapped arborist's `Edge`. */
export const NPM_GUARD_PROOF_VARIABLE = 'HINTBOX_NPM_GUARD_PROOF';

/**
 * CommonJS, loaded into npm by `NODE_OPTIONS=--require`: every dependency edge arborist builds is
 * checked as it is made, before arborist fetches, links or clones what it names.
 */
export const NPM_GUARD_SCRIPT = `'use strict';
const Module = require('node:module');
const PREFIX = ${JSON.stringify(NPM_GUARD_PREFIX)};
const EDGE = /[\\\\/]@npmcli[\\\\/]arborist[\\\\/]lib[\\\\/]edge\\.js$/;
const load = Module._load;
let guarded;
Module._load = function (request, parent, isMain) {
  const exported = load.apply(this, arguments);
  if (!parent || !request.endsWith('edge.js')) return exported;
  const file = Module._resolveFilename(request, parent, isMain);
  if (!EDGE.test(file)) return exported;
  if (!guarded) {
    const npa = Module.createRequire(file)('npm-package-arg');
    guarded = class extends exported {
      constructor(options) {
        refuse(npa, options);
        super(options);
      }
    };
    const proof = process.env[${JSON.stringify(NPM_GUARD_PROOF_VARIABLE)}];
    if (proof) require('node:fs').writeFileSync(proof, 'guarded\\n');
  }
  return guarded;
};
function refuse(npa, { name, spec, from, type }) {
  if (!from || from.isProjectRoot || type === 'workspace' || typeof spec !== 'string') return;
  let kind;
  if (/^link:/i.test(spec)) kind = 'a link to a folder of this host';
  else {
    let parsed;
    try {
      parsed = npa.resolve(name, spec, from.realpath);
    } catch (error) {
      return; // arborist reports a spec npm cannot parse itself
    }
    if (parsed.type === 'file') kind = 'a tarball on this host';
    else if (parsed.type === 'directory') kind = 'a folder of this host';
    else if (parsed.type === 'git') kind = 'a git repository';
  }
  if (!kind) return;
  const asker = from.package && from.package.name ? from.package.name + '@' + from.package.version : from.location;
  process.stderr.write(
    PREFIX + 'refused ' + name + '@' + spec + ', required by ' + asker + ': ' + kind +
      ', not a package from the registry (only the profile\\'s own package may be one)\\n',
  );
  process.exit(3);
}
`;

/** The guard's line in a failed run's output, if it wrote one. */
export function npmGuardLine(output: string): string | undefined {
  const line = output.split('\n').find((l) => l.startsWith(NPM_GUARD_PREFIX));
  return line?.slice(NPM_GUARD_PREFIX.length).trim();
}

interface LockEntry {
  name?: string;
  version?: string;
  resolved?: string;
  link?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

/** A lock's `resolved` that names this host's files: `file:`, `git+file:`, `link:`, or a bare path. */
export function isHostPath(spec: string): boolean {
  return /^(file|git\+file|link):/i.test(spec) || !/^[a-z][a-z0-9+.-]*:/i.test(spec);
}

/**
 * The first entry of a package lock that would make `npm ci` read this host's files (a `resolved`
 * that is a host path, a `link`, a folder outside node_modules), as the line that refuses it; none:
 * undefined. The profile's own package may be one only if the profile names it so. Pure.
 */
export function lockHostPath(
  packages: Record<string, LockEntry>,
  source: PackageSource,
  lockFile: string,
): string | undefined {
  for (const [key, entry] of Object.entries(packages)) {
    if (key === '') continue;
    const name = key.startsWith('node_modules/') ? key.slice(key.lastIndexOf('node_modules/') + 13) : undefined;
    // A version or range is no path; what the profile names as `file:`, a folder or a tarball is.
    const own = key === `node_modules/${source.name}` && /^((git\+)?file:|link:|[./~])/i.test(source.version);
    const local = !name || entry.link === true || (entry.resolved !== undefined && isHostPath(entry.resolved));
    if (!local || own) continue;
    const what = `${name ?? entry.name ?? key}@${entry.resolved ?? key}`;
    const asker = Object.entries(packages).find(([, other]) =>
      [other.dependencies, other.optionalDependencies, other.peerDependencies].some(
        (deps) => deps !== undefined && name !== undefined && name in deps,
      ),
    );
    const by = asker ? (asker[0] === '' ? 'the profile' : asker[0].replace(/^(.*\/)?node_modules\//, '')) : 'nothing';
    return `refused ${what}, required by ${by} in the lock ${lockFile}: a path of this host, not a package from the registry (delete the lock to resolve again)`;
  }
  return undefined;
}
