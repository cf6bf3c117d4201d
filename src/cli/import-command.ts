import {
  accessSync,
  constants,
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  statSync,
  lstatSync,
} from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { ENVIRONMENT_VARIABLES, processVariables } from '../config/environment.js';
import { planImport, ImportSourceError, SOURCE_LABEL, type ImportPlan } from '../import/import-source.js';
import { renderProfile, type ProfileDraft } from '../import/profile-draft.js';
import { ALREADY_RUNS_HINTBOX } from '../import/command-line.js';
import {
  configText,
  rewriteClientConfig,
  RewriteError,
  type HintboxLaunch,
  type RewrittenEntry,
} from '../import/rewrite-config.js';
import type { SandboxEngine } from '../engine/sandbox-engine.js';
import { referencedVariables } from '../profile/interpolate.js';
import { loadProfile } from '../profile/load-profile.js';
import { ProfileError, type ProfileProblem } from '../profile/profile-problems.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { HintboxError, UsageError } from '../util/hintbox-error.js';
import type { CommandSpec } from './command-spec.js';
import { closeEngine, engineReady } from './common.js';
import { importReadiness } from './import-readiness.js';
import { isoTime } from '../util/iso-time.js';

const HELP = `Usage: hintbox import <file> [--server NAME [--version V]] [--out DIR] [--rewrite] [--force]

Writes one hintbox profile per MCP server of <file>, which is one of:
  - a client config: Claude Desktop's claude_desktop_config.json or Cursor's mcp.json
    ("mcpServers"), VS Code's mcp.json ("servers");
  - an MCP registry entry (server.json);
  - a list of MCP registry entries: the registry API's answer to GET /v0/servers, saved to a
    file ({"servers": [{"server": …, "_meta": …}], …}), or a JSON array of server.json; pick
    one with --server NAME. Nothing is fetched: hintbox reads only the file you give.
Servers run as "npx [-y] <package>", "uvx [--from <package>] <command>", "uv tool run …",
"pipx run …" or "docker run … <image>", and registry packages of type npm, pypi and oci
(stdio transport), become profiles (server.npm, server.pypi + server.bin, server.image). Anything
else (node script.js, a remote URL, an MCP bundle) is skipped, with the reason.

Nothing of the source is trusted: every profile is trust: untrusted; its network is an allow
list of the hosts its entry names (each http(s) URL written in its arguments, env values, a
registry entry's remotes and defaults; public names only, host:port only), else none; docker
options (--network host, --privileged, -v, …) are dropped and named in the profile's header;
host paths among a config's arguments become proposed mounts (/data/<name>) with the argument
rewritten to the target; a config's environment variables are taken from the host by name
(NAME: \${NAME}): a value in the client config is never copied into a profile. A registry
entry chooses no host path and no host variable: each path argument becomes a read-only mount
from a variable hintbox names (HINTBOX_<PROFILE>_<ARG>; the argument \${sandbox:mount.<name>}),
and each secret or required value is read from one (HINTBOX_<PROFILE>_<NAME>); an entry whose
package identifier or version is not a plain name, version or image reference is refused. Each profile
starts with a comment saying where it came from, what to review, and exactly which variables
it reads.

Every profile is checked by the same loader as "hintbox run" before anything is written; if one
fails, nothing is written (exit 2). An existing profile that differs from what import writes
(one you edited) is not overwritten without --force, and then kept as a backup; nothing is
written through a symbolic link (a profile, or the config --rewrite rewrites). Run again on a
rewritten config, import --rewrite has nothing left to do (exit 0).

Options:
  --server NAME  the registry server to import from a list, by its name
                 (io.github.user/server); with a single server.json, checked against its name
  --version V    that version of it; default: the one the registry marks latest, else the
                 highest version listed (when several are listed and none of these tells,
                 --version is asked for)
  --out DIR      the folder to write <name>.yaml into (default: hintbox/ beside <file>)
  --rewrite      also rewrite the client config: each imported entry then runs
                 "<this hintbox> run <absolute profile path>" with its env as it was; the
                 original is kept beside it as <file>.hintbox-backup (or …-backup-<time> when
                 that exists); entries not imported are left as they were. An entry is
                 rewritten only when its profile loads, its image is prepared, its tools list
                 in a read-only sandbox and are approved as listed; the others are left as they
                 were, one line each naming why and the command that fixes it (exit 1)
  --force        overwrite existing profiles that differ from what import writes (yours is
                 kept beside as <profile>.hintbox-backup); an identical one is left as it is
  -h, --help     this help

Then, for each profile: review its header, "hintbox approve <profile> --all", "hintbox plan <profile>".
Exit 0 when everything asked was done; 1 when --rewrite left some entries as they were (or
there was nothing to import); 2 on bad input, nothing written.`;

