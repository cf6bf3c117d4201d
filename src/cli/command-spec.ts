import type { ParseArgsConfig } from 'node:util';

/**
 * One `hintbox <command>`: its `--help` text, its options (as `node:util` parseArgs takes them)
 * and what it does with the parsed arguments, returning the exit code. Each command's file
 * exports one; `main.ts` maps the command names to them.
 */
export interface CommandSpec {
  help: string;
  options: NonNullable<ParseArgsConfig['options']>;
  run(args: { positionals: string[]; values: Record<string, unknown> }): Promise<number>;
}
