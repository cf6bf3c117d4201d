import { namedHosts } from './named-hosts.js';
import path from 'node:path';
import { parsePypiSpec } from '../packages/package-source.js';
import {
  envByName,
  literal,
  mapHostArguments,
  type DraftServer,
  type ImportOutcome,
  type ProfileDraft,
} from './profile-draft.js';

/**
 * A client config's stdio entry (`command`, `args`, `env`) as a profile draft. Three launchers
 * are understood, and nothing is guessed beyond them:
 *
 * - `npx [-y] <pkg>[@<version>] args…` (also `-p <pkg> <bin>`) → `server.npm` (a bare name gets
 *   `@latest`, pinned by the package lock hintbox writes beside the profile);
 * - `uvx [--from <pkg>] <cmd> args…`, `uv tool run …`, `pipx run [--spec <pkg>] <cmd> args…` →
 *   `server.pypi` and `server.bin`;
 * - `docker run [options] <image> args…` → `server.image`. Docker's options are the config's, not
 *   the operator's, and are dropped (each named in the header); `-e` becomes an env entry, and
 *   `--entrypoint` / `-w` the profile's command / workdir.
 *
 * Anything else (`node server.js`, `python script.py`, a binary) is skipped with a note.
 */

export interface ClientEntry {
  command: string;
  args: readonly string[];
  env: Readonly<Record<string, unknown>>;
}

