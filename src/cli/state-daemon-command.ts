import { serveStateDaemon } from '../store/state-daemon.js';
import { cliLog } from './common.js';
import type { CommandSpec } from './main.js';
import { UsageError } from './usage-error.js';

const HELP = `Usage: hintbox state-daemon <state folder>

Internal: serves the embedded state store (PGlite) of a folder to the hintbox processes of
this machine over <folder>/state.sock. hintbox starts it when it needs it; it stops after
five minutes without clients (HINTBOX_STATE_DAEMON_IDLE seconds, if set). Its log is <folder>/state-daemon.log.`;

export const stateDaemonCommand: CommandSpec = {
  help: HELP,
  options: {},
  async run({ positionals }) {
    if (positionals.length !== 1) throw new UsageError('state-daemon: expected the state folder');
    const log = cliLog.child('state');
    const { openLockedPglite } = await import('../store/pglite-state-store.js');
    let release: (() => Promise<void>) | undefined;
    const idle = Number(process.env.HINTBOX_STATE_DAEMON_IDLE);
    const daemon = await serveStateDaemon({
      dir: positionals[0] as string,
      log,
      ...(idle > 0 ? { idleMs: idle * 1000 } : {}),
      openDatabase: async (dir) => {
        const opened = await openLockedPglite(dir);
        release = opened.release;
        return opened.adapter;
      },
    });
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void daemon.stop());
    await daemon.stopped;
    await release?.();
    return 0;
  },
};
