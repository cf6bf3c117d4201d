import os from 'node:os';
import { connectDocker } from '../sandbox/docker-connection.js';
import { makeIsOwnerAlive, sweepOrphans } from '../sandbox/sweep.js';
import { cliLog } from './common.js';
import type { CommandSpec } from './main.js';

const HELP = `Usage: hintbox sweep

Removes the containers of hintbox sessions whose hintbox process is no longer running on this
host (labels hintbox.session, hintbox.owner-host, hintbox.owner-pid). Every hintbox start does
this too. Containers of live sessions and of other hosts are left alone.`;

export const sweepCommand: CommandSpec = {
  help: HELP,
  options: {},
  async run() {
    const docker = await connectDocker();
    const removed = await sweepOrphans(docker.docker, makeIsOwnerAlive(os.hostname()), cliLog);
    cliLog.info(`swept ${removed.length} container(s)`);
    return 0;
  },
};
