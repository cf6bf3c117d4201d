import os from 'node:os';
import { databaseAdminUrl } from '../database/database-env.js';
import { RoleProvisioner } from '../database/role-provisioner.js';
import { sweepSocketDirs } from '../util/sweep-socket-dirs.js';
import { sweepPreviewDirs } from '../sandbox/preview.js';
import { makeIsOwnerAlive } from '../util/process-alive.js';
import { cliLog, connectEngine, profileArg } from './common.js';
import type { CommandSpec } from './command-spec.js';

const HELP = `Usage: hintbox sweep [<profile>] [--engine KIND]

Removes the containers of hintbox sessions whose hintbox process is no longer running on this
host (labels hintbox.session, hintbox.owner-host, hintbox.owner-pid). Every hintbox start does
this too. Containers of live sessions and of other hosts are left alone. With --engine
kubernetes (or HINTBOX_ENGINE=kubernetes): the Pods, Services and NetworkPolicies of such
sessions in the namespace of the current kubeconfig context (docs/engines.md). Also removes the
folders a killed run left in the temporary folder: database relay and sandbox gate sockets
(hintbox-pg-*, hintbox-io-*: nobody listens in them, older than a minute, this user's) and
preview copies.

With a profile that has a database section, also drops the Postgres roles (hintbox_…) of such
sessions on that Postgres server, using the admin URL in the variable named by
database.adminUrlEnv (every hintbox run of that profile does this too). Roles record their
owner's host and pid in their comment; roles of live sessions and of other hosts stay.`;

export const sweepCommand: CommandSpec = {
  help: HELP,
  options: { engine: { type: 'string' } },
  async run({ positionals, values }) {
    const profile = positionals.length > 0 ? profileArg('sweep', positionals) : undefined;
    const isOwnerAlive = makeIsOwnerAlive(os.hostname());
    const engine = await connectEngine(cliLog, values.engine);
    const removed = await engine.sweepOrphans(cliLog);
    cliLog.info(`swept ${removed.length} sandbox(es) of sessions that are gone`);
    const dirs = [...sweepSocketDirs(), ...(await sweepPreviewDirs())];
    if (dirs.length) cliLog.info(`swept ${dirs.length} socket or preview folder(s) of runs that are gone`);
    if (profile?.database) {
      const adminUrl = databaseAdminUrl({ file: profile.file, database: profile.database });
      await using provisioner = await RoleProvisioner.connect({ adminUrl, section: profile.database, log: cliLog });
      const dropped = await provisioner.sweepRoles(isOwnerAlive);
      cliLog.info(`swept ${dropped.length} database role(s)`);
    }
    return 0;
  },
};
