#!/usr/bin/env -S MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=131072 MALLOC_TRIM_THRESHOLD_=131072 node --expose-gc --max-semi-space-size=1 --optimize-for-size --bytecode-old-age=1
// A 1 MB young generation and V8's optimize-for-size mode keep hintbox's resident memory low (docs/benchmarks.md).
// So does `--bytecode-old-age=1`: a function's bytecode not run through one full collection is
// dropped (V8's default waits five; a function run again is compiled again), so the start's code
// (profile, zod schemas, the engine's setup), ~0.6 MB of bytecode the calls never run, goes
// after the first busy seconds; no CPU per call was measured for it (issue 34). And so does one
// malloc arena (glibc): without it each of Node's threads (V8's compiler and GC
// workers) keeps freed memory in an arena of its own. A fixed mmap threshold of 128 KB gives the
// big blocks of V8's compilers back to the system when freed (glibc's threshold otherwise grows
// past them and they stay in the arena: ~2 MB), at a few system calls per thousand calls.
// `--expose-gc` lets `hintbox run` collect, compacting, once its client is quiet (idle-collection.ts):
// a burst's garbage otherwise stays resident until V8's memory reducer, ~8 s later. No cap on the
// old generation: a 64 MB line of small JSON values parses to ~1.4 GB, and a cap below that would
// let one message of a sandboxed server abort hintbox (a 1 GB cap saved 1.1 MB; review24).
// `hintbox serve`, one process for every client, leaves the size mode as it starts (util/size-mode.ts).
// `env -S` sets these for the bin as a client launches it (the installed bin, dist/hintbox.mjs);
// other C libraries ignore them.
import { ENVIRONMENT_VARIABLES, hintboxEnvironment } from '../config/environment.js';
import { VERSION } from '../version.js';
import { cliLog as log, cliLogFormat, verboseLog } from './common.js';
import { parseCommandArgs } from './parse-command-args.js';
import { didYouMean } from '../util/did-you-mean.js';
import type { CommandSpec } from './command-spec.js';
import { exitCodeOf, UsageError } from '../util/hintbox-error.js';

const MAIN_HELP = `hintbox ${VERSION}: run MCP servers in Docker sandboxes that make their tool annotations true

Usage: hintbox <command> [options]

Commands:
  run <profile>           serve the profile's MCP server on stdio, each tool in its sandbox
  serve <folder>          serve every profile of a folder over streamable HTTP (/mcp/<name>)
  install <profile>       build what the profile needs, list its tools once (so run starts in
                          seconds), and print the entry for an MCP client's config
  plan <profile>          show which sandbox each tool gets, and what is enforced
  approve <profile> ...   approve tool definitions into the lock file: named tools, or --all
  audit [verify|ship]     list recorded calls (filters: --server --tool --tag --decision …),
                          check the audit log's hash chains, or copy it into Postgres
  images build <profile>  build the images a profile needs
  images build --hintbox  build hintbox's own image (hintbox/hintbox:<version>, for serve)
  import <file>           write a profile per server of a client config (Claude Desktop,
                          Cursor, VS Code) or an MCP registry server.json; --rewrite
                          points the client config at hintbox
  console                 serve the console that outlives the runs (for clients that exit
                          between calls; runs with --console leave confirmations there)
  demo                    run the filesystem server on a scratch folder and show what happens
  sweep [<profile>]       remove containers and networks (and, with a database profile, roles) of dead runs
  db prepare <profile>    revoke the PUBLIC grants that would undo the database roles' limits

Options:
  -h, --help              help for a command: hintbox <command> --help
  -v, --version           print the version
  --verbose               with any command: the debug log too (every line of an image build;
                          without it, a build shows its steps only)

Environment:
${ENVIRONMENT_VARIABLES.map((v) => `  ${v.name.padEnd(24)}${v.meaning}\n${' '.repeat(26)}default: ${v.default}`).join('\n')}

Exit codes: 0 ok, 1 failure, 2 bad usage or bad profile.`;

/**
 * Each command's module, loaded only when it is the one run: `hintbox run` never evaluates
 * serve's, import's, the audit reader's … code (a resident process holds less memory).
 */
const COMMANDS: Record<string, () => Promise<CommandSpec>> = {
  run: async () => (await import('./run-command.js')).runCommand,
  serve: async () => (await import('./serve-command.js')).serveCommand,
  install: async () => (await import('./install-command.js')).installCommand,
  plan: async () => (await import('./plan-command.js')).planCommand,
  images: async () => (await import('./images-command.js')).imagesBuildCommand,
  import: async () => (await import('./import-command.js')).importCommand,
  approve: async () => (await import('./approve-command.js')).approveCommand,
  audit: async () => (await import('./audit-command.js')).auditCommand,
  console: async () => (await import('./console-command.js')).consoleCommand,
  demo: async () => (await import('./demo-command.js')).demoCommand,
  sweep: async () => (await import('./sweep-command.js')).sweepCommand,
  db: async () => (await import('./db-command.js')).dbCommand,
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '-h' || name === '--help' || name === 'help') {
    process.stdout.write(MAIN_HELP + '\n');
    return name === undefined ? 2 : 0;
  }
  if (name === '-v' || name === '--version') {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  const load = COMMANDS[name];
  if (!load) {
    throw new UsageError(`unknown command "${name}"${didYouMean(name, Object.keys(COMMANDS))} (see hintbox --help)`);
  }
  const command = await load();
  const parsed = parseCommandArgs(name, command, rest);
  if (parsed.values.verbose === true) verboseLog();
  if (parsed.values.help) {
    process.stdout.write(command.help + '\n');
    return 0;
  }
  // hintbox's variables are checked before any command starts: a bad one is bad usage.
  hintboxEnvironment();
  return command.run({ positionals: parsed.positionals, values: parsed.values });
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    // Bad usage is the operator's to fix: its message as is (a JSON log keeps to JSON). A failure goes to the log.
    const code = exitCodeOf(error);
    if (code === 2 && cliLogFormat === 'text') {
      process.stderr.write(`${(error as Error).message}\n`);
    } else {
      log.error(error instanceof Error ? error.message : String(error));
      if (error instanceof Error) log.debug(error.stack ?? '');
    }
    process.exitCode = code;
  },
);
