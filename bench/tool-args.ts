/**
 * The flags of the bench's smaller tools (ab-steady, memory-breakdown, per-call-counts, …):
 * node's `parseArgs`, with `-h`/`--help` printing the tool's usage (its flags and their
 * defaults; its doc comment says more) and a flag it does not know as one line on stderr and
 * exit 2, not a stack trace. `npm run bench` has its own (bench-options.ts).
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** The usage text: the summary, then each flag with its default. Pure. */
export function toolUsage(tool: string, summary: string, config: ParseArgsConfig): string {
  const flags = Object.entries(config.options ?? {}).map(([name, option]) => {
    const flag = option.type === 'boolean' ? `--${name}` : `--${name} VALUE`;
    const fallback = option.default === undefined ? '' : `(default ${String(option.default)})`;
    return `  ${flag.padEnd(24)}${fallback}`.trimEnd();
  });
  return [`usage: node --import tsx bench/${tool}.ts [options]`, '', summary, '', ...flags, '  -h, --help'].join('\n');
}

/** `parseArgs(config)` of the process's arguments; prints the usage and exits on `--help` or a bad flag. */
export function toolArgs<T extends ParseArgsConfig>(
  tool: string,
  summary: string,
  config: T,
): ReturnType<typeof parseArgs<T>> {
  const args = config.args ?? process.argv.slice(2);
  if (args.includes('-h') || args.includes('--help')) {
    process.stdout.write(toolUsage(tool, summary, config) + '\n');
    process.exit(0);
  }
  try {
    // The same config with the same arguments: parseArgs's result type is the config's.
    return parseArgs({ ...config, args }) as ReturnType<typeof parseArgs<T>>;
  } catch (error) {
    // parseArgs says "Unknown option '--x'. …" and more: the first sentence is the line.
    process.stderr.write(`${tool}: ${(error as Error).message.split('. ')[0]} (--help lists the flags)\n`);
    process.exit(2);
  }
}