const NPM_NAME = /^(@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/;
const PYPI_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?$/;
const BIN_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** The launcher's name: `/usr/local/bin/npx` and `npx.cmd` are npx. */
function launcher(command: string): string {
  return path.basename(command.replace(/\\/g, '/')).replace(/\.(cmd|exe|bat)$/i, '');
}

/**
 * Does this entry already run hintbox (`hintbox run …`, `npx -y hintbox …`, `node …/hintbox.mjs`)?
 * The command, or for a launcher (node, npx) its first word that is not an option.
 */
export function runsHintbox(entry: { command: string; args: readonly string[] }): boolean {
  const isHintbox = (word: string): boolean => /^hintbox(\.mjs|@.*)?$/.test(launcher(word));
  if (isHintbox(entry.command)) return true;
  const first = entry.args.find((a) => !a.startsWith('-'));
  return ['node', 'npx'].includes(launcher(entry.command)) && first !== undefined && isHintbox(first);
}

/** Why an entry is skipped that a `--rewrite` made before (a second run has nothing to do for it). */
export const ALREADY_RUNS_HINTBOX = 'it already runs hintbox';

type Mapped = Pick<ProfileDraft, 'runs' | 'server' | 'mounts' | 'env' | 'notes' | 'hostVariables' | 'clientEnv'>;

export function importClientEntry(key: string, name: string, origin: string, entry: ClientEntry): ImportOutcome {
  const skip = (reason: string): ImportOutcome => ({ skipped: { key, reason } });
  if (runsHintbox(entry)) return skip(ALREADY_RUNS_HINTBOX);
  const tool = launcher(entry.command);
  let mapped: Mapped | string;
  if (tool === 'npx') mapped = fromNpx(entry, name);
  else if (tool === 'uvx') mapped = fromUvx(entry, name, entry.args, 'uvx');
  else if (tool === 'uv' && entry.args[0] === 'tool' && entry.args[1] === 'run')
    mapped = fromUvx(entry, name, entry.args.slice(2), 'uv tool run');
  else if (tool === 'pipx' && entry.args[0] === 'run') mapped = fromPipx(entry, name, entry.args.slice(1));
  else if (tool === 'docker' || tool === 'podman') mapped = fromDocker(entry);
  else mapped = `"${entry.command}" is not npx, uvx, uv tool run, pipx run or docker run`;
  if (typeof mapped === 'string') return skip(`write its profile by hand: ${mapped}`);
  const allowHosts = namedHosts([...entry.args, ...Object.values(entry.env ?? {})]);
  return { draft: { name, key, origin, ...mapped, ...(allowHosts.length ? { allowHosts } : {}) } };
}

/** The draft of a command run on the host: its arguments mapped, its env taken by name. */
function onHost(
  entry: ClientEntry,
  name: string,
  runs: string,
  server: DraftServer,
  rest: readonly string[],
  notes: string[],
): Mapped {
  const env = envByName(entry.env);
  const args = mapHostArguments(rest, name, new Set(Object.keys(env.env)));
  return {
    runs,
    server: { ...server, ...(args.args.length > 0 ? { args: args.args } : {}) },
    mounts: args.mounts,
    env: env.env,
    notes: [...notes, ...args.notes, ...env.notes],
    hostVariables: [...env.hostVariables, ...args.hostVariables],
    clientEnv: args.clientEnv,
  };
}

const NPX_FLAGS = new Set(['-y', '--yes', '-q', '--quiet', '--no']);

function fromNpx(entry: ClientEntry, name: string): Mapped | string {
  const args = [...entry.args];
  let pkg: string | undefined;
  let bin: string | undefined;
  while (args.length > 0) {
    const arg = args[0] as string;
    if (NPX_FLAGS.has(arg)) args.shift();
    else if (arg === '-p' || arg === '--package') {
      args.shift();
      pkg = args.shift();
    } else if (arg.startsWith('--package=')) pkg = (args.shift() as string).slice('--package='.length);
    else if (arg === '--') args.shift();
    else if (arg.startsWith('-')) return `npx option ${arg} is not understood`;
    else break;
  }
  if (pkg !== undefined) bin = args.shift();
  else pkg = args.shift();
  if (pkg === undefined) return 'npx is given no package';
  const at = pkg.indexOf('@', 1);
  const bare = at === -1 ? pkg : pkg.slice(0, at);
  const version = at === -1 ? '' : pkg.slice(at + 1);
  if (!NPM_NAME.test(bare) || (version !== '' && !/^[^\s@]+$/.test(version)))
    return `"${pkg}" is not an npm package name (a path, a URL or a git spec)`;
  if (bin !== undefined && !BIN_NAME.test(bin)) return `"${bin}" is not a command name`;
  const spec = `${bare}@${version || 'latest'}`;
  const notes =
    version === '' || version === 'latest' || !/^\d/.test(version)
      ? [
          `The config names ${version ? `${bare}@${version}` : bare} without a fixed version: the package lock hintbox writes ` +
            'beside this profile at the first build pins what it resolves to; review and commit it.',
        ]
      : [];
  return onHost(
    entry,
    name,
    `npm package ${spec}${bin ? `, command ${bin}` : ''}`,
    { npm: spec, ...(bin ? { bin } : {}) },
    args,
    notes,
  );
}

const UVX_VALUE_OPTIONS = new Set(['--from', '--python', '-p']);
const UVX_FLAGS = new Set(['-q', '--quiet', '--offline', '--isolated', '--refresh', '-n', '--no-cache']);

function fromUvx(entry: ClientEntry, name: string, given: readonly string[], how: string): Mapped | string {
  const args = [...given];
  let from: string | undefined;
  while (args.length > 0) {
    const arg = args[0] as string;
    const [option, inline] = arg.startsWith('--') && arg.includes('=') ? arg.split(/=(.*)/s) : [arg, undefined];
    if (UVX_FLAGS.has(arg)) args.shift();
    else if (option !== undefined && UVX_VALUE_OPTIONS.has(option)) {
      args.shift();
      const value = inline ?? args.shift();
      if (option === '--from') from = value;
    } else if (arg === '--') args.shift();
    else if (arg.startsWith('-'))
      return `${how} option ${option ?? arg} is not understood (hintbox installs only the package itself)`;
    else break;
  }
  const command = args.shift();
  if (command === undefined) return `${how} is given no command`;
  return fromPypi(entry, name, from ?? command, from === undefined ? undefined : command, args, how);
}

function fromPipx(entry: ClientEntry, name: string, given: readonly string[]): Mapped | string {
  const args = [...given];
  let spec: string | undefined;
  while (args.length > 0) {
    const arg = args[0] as string;
    if (arg === '--spec') {
      args.shift();
      spec = args.shift();
    } else if (arg.startsWith('--spec=')) spec = (args.shift() as string).slice('--spec='.length);
    else if (arg === '--') args.shift();
    else if (arg.startsWith('-')) return `pipx run option ${arg} is not understood`;
    else break;
  }
  const command = args.shift();
  if (command === undefined) return 'pipx run is given no command';
  return fromPypi(entry, name, spec ?? command, spec === undefined ? undefined : command, args, 'pipx run');
}

/**
 * `pkg`, `pkg==1.2`, `pkg@1.2` (uvx's form) → `pkg==1.2`; the command is the one named like the
 * package unless `--from`/`--spec` named the package apart from it.
 */
function fromPypi(
  entry: ClientEntry,
  name: string,
  requirement: string,
  command: string | undefined,
  rest: readonly string[],
  how: string,
): Mapped | string {
  const uvxForm = /^([^@=<>!~\s]+)@(.+)$/.exec(requirement);
  const pinned = uvxForm ? (uvxForm[2] === 'latest' ? uvxForm[1]! : `${uvxForm[1]!}==${uvxForm[2]!}`) : requirement;
  const source = parsePypiSpec(pinned);
  if (!PYPI_NAME.test(source.name) || !/^((===?|~=|!=|<=?|>=?)[A-Za-z0-9.*+!_-]+,?)*$/.test(source.version))
    return `"${requirement}" is not a PyPI requirement (a path, a URL or a git spec)`;
  const spec = `${source.name}${source.version}`;
  const bin = command ?? source.name.replace(/\[.*$/, '');
  if (!BIN_NAME.test(bin)) return `"${bin}" is not a command name`;
  const notes = source.version.startsWith('==')
    ? []
    : [
        `The config names ${requirement} without a fixed version: the package lock hintbox writes beside this profile ` +
          'at the first build pins what it resolves to (with hashes); review and commit it.',
      ];
  return onHost(
    entry,
    name,
    `PyPI package ${spec}, command ${bin} (as ${how} ran it)`,
    { pypi: spec, bin },
    rest,
    notes,
  );
}

/** `docker run` options that take a value (the next argument unless given as `--opt=value`). */
const DOCKER_VALUE_OPTIONS = new Set(
  (
    '-a --attach --add-host --blkio-weight --cap-add --cap-drop --cgroup-parent --cgroupns --cidfile --cpu-period ' +
    '--cpu-quota --cpu-shares -c --cpus --cpuset-cpus --cpuset-mems --device --device-cgroup-rule --dns --dns-option ' +
    '--dns-search --domainname -e --env --env-file --entrypoint --expose --gpus --group-add --health-cmd ' +
    '--health-interval --health-retries --health-start-period --health-timeout -h --hostname --ip --ip6 --ipc ' +
    '--isolation -l --label --label-file --link --log-driver --log-opt --mac-address -m --memory --memory-reservation ' +
    '--memory-swap --memory-swappiness --mount --name --network --net --network-alias --pid --pids-limit --platform ' +
    '-p --publish --pull --restart --runtime --security-opt --shm-size --stop-signal --stop-timeout --storage-opt ' +
    '--sysctl --tmpfs --ulimit -u --user --userns --uts -v --volume --volumes-from -w --workdir --oom-score-adj'
  ).split(' '),
);
/** `docker run` options that take no value. */
const DOCKER_FLAGS = new Set(
  '-i --interactive -t --tty --rm -d --detach --init --privileged --read-only -P --publish-all --no-healthcheck --oom-kill-disable -q --quiet --sig-proxy'.split(
    ' ',
  ),
);
/** Dropped without a note: what hintbox does anyway (stdio attached, removed at the end). */
const DOCKER_SILENT = new Set(['-i', '--interactive', '--rm', '-t', '--tty', '--init']);

function fromDocker(entry: ClientEntry): Mapped | string {
  const args = [...entry.args];
  if (args[0] === 'container') args.shift();
  if (args.shift() !== 'run') return 'only "docker run" is understood';
  const dropped: string[] = [];
  const env: Record<string, string> = {};
  const clientEnv: Record<string, string> = {};
  const hostVariables: string[] = [];
  const server: DraftServer = {};
  const byName = envByName(entry.env);
  while (args.length > 0) {
    const arg = args[0] as string;
    if (arg === '--') {
      args.shift();
      break;
    }
    if (!arg.startsWith('-') || arg === '-') break;
    args.shift();
    const [option, inline] =
      arg.startsWith('--') && arg.includes('=') ? (arg.split(/=(.*)/s) as [string, string]) : [arg, undefined];
    if (DOCKER_FLAGS.has(option) && inline === undefined) {
      if (!DOCKER_SILENT.has(option)) dropped.push(option);
      continue;
    }
    // A cluster of one-letter flags: -it, -ti, -itd.
    if (/^-[a-zA-Z]{2,}$/.test(arg) && [...arg.slice(1)].every((c) => DOCKER_FLAGS.has(`-${c}`))) {
      for (const c of arg.slice(1)) if (!DOCKER_SILENT.has(`-${c}`)) dropped.push(`-${c}`);
      continue;
    }
    const short = /^(-[a-zA-Z])(.+)$/.exec(arg);
    const [name, value] =
      short && DOCKER_VALUE_OPTIONS.has(short[1]!) ? [short[1]!, short[2]!] : [option, inline ?? args.shift()];
    if (!DOCKER_VALUE_OPTIONS.has(name)) return `docker option ${name} is not understood`;
    if (value === undefined) return `docker option ${name} has no value`;
    if (name === '-e' || name === '--env') {
      const [variable, assigned] = value.includes('=')
        ? (value.split(/=(.*)/s) as [string, string])
        : [value, undefined];
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(variable)) return `docker -e ${literal(variable)} is not a variable name`;
      env[variable] = `\${${variable}}`;
      hostVariables.push(variable);
      // `-e NAME=value` had its value in the args: the rewritten entry passes it by name instead.
      if (assigned !== undefined) clientEnv[variable] = assigned;
    } else if (name === '--entrypoint') server.command = [literal(value)];
    else if (name === '-w' || name === '--workdir') server.workdir = literal(value);
    else dropped.push(`${name} ${literal(value)}`);
  }
  const image = args.shift();
  if (image === undefined) return 'docker run is given no image';
  if (!isImageReference(image)) return `"${image}" is not an image reference`;
  const notes = droppedOptionNotes(dropped);
  const fromEnv = Object.keys(byName.env).filter((n) => !(n in env));
  if (fromEnv.length > 0)
    notes.push(
      `The client passed ${fromEnv.join(', ')} to docker itself, not into the container (no -e): left out of env.`,
    );
  return {
    runs: `image ${image}`,
    server: { image, ...server, ...(args.length > 0 ? { args: args.map(literal) } : {}) },
    mounts: [],
    env,
    notes: [...notes, ...imageNotes(image)],
    hostVariables,
    clientEnv,
  };
}

/** The header's word on runtime options (docker's, or npx's in a registry entry) it did not keep. */
export function droppedOptionNotes(dropped: readonly string[], whose = 'Docker options'): string[] {
  if (dropped.length === 0) return [];
  return [
    `${whose} of the source were dropped, since hintbox decides the sandbox (network, mounts, user, ` +
      `capabilities, limits): ${dropped.join(', ')}. Grant in this profile what the server really needs (mounts, ` +
      'network: open).',
  ];
}

// Docker's reference grammar (distribution/reference): [host[:port]/]path[:tag][@digest].
const DOMAIN_PART = '[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?';
const PATH_PART = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const TAG = '[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const IMAGE_REFERENCE = new RegExp(
  `^(?:${DOMAIN_PART}(?:\\.${DOMAIN_PART})*(?::[0-9]+)?/)?${PATH_PART}(?:/${PATH_PART})*(?::${TAG})?(?:@${DIGEST})?$`,
);
/** An image tag: `1.2.3`, `latest`. */
export const IMAGE_TAG = new RegExp(`^${TAG}$`);

/** Is `text` an image reference as docker reads it (`ghcr.io/org/name:1.0`, `name@sha256:…`), and nothing more? */
export function isImageReference(text: string): boolean {
  // Docker's own bound on a name is 255; a tag and a digest add at most ~200.
  return text.length <= 512 && IMAGE_REFERENCE.test(text);
}

/** The header's word on an image reference: pinned by digest or not. */
export function imageNotes(image: string): string[] {
  return /@sha256:[0-9a-f]{64}$/.test(image)
    ? [
        'The image is pinned by its digest: hintbox runs it only where the engine shows that digest for it ' +
          '(pulled from a registry by digest); an image built or loaded here under that name is refused.',
      ]
    : ['The image is named by tag, not digest: a tag can be moved. Pin it (image@sha256:…) where you can.'];
}
