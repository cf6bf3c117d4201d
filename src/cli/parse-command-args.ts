import { parseArgs } from 'node:util';
import { didYouMean } from '../util/did-you-mean.js';
import { UsageError } from '../util/hintbox-error.js';
import type { CommandSpec } from './command-spec.js';

/** The options every command takes besides its own. */
const COMMON_OPTIONS = { help: { type: 'boolean', short: 'h' }, verbose: { type: 'boolean' } } as const;

/**
 * A command's arguments, parsed strictly. What is wrong is said in one line in hintbox's words,
 * never Node's parser's: `install: unknown option --rebiuld (did you mean --rebuild?)`.
 */
export function parseCommandArgs(
  name: string,
  spec: Pick<CommandSpec, 'options'>,
  args: string[],
): { positionals: string[]; values: Record<string, unknown> } {
  const options: CommandSpec['options'] = { ...spec.options, ...COMMON_OPTIONS };
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    const flags = Object.entries(options).flatMap(([long, o]) => [`--${long}`, ...(o.short ? [`-${o.short}`] : [])]);
    const unknown = /^Unknown option '([^']+)'/.exec(message)?.[1];
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && unknown !== undefined) {
      const flag = unknown.split('=')[0] ?? unknown;
      const takes = flags.includes(flag) ? ` (${flag} takes no value)` : didYouMean(flag, flags);
      throw new UsageError(`${name}: unknown option ${unknown}${takes}; see hintbox ${name} --help`);
    }
    const missing = /^Option '(-[^ ']+)(?:, (-[^ ']+))? <value>' argument missing/.exec(message);
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && missing) {
      throw new UsageError(`${name}: ${missing[2] ?? missing[1]} needs a value; see hintbox ${name} --help`);
    }
    const noValue = /^Option '(-[^ ']+)(?:, (-[^ ']+))?' does not take an argument/.exec(message);
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && noValue) {
      throw new UsageError(`${name}: ${noValue[2] ?? noValue[1]} takes no value; see hintbox ${name} --help`);
    }
    throw new UsageError(`${name}: ${message.split('. ')[0]}; see hintbox ${name} --help`);
  }
}