/** Stands in, while a draft is checked, for a variable the client will pass at run time. */
const PLACEHOLDER = 'hintbox-import-check';

export const importCommand: CommandSpec = {
  help: HELP,
  options: {
    out: { type: 'string' },
    rewrite: { type: 'boolean' },
    force: { type: 'boolean' },
    server: { type: 'string' },
    version: { type: 'string' },
  },
  run({ positionals, values }) {
    return importFile(positionals, values);
  },
};

/** The command's work: files, and with --rewrite a listing of each entry's tools first. */
async function importFile(positionals: string[], values: Record<string, unknown>): Promise<number> {
  if (positionals.length !== 1) {
    throw new UsageError(`import: expected one file, got ${positionals.length} (see hintbox import --help)`);
  }
  const file = path.resolve(positionals[0] as string);
  const json = readJson(file);
  let plan: ImportPlan;
  try {
    const pick = {
      ...(typeof values.server === 'string' ? { server: values.server } : {}),
      ...(typeof values.version === 'string' ? { version: values.version } : {}),
    };
    if (pick.version !== undefined && pick.server === undefined) {
      throw new UsageError('import: --version goes with --server NAME (see hintbox import --help)');
    }
    plan = planImport(json, file, pick, new Set(ENVIRONMENT_VARIABLES.map((v) => v.name)));
  } catch (error) {
    if (error instanceof ImportSourceError) throw new UsageError(`import: ${error.message}`);
    throw error;
  }
  if (values.rewrite && plan.section === undefined) {
    throw new UsageError(`import: --rewrite rewrites a client config; ${file} is an MCP registry entry`);
  }
  const out = path.resolve((values.out as string | undefined) ?? path.join(path.dirname(file), 'hintbox'));
  const drafts = plan.outcomes.flatMap((o) => ('draft' in o ? [o.draft] : []));
  const written = drafts.map((draft) => ({
    draft,
    file: path.join(out, `${draft.name}.yaml`),
    text: renderProfile(draft),
  }));
  // The header names exactly what the profile reads: a draft that says otherwise is a bug, never written.
  for (const { draft, text } of written) {
    const reads = referencedVariables(parse(text)).join(', ');
    const told = [...new Set(draft.hostVariables)].sort().join(', ');
    if (reads !== told)
      throw new Error(`import: ${draft.name} reads ${reads || 'nothing'} but its notes name ${told || 'nothing'}`);
  }

  // What is written over is the operator's: never through a link, never without its backup.
  const links = [...(values.rewrite ? [file] : []), ...written.map((w) => w.file)].filter(isSymlink);
  if (links.length > 0) {
    throw new UsageError(`import: ${links.join(', ')}: a symbolic link, not written through; nothing written`);
  }
  const edited = written
    .filter((w) => existsSync(w.file) && readFileSync(w.file, 'utf8') !== w.text)
    .map((w) => w.file);
  if (edited.length > 0 && !values.force) {
    throw new UsageError(
      `import: ${edited.join(', ')} exist${edited.length === 1 ? 's' : ''} and differ${edited.length === 1 ? 's' : ''} from what import writes; nothing written (--force overwrites, keeping a backup)`,
    );
  }
  // Checked as "hintbox run" will load them, before anything is written.
  const problems: ProfileProblem[] = written.flatMap(({ draft, file: target, text }) =>
    checkDraft(draft, target, text),
  );
  if (problems.length > 0) throw new ProfileError(problems);

  const rewriteTo = values.rewrite && plan.section ? { section: plan.section, launch: hintboxLaunch() } : undefined;
  const entries = written.map(({ draft, file: profile }) => ({ key: draft.key, profile, addEnv: draft.clientEnv }));
  // Every entry is checked as rewritable before anything is written; which ones are rewritten is known later.
  if (rewriteTo) rewriteOrRefuse(json, rewriteTo, entries);
  const print = (line: string): void => void process.stdout.write(`${line}\n`);
  print(`${SOURCE_LABEL[plan.kind]}: ${file}`);
  for (const outcome of plan.outcomes) {
    if ('skipped' in outcome) print(`  skipped ${outcome.skipped.key}: ${outcome.skipped.reason}`);
  }
  // Run twice: what the first run rewrote is done, not an error.
  if (
    written.length === 0 &&
    values.rewrite &&
    plan.outcomes.some((o) => 'skipped' in o && o.skipped.reason === ALREADY_RUNS_HINTBOX)
  ) {
    print(`nothing left to import: the entries imported before run hintbox already (${file} unchanged)`);
    return 0;
  }
  if (written.length === 0) throw new HintboxError('import: nothing to import: every server was skipped');
  mkdirSync(out, { recursive: true });
  for (const { draft, file: target, text } of written) {
    if (!edited.includes(target) && existsSync(target)) {
      print(`  unchanged ${target} (${draft.key})`);
      continue;
    }
    const kept = edited.includes(target) ? ` (yours was kept as ${keepBackup(target)})` : '';
    writeFileAtomic(target, text);
    print(`  wrote ${target} (${draft.key}: ${draft.runs})${kept}`);
  }
  const left = rewriteTo ? await rewriteReady(file, json, rewriteTo, entries, print) : 0;
  print('Next, for each profile: read its header (network, mounts, trust), then');
  for (const { file: target } of written) print(`  hintbox approve ${target} --all && hintbox plan ${target}`);
  const variables = [...new Set(written.flatMap((w) => w.draft.hostVariables))];
  if (variables.length > 0 && !rewriteTo) {
    print(
      `The profiles read ${variables.join(', ')} from the environment hintbox runs with: ` +
        "set them there (the client's entry that starts hintbox passes its env).",
    );
  }
  if (left === 0) return 0;
  print(
    `${left} ${left === 1 ? 'entry' : 'entries'} left as ${left === 1 ? 'it was' : 'they were'}: do what each line says, then import --rewrite again`,
  );
  return 1;
}

