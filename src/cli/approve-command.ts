import { diffPins, formatPinChanges, pinTool } from '../policy/tool-pin.js';
import { HintboxSession } from '../session/hintbox-session.js';
import { openStateStore, stateLocation } from '../store/open-state-store.js';
import { cliLog, dockerReady, profileArg } from './common.js';
import type { CommandSpec } from './main.js';
import { UsageError } from './usage-error.js';

const HELP = `Usage: hintbox approve <profile> (<tool>... | --all)

Starts the server once in the strictest sandbox to list its tools, shows for each named tool
what differs from its approved definition (or the whole definition when it was never
approved), and approves the current definition: its pin (a SHA-256 of name, title,
description, schemas and annotations with defaults filled in) is stored, and "hintbox run"
serves and routes it again. Changed annotations are planned again at the next run.

Options:
  --all       approve every tool the server lists now
  -h, --help  this help`;

export const approveCommand: CommandSpec = {
  help: HELP,
  options: { all: { type: 'boolean' } },
  async run({ positionals, values }) {
    const [file, ...names] = positionals;
    const profile = profileArg('approve', file === undefined ? [] : [file]);
    if (!values.all && names.length === 0) throw new UsageError('approve: name the tools to approve, or --all');
    const location = stateLocation();
    await using store = await openStateStore(location);
    const docker = await dockerReady();
    await using session = await HintboxSession.open({ profile, docker, log: cliLog, startAll: false });
    const listed = new Map(session.tools.map((t) => [t.name, t]));
    const unknown = names.filter((n) => !listed.has(n));
    if (unknown.length)
      throw new UsageError(
        `approve: ${profile.name} lists no tool ${unknown.join(', ')} (it lists ${[...listed.keys()].join(', ')})`,
      );
    const out = (line: string): void => void process.stdout.write(line + '\n');
    for (const name of values.all ? [...listed.keys()] : names) {
      const pin = pinTool(listed.get(name)!);
      const approved = await store.pins.get(profile.name, name);
      if (approved?.hash === pin.hash) {
        out(`${name}: already approved (${pin.hash.slice(0, 12)})`);
        continue;
      }
      out(approved ? `${name}: changed since it was approved:` : `${name}: never approved; its definition:`);
      const lines = approved
        ? formatPinChanges(diffPins(approved.definition, pin.definition))
        : JSON.stringify(pin.definition, null, 2).split('\n');
      for (const line of lines) out(`  ${line}`);
      await store.pins.approve({ server: profile.name, tool: name, pin, approvedBy: 'hintbox approve' });
      out(`${name}: approved (${pin.hash.slice(0, 12)})`);
    }
    cliLog.info(`pins stored in ${location.describe}`);
    return 0;
  },
};
