import {
  diffPins,
  formatPinChanges,
  INSTRUCTIONS_PIN,
  pinInstructions,
  pinTool,
  type ToolPin,
} from '../policy/tool-pin.js';
import { HintboxSession } from '../session/hintbox-session.js';
import { openStateStore, stateLocation } from '../store/open-state-store.js';
import type { ApprovedPin } from '../store/state-store.js';
import { renderServerLines, renderServerText } from '../util/render-server-text.js';
import { cliLog, dockerReady, profileArg } from './common.js';
import type { CommandSpec } from './main.js';
import { UsageError } from './usage-error.js';

const HELP = `Usage: hintbox approve <profile> (<tool>... | --instructions | --all)

Starts the server once in the strictest sandbox to list its tools, shows for each named tool
what differs from its approved definition (or the whole definition when it was never
approved), and approves the current definition: its pin (a SHA-256 of name, title,
description, schemas and annotations with defaults filled in) is stored, and "hintbox run"
serves and routes it again. Changed annotations are planned again at the next run.

The server's instructions (the text its initialize answer gives the client for its model) are
approved the same way: shown, pinned, and passed on by "hintbox run" only while unchanged.
Server text is shown with control characters, line separators and bidi overrides escaped.

Options:
  --instructions  approve the server's instructions
  --all           approve every tool the server lists now, and its instructions
  -h, --help      this help`;

export const approveCommand: CommandSpec = {
  help: HELP,
  options: { all: { type: 'boolean' }, instructions: { type: 'boolean' } },
  async run({ positionals, values }) {
    const [file, ...names] = positionals;
    const profile = profileArg('approve', file === undefined ? [] : [file]);
    if (!values.all && !values.instructions && names.length === 0) {
      throw new UsageError('approve: name the tools to approve, or --instructions, or --all');
    }
    const location = stateLocation();
    await using store = await openStateStore(location);
    const docker = await dockerReady();
    await using session = await HintboxSession.open({ profile, docker, log: cliLog, startAll: false });
    const listed = new Map(session.tools.map((t) => [t.name, t]));
    const unknown = names.filter((n) => !listed.has(n));
    if (unknown.length)
      throw new UsageError(
        `approve: ${profile.name} lists no tool ${unknown.map(renderServerText).join(', ')} (it lists ${[...listed.keys()].join(', ')})`,
      );
    const out = (line: string): void => void process.stdout.write(line + '\n');
    /** Shows what differs from the approved pin and approves `pin`, unless it is the approved one. */
    const approve = async (
      key: string,
      label: string,
      pin: ToolPin,
      whole: { title: string; lines: () => string[] },
      changes: (approved: ApprovedPin) => string[],
    ): Promise<void> => {
      const approved = await store.pins.get(profile.name, key);
      if (approved?.hash === pin.hash) {
        out(`${label}: already approved (${pin.hash.slice(0, 12)})`);
        return;
      }
      out(approved ? `${label}: changed since it was approved:` : `${label}: never approved; ${whole.title}:`);
      for (const line of approved ? changes(approved) : whole.lines()) out(`  ${line}`);
      await store.pins.approve({ server: profile.name, tool: key, pin, approvedBy: 'hintbox approve' });
      out(`${label}: approved (${pin.hash.slice(0, 12)})`);
    };
    for (const name of values.all ? [...listed.keys()] : names) {
      const pin = pinTool(listed.get(name)!);
      await approve(
        name,
        name,
        pin,
        // JSON escapes C0 controls; the rest (C1, U+2028, bidi, …) is rendered.
        { title: 'its definition', lines: () => renderServerLines(JSON.stringify(pin.definition, null, 2)) },
        (approved) => formatPinChanges(diffPins(approved.definition, pin.definition)).map(renderServerText),
      );
    }
    const instructions = pinInstructions(session.instructions);
    if (values.all || values.instructions) {
      if (session.instructions === undefined && !(await store.pins.get(profile.name, INSTRUCTIONS_PIN))) {
        out('instructions: the server sends none');
      } else {
        await approve(
          INSTRUCTIONS_PIN,
          'instructions',
          instructions,
          { title: 'their text', lines: () => instructionLines(session.instructions) },
          (approved) => [
            'before:',
            ...instructionLines(approved.definition.description),
            'now:',
            ...instructionLines(session.instructions),
          ],
        );
      }
    } else if (session.instructions !== undefined) {
      const approved = await store.pins.get(profile.name, INSTRUCTIONS_PIN);
      if (approved?.hash !== instructions.hash) {
        out(
          `instructions: ${approved ? 'changed since approved' : 'not approved'}; withheld from clients until "hintbox approve ${profile.file} --instructions"`,
        );
      }
    }
    cliLog.info(`pins stored in ${location.describe}`);
    return 0;
  },
};

/** Instructions as fenced, rendered lines (they are the server's text, not hintbox's). */
function instructionLines(text: unknown): string[] {
  if (typeof text !== 'string') return ['(none)'];
  return renderServerLines(text).map((line) => `│ ${line}`);
}