/**
 * Rewrites the entries whose profile works (see {@link importReadiness}), each checked in turn
 * with a progress line; the others stay as they were, one line each naming why and the command
 * that would fix it. The backup is kept first: a config that cannot be kept is not rewritten.
 * Returns how many entries were left.
 */
async function rewriteReady(
  file: string,
  json: unknown,
  target: RewriteTarget,
  entries: RewrittenEntry[],
  print: (line: string) => void,
): Promise<number> {
  const servers = (json as Record<string, Record<string, { env?: unknown }>>)[target.section] ?? {};
  let engine: Promise<SandboxEngine> | undefined;
  const ready: RewrittenEntry[] = [];
  let left = 0;
  try {
    for (const entry of entries) {
      print(`  checking ${entry.key}: its profile, its image, its tools (listed in a read-only sandbox), its approval`);
      const clientEnv = { ...stringValues(servers[entry.key]?.env), ...entry.addEnv };
      const answer = await importReadiness(entry.profile, clientEnv, () => (engine ??= engineReady()));
      if (answer.ready) {
        ready.push(entry);
        continue;
      }
      left += 1;
      print(`  left ${entry.key} as it was: ${answer.reason}; ${answer.fix}`);
    }
  } finally {
    if (engine) await closeEngine(await engine);
  }
  if (ready.length === 0) return left;
  // The listing took a while: a config the client changed meanwhile is not written over.
  if (JSON.stringify(readJson(file)) !== JSON.stringify(json)) {
    throw new HintboxError(`import: --rewrite: ${file} changed while its entries were checked; not rewritten`);
  }
  const rewritten = rewriteOrRefuse(json, target, ready);
  const backup = keepBackup(file);
  writeFileAtomic(file, rewritten, statSync(file).mode & 0o777);
  print(`  rewrote ${file}: ${ready.map((e) => e.key).join(', ')} now run hintbox (the original: ${backup})`);
  return left;
}

