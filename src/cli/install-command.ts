import { realpathSync } from 'node:fs';
import { lockFilePath, lockedTool, readLockFile } from '../approvals/lock-file.js';
import { pinTool } from '../policy/tool-pin.js';
import { HintboxSession } from '../session/hintbox-session.js';
import { knownTools } from '../session/session-setup.js';
import { monotonicMs } from '../util/clock.js';
import { cliLog, engineReady, profileArg } from './common.js';
import type { CommandSpec } from './command-spec.js';

const HELP = `Usage: hintbox install <profile> [--rebuild]

Gets a profile ready so that "hintbox run" starts in seconds, not inside an MCP client's
initialize (which clients time out): builds the image its server runs in — resolving an npm or
PyPI package into the package lock beside the profile, building hintbox's server bases, seeding
Debian from its archive where no registry is reachable (minutes the first time; progress on
stderr) —, then starts the server once in the strictest sandbox (read-only mounts, no network)
to list its tools, and keeps them, so that run starts the sandboxes they plan alongside its
discovery. Images whose inputs have not changed are kept.

It approves nothing. It prints how many of the tools the lock file approves, the next step
("hintbox approve <profile> --all" to review and approve them), and the entry for an MCP
client's config, with absolute paths, so that it works from whatever folder the client starts in.

Options:
  --rebuild   build even when the image looks current
  -h, --help  this help`;

export const installCommand: CommandSpec = {
  help: HELP,
  options: { rebuild: { type: 'boolean' } },
  async run({ positionals, values }) {
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
    const out = (line: string): void => void process.stdout.write(line + '\n');
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
    out(`MCP client config: ${JSON.stringify(clientEntry(profile.file))}`);
    return 0;
  },
};

/** An MCP client's entry for this profile: this hintbox's bin and the profile, by absolute paths. */
export function clientEntry(profileFile: string): { command: string; args: string[] } {
  const bin = process.argv[1] ? realpathSync(process.argv[1]) : 'hintbox';
  return { command: bin, args: ['run', profileFile] };
}
