import type Docker from 'dockerode';
import type { Logger } from '../../util/logger.js';
import type { IsOwnerAlive } from '../../util/process-alive.js';
import { LABEL_OWNER_HOST, LABEL_OWNER_PID, LABEL_SESSION } from '../sandbox-labels.js';
import { removeContainer } from './remove-container.js';
import { sweepKeepFrozenGroups } from '../cgroup-freezer.js';
import os from 'node:os';

export { makeIsOwnerAlive, type IsOwnerAlive } from '../../util/process-alive.js';

/**
 * Removes the containers and networks of hintbox sessions whose owning process is gone (a run
 * killed with SIGKILL, a crash), and the empty cgroup each such process kept frozen. Those of
 * live processes are never touched. Returns the removed containers' ids.
 */
export async function sweepOrphans(docker: Docker, isOwnerAlive: IsOwnerAlive, log: Logger): Promise<string[]> {
  const containers = await docker.listContainers({ all: true, filters: { label: [LABEL_SESSION] } });
  const orphans = containers.filter(
    (c) => !isOwnerAlive(c.Labels[LABEL_OWNER_HOST], Number(c.Labels[LABEL_OWNER_PID])),
  );
  await Promise.all(
    orphans.map(async (c) => {
      await removeContainer(docker.getContainer(c.Id));
      log.info(
        `swept ${c.Names[0]?.replace(/^\//, '') ?? c.Id} (session ${c.Labels[LABEL_SESSION]} is no longer running)`,
      );
    }),
  );
  // The networks (egress proxies' of a session, the open sandboxes' of a process), once their containers are gone.
  const networks = await docker.listNetworks({ filters: { label: [LABEL_OWNER_PID] } });
  await Promise.all(
    networks
      .filter((n) => !isOwnerAlive(n.Labels?.[LABEL_OWNER_HOST], Number(n.Labels?.[LABEL_OWNER_PID])))
      .map(async (n) => {
        await removeNetwork(docker, n.Id);
        const owner = n.Labels?.[LABEL_SESSION]
          ? `session ${n.Labels[LABEL_SESSION]}`
          : `hintbox process ${n.Labels?.[LABEL_OWNER_PID]}`;
        log.info(`swept network ${n.Name} (${owner} is no longer running)`);
      }),
  );
  // The empty cgroups a killed hintbox kept frozen (cgroup-freezer.ts): this host's processes only.
  for (const group of sweepKeepFrozenGroups((pid) => isOwnerAlive(os.hostname(), pid)))
    log.info(`swept cgroup ${group} (its hintbox is no longer running)`);
  return orphans.map((c) => c.Id);
}

/** Removes every container of one session, then its networks (shutdown). */
export async function removeSession(docker: Docker, sessionId: string): Promise<number> {
  const containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_SESSION}=${sessionId}`] } });
  await Promise.all(containers.map((c) => removeContainer(docker.getContainer(c.Id))));
  const networks = await docker.listNetworks({ filters: { label: [`${LABEL_SESSION}=${sessionId}`] } });
  await Promise.all(networks.map((n) => removeNetwork(docker, n.Id)));
  return containers.length;
}

/** Removes a network; one already gone is fine. */
async function removeNetwork(docker: Docker, id: string): Promise<void> {
  await docker
    .getNetwork(id)
    .remove()
    .catch((error: { statusCode?: number }) => {
      if (error.statusCode !== 404) throw error;
    });
}
