import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { lockFilePath, lockedTool, readLockFile } from '../approvals/lock-file.js';
import { pinTool } from '../policy/tool-pin.js';
import { HintboxSession } from '../session/hintbox-session.js';
import { knownTools } from '../session/session-setup.js';
import { monotonicMs } from '../util/clock.js';
import { ENVIRONMENT_VARIABLES } from '../config/environment.js';
import { builtinVariables, profileVariables } from '../profile/load-profile.js';
import { PACKAGE_ROOT } from '../util/package-root.js';
import { didYouMean } from '../util/did-you-mean.js';
import { UsageError } from '../util/hintbox-error.js';
import { CLIENTS, clientConfig, clientEntry, type ClientName } from './client-entry.js';
import { cliLog, engineReady, profileArg } from './common.js';
import type { CommandSpec } from './command-spec.js';

const HELP = `Usage: hintbox install <profile> [--client NAME] [--rebuild]

Gets a profile ready so that "hintbox run" starts in seconds, not inside an MCP client's
initialize (which clients time out): builds the image its server runs in — resolving an npm or
PyPI package into the package lock beside the profile, building hintbox's server bases, seeding
Debian from its archive where no registry is reachable (minutes the first time; progress on
stderr) —, then starts the server once in the strictest sandbox (read-only mounts, no network)
to list its tools, and keeps them, so that run starts the sandboxes they plan alongside its
discovery. Images whose inputs have not changed are kept.

It approves nothing. It prints how many of the tools the lock file approves, the next step
("hintbox approve <profile> --all" to review and approve them), and the entry for each MCP
client's config (${Object.values(CLIENTS)
  .map((c) => c.title)
  .join(', ')}), in the client's own format, so that it starts as it did here
whatever folder and environment the client starts it with: this hintbox's bin and the profile
by absolute paths, and an env with the variables the profile read and their values now (a
variable whose default is the current folder, as \${WORKSPACE:-\${CWD}}, pinned to this folder;
a secret-looking name, such as *_TOKEN, gets a placeholder to fill in, never its value).

Options:
  --client NAME  print only that client's entry, on stdout (the rest goes to stderr):
                 ${Object.keys(CLIENTS).join(', ')}
  --rebuild      build even when the image looks current
  -h, --help     this help`;

export const installCommand: CommandSpec = {
  help: HELP,
  options: { rebuild: { type: 'boolean' }, client: { type: 'string' } },
  async run({ positionals, values }) {
    const client = clientArg(values.client);
    const profile = profileArg('install', positionals);
    const lockFile = lockFilePath(profile.file);
    const locked = readLockFile(lockFile, profile.name); // a malformed lock file stops it before anything starts
    const engine = await engineReady();
    const started = monotonicMs();
    cliLog.info(`installing ${profile.name}: its image ${profile.server.image}, then a listing of its tools`);
    await using session = await HintboxSession.open({
      profile,
      engine,
      log: cliLog,
      startAll: false,
      knownTools: knownTools(),
      ...(values.rebuild === true ? { rebuildImages: true } : {}),
    });
    // With --client, stdout is the entry alone (to paste or redirect); the report goes to stderr.
    const out = (line: string): void => void (client ? process.stderr : process.stdout).write(line + '\n');
    const states = session.tools.map((tool) => {
      const approved = locked && lockedTool(locked, tool.name);
      return !approved ? 'new' : approved.sha256 === pinTool(tool).hash ? 'approved' : 'changed';
    });
    const count = (state: string): number => states.filter((s) => s === state).length;
    out(`${profile.name}: image ${profile.server.image} is ready (${Math.round((monotonicMs() - started) / 1000)} s)`);
    out(
      `${profile.name}: ${session.tools.length} tool(s) listed: ${count('approved')} approved in ${lockFile}, ` +
        `${count('changed')} changed since approved, ${count('new')} never approved`,
    );
    if (count('approved') < session.tools.length) {
      out(`next: hintbox approve ${profile.file} --all   (shows each definition; review and commit the lock file)`);
    }
    const { entry, withheld } = installedEntry(profile.file);
    for (const { name, placeholder } of withheld) {
      cliLog.warn(
        `the entry's env has ${placeholder} for ${name}: hintbox does not print a secret; put its value there`,
      );
    }
    if (!PACKAGE_ROOT.split(path.sep).includes('node_modules')) {
      cliLog.warn(
        `this hintbox runs from a checkout (${PACKAGE_ROOT}): the entry starts it there; install it (npm install --global) for one that does not move`,
      );
    }
    if (client) {
      process.stdout.write(JSON.stringify(clientConfig(client, profile.name, entry), null, 2) + '\n');
      return 0;
    }
    for (const [name, { title, file }] of Object.entries(CLIENTS) as [ClientName, (typeof CLIENTS)[ClientName]][]) {
      out(`\n${title} (${file}):`);
      out(JSON.stringify(clientConfig(name, profile.name, entry), null, 2));
    }
    return 0;
  },
};

/** `--client`: one of {@link CLIENTS}, or none. */
function clientArg(value: unknown): ClientName | undefined {
  if (value === undefined) return undefined;
  const names = Object.keys(CLIENTS);
  if (typeof value === 'string' && names.includes(value)) return value as ClientName;
  throw new UsageError(
    `install: --client: expected one of ${names.join(', ')}, got ${JSON.stringify(value)}${didYouMean(typeof value === 'string' ? value : '', names)}`,
  );
}

/** The entry that starts this hintbox (the bin it was started as) on the profile, as install saw it. */
function installedEntry(profileFile: string): ReturnType<typeof clientEntry> {
  // The bin by the path it was started as (a global install's bin/hintbox link, which an update keeps), made absolute.
  const bin = path.resolve(process.argv[1] ?? 'hintbox');
  return clientEntry({
    bin,
    profile: profileFile,
    tree: parse(readFileSync(profileFile, 'utf8')) as unknown,
    vars: profileVariables(),
    builtins: Object.keys(builtinVariables()),
    ownVariables: ENVIRONMENT_VARIABLES.map((v) => v.name),
    nodePath: process.execPath,
  });
}
