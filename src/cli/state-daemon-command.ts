import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import os from 'node:os';
import { serveStateDaemon } from '../store/state-daemon.js';
import type { Logger } from '../util/logger.js';
import { cliLog } from './common.js';
import type { CommandSpec } from './main.js';
import { UsageError } from './usage-error.js';

const HELP = `Usage: hintbox state-daemon <state folder>
       hintbox state-daemon --create <state folder>

Internal: serves the embedded state store (PGlite) of a folder to the hintbox processes of
this machine over <folder>/state.sock. hintbox starts it when it needs it; it stops after
five minutes without clients (HINTBOX_STATE_DAEMON_IDLE seconds, if set). Its log is <folder>/state-daemon.log.

--create  only create the folder's database, then exit (the daemon runs this in a process of
          its own before serving a new folder).`;

/**
 * Creates a new folder's database in a process of its own. Creating it (initdb) leaves far
 * more WebAssembly memory in use than opening it (measured: 800 against 325 MB resident), and
 * that memory stays with the process (closing the instance and a full GC do not give it back),
 * while a daemon lives for minutes or hours. If the child fails, the daemon creates the
 * database itself, as before.
 */
function createInChildProcess(folder: string): void {
  const cli = process.argv[1];
  if (!cli) return;
  // No timeout: killed in the middle, initdb would leave a folder that no daemon can open.
  spawnSync(process.execPath, [cli, 'state-daemon', '--create', folder], { stdio: 'ignore' });
}

/**
 * Sets the nice value of every thread of this process: on Linux a priority is a thread's, and
 * V8's helper threads (GC, compilers) are already running. Threads started later inherit it.
 */
function lowerPriority(nice: number, log: Logger): void {
  let threads: number[];
  try {
    threads = readdirSync('/proc/self/task').map(Number);
  } catch {
    threads = [0]; // no /proc: the calling thread
  }
  for (const thread of threads) {
    try {
      os.setPriority(thread, nice);
    } catch (error) {
      log.warn(`could not lower the state daemon's CPU priority (thread ${thread}): ${(error as Error).message}`);
    }
  }
}

/** How much lower than its starter the daemon runs once its database is open (nice). */
export const STATE_DAEMON_NICENESS = 10;

export const stateDaemonCommand: CommandSpec = {
  help: HELP,
  options: { create: { type: 'boolean' } },
  async run({ positionals, values }) {
    if (positionals.length !== 1) throw new UsageError('state-daemon: expected the state folder');
    const log = cliLog.child('state');
    const { openLockedPglite, pgliteDataExists } = await import('../store/pglite-state-store.js');
    const folder = positionals[0] as string;
    if (values.create) {
      const { adapter, release } = await openLockedPglite(folder);
      await adapter.close();
      await release();
      return 0;
    }
    if (!pgliteDataExists(folder)) createInChildProcess(folder);
    let release: (() => Promise<void>) | undefined;
    const idle = Number(process.env.HINTBOX_STATE_DAEMON_IDLE);
    const daemon = await serveStateDaemon({
      dir: folder,
      log,
      ...(idle > 0 ? { idleMs: idle * 1000 } : {}),
      openDatabase: async (dir) => {
        const opened = await openLockedPglite(dir);
        release = opened.release;
        return opened.adapter;
      },
    });
    // Once the database is open, the daemon's work is background work: the audit journal's
    // batches trail the calls, nothing waits for them. At normal priority a batch (a few ms of
    // CPU) held a core that a call's next hop was woken onto, and it waited (p99 at one call in
    // flight 3.9–4.2 ms; 3.0–3.3 ms at nice 10, measured side by side). Not lower than 10: under
    // a full machine the store must still keep up, or intents wait for it (the journal's bound).
    lowerPriority(Math.min(os.getPriority() + STATE_DAEMON_NICENESS, 19), log);
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void daemon.stop());
    await daemon.stopped;
    await release?.();
    return 0;
  },
};