/** Where --rewrite writes: the client config's servers section, and how it starts hintbox. */
interface RewriteTarget {
  section: 'mcpServers' | 'servers';
  launch: HintboxLaunch;
}

/** The rewritten config's text, or the one line why not (nothing written). */
function rewriteOrRefuse(json: unknown, { section, launch }: RewriteTarget, entries: RewrittenEntry[]): string {
  try {
    return configText(rewriteClientConfig(json as Record<string, unknown>, section, entries, launch));
  } catch (error) {
    if (error instanceof RewriteError) throw new UsageError(`import: --rewrite: ${error.message}; nothing written`);
    throw error;
  }
}

/** The string values of a client entry's env (what the client passes to the process it starts). */
function stringValues(env: unknown): Record<string, string> {
  if (typeof env !== 'object' || env === null) return {};
  return Object.fromEntries(
    Object.entries(env).filter((pair): pair is [string, string] => typeof pair[1] === 'string'),
  );
}

function readJson(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`import: cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new UsageError(
      `import: ${file} is not JSON (comments and trailing commas are not read): ${(error as Error).message}`,
    );
  }
}

/**
 * The loader's problems with a draft, as if written at `target`; variables the client passes
 * stand in. A mount source from a variable that is not set yet has no stand-in (no made-up path
 * is real): that the variable is unset is expected then; when it is set, its path is checked.
 */
function checkDraft(draft: ProfileDraft, target: string, text: string): ProfileProblem[] {
  const vars: Record<string, string | undefined> = { ...processVariables(), CWD: process.cwd() };
  const unset = draft.mounts.map((m) => m.variable !== undefined && vars[m.variable] === undefined);
  const unsetSources = new Set(unset.flatMap((isUnset, index) => (isUnset ? [`mounts[${index}].source`] : [])));
  const noStandIn = new Set(draft.mounts.filter((_, index) => unset[index]).map((m) => m.variable));
  for (const name of draft.hostVariables) if (!noStandIn.has(name)) vars[name] ??= PLACEHOLDER;
  try {
    loadProfile(target, { text, vars });
    return [];
  } catch (error) {
    if (error instanceof ProfileError) return error.problems.filter((p) => !unsetSources.has(p.path));
    throw error;
  }
}

/** This hintbox as a client starts it: its bin (absolute, links resolved), or node with it. */
function hintboxLaunch(): HintboxLaunch {
  const bin = realpathSync(path.resolve(process.argv[1] ?? ''));
  try {
    accessSync(bin, constants.X_OK);
    return { command: bin, args: [] };
  } catch {
    return { command: process.execPath, args: [bin] };
  }
}

/** Whether `file` is a symbolic link (false when it does not exist). */
function isSymlink(file: string): boolean {
  return lstatSync(file, { throwIfNoEntry: false })?.isSymbolicLink() === true;
}

/** Copies a file beside itself (the config, an edited profile), byte for byte, under a name no earlier backup has. */
function keepBackup(file: string): string {
  const first = `${file}.hintbox-backup`;
  const stamp = isoTime(Date.now()).replace(/[:.]/g, '-');
  for (const candidate of [first, `${first}-${stamp}`, `${first}-${stamp}-${process.pid}`]) {
    try {
      copyFileSync(file, candidate, constants.COPYFILE_EXCL);
      return candidate;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  throw new HintboxError(`import: cannot keep a backup of ${file}: every backup name is taken`);
}
