import { HintboxConsole } from '../console/console-server.js';
import { announceSharedConsole, readSharedConsole, sharedApprovalsOf } from '../console/shared-console.js';
import { hintboxEnvironment } from '../config/environment.js';
import { UsageError } from '../util/hintbox-error.js';
import type { CommandSpec } from './command-spec.js';
import { cliLog, consolePortArg } from './common.js';

const HELP = `Usage: hintbox console [--port PORT]

Serves hintbox's console on 127.0.0.1 (a random port, or PORT) until stopped (Ctrl-C), and
prints its link on stderr. Unlike the console of "hintbox run --console", which ends with its
run, this one outlives the runs: a run started with --console while it runs leaves its
confirmations here. So a client that exits after each call (a script, Inspector's CLI) can be
used: its call is denied with the link of its page; the person answers there, after that run
is gone; the same call (same server, caller, tool, definition and arguments) made again within
5 minutes, by any run, runs once (or is refused once, when the person declined).

The confirmations are kept in the state folder (console/ beside the audit log), never where a
sandbox can reach. The audit pages read the audit log as for a run's console.

Options:
  --port PORT  listen on that port (default: a random free one)
  -h, --help   this help`;

export const consoleCommand: CommandSpec = {
  help: HELP,
  options: { port: { type: 'string' } },
  async run({ positionals, values }) {
    if (positionals.length > 0) throw new UsageError('console: takes no arguments (see hintbox console --help)');
    const port = consolePortArg('console', values.port);
    const { stateDir, auditDir } = hintboxEnvironment();
    const running = readSharedConsole(stateDir);
    if (running) throw new UsageError(`console: one runs already at ${running.origin} (pid ${running.pid})`);
    let hub: HintboxConsole;
    try {
      hub = await HintboxConsole.start({
        log: cliLog,
        auditDir,
        ...(port !== undefined ? { port } : {}),
        store: (origin, secret) => sharedApprovalsOf(stateDir, origin, secret),
      });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      throw new UsageError(
        code === 'EADDRINUSE' ? `console: --port ${port}: the port is in use` : `console: ${(error as Error).message}`,
      );
    }
    const withdraw = announceSharedConsole(stateDir, { origin: hub.origin, pid: process.pid, secret: hub.secret });
    cliLog.info(`console: ${hub.link} (open it in a browser; the link is the key: do not share it)`);
    cliLog.info('console: runs started with --console leave their confirmations here; Ctrl-C stops it');
    const signal = await new Promise<string>((resolve) => {
      for (const name of ['SIGTERM', 'SIGINT'] as const) process.once(name, () => resolve(name));
    });
    withdraw();
    await hub.close();
    cliLog.info(`console: stopped (${signal})`);
    return 0;
  },
};
