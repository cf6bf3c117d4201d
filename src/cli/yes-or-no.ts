import { createInterface } from 'node:readline';
import { UsageError } from '../util/hintbox-error.js';

/**
 * How a command that writes what a person decides (the approvals) gets the person's yes:
 * `--yes` given it beforehand (scripts, CI); else a terminal to ask y/N on. Without either it
 * refuses before it starts anything: a script that did not say yes approves nothing.
 */
export type Consent = 'given' | 'ask';

/** `given` with --yes, `ask` on a terminal; else a one-line UsageError saying to pass --yes. */
export function consentOf(command: string, yes: boolean, interactive: boolean): Consent {
  if (yes) return 'given';
  if (interactive) return 'ask';
  throw new UsageError(
    `${command}: no terminal to ask y/N on (stdin is not a TTY): pass --yes to ${command} what it shows without asking`,
  );
}

/**
 * Asks `question` on the terminal and reads one line: true only for y or yes (any case).
 * End of input, or anything else, is no.
 */
export async function askYesOrNo(
  question: string,
  input: NodeJS.ReadableStream = process.stdin,
  output: NodeJS.WritableStream = process.stderr,
): Promise<boolean> {
  const lines = createInterface({ input, output, terminal: false });
  try {
    output.write(question);
    const answer = await new Promise<string>((resolve) => {
      lines.once('line', resolve);
      lines.once('close', () => resolve(''));
    });
    return /^\s*y(es)?\s*$/i.test(answer);
  } finally {
    lines.close();
  }
}
