import type Docker from 'dockerode';
import { LABEL_CLASS, LABEL_OWNER_HOST, LABEL_OWNER_PID } from '../sandbox-labels.js';
import { removeContainer } from './remove-container.js';

/**
 * The network of open sandboxes (`network: open`, the grant's `bridge`). Not the engine's
 * default bridge, where every open sandbox of every session and server would meet (and could read
 * what another listens on): a bridge of the hintbox process's own, with traffic between its
 * containers off (`enable_icc=false`), so no sandbox reaches another, of its own session or any
 * other. One per process, not per session: each bridge takes one of the engine's address pools,
 * and Docker's default pools hold about 30 in all. Docker keeps bridges apart from each other,
 * so other processes' sandboxes, the default bridge's containers and egress proxies are not
 * reachable either; the way out (NAT through the host) is as on the default bridge, and so is the
 * host itself: its services on every address (and ports published by containers) answer, those on
 * 127.0.0.1 do not. Labelled with its owner and an id of its own (no session: no session's
 * teardown removes it): removed when the engine closes, swept once its owner is dead.
 */

/** The open network's class label. */
export const OPEN_NETWORK_CLASS = 'open-network';

/** The label carrying an open network's own id (the `<id>` of `hintbox-<id>-open`). */
export const LABEL_OPEN_NETWORK = 'hintbox.open-network';

/** Docker's bridge option that drops traffic between the containers of one bridge. */
export const NO_ICC_OPTION = 'com.docker.network.bridge.enable_icc';

/** Who owns an open network: the hintbox process (its host and pid) and the network's own id. */
export interface OpenNetworkOwner {
  id: string;
  ownerHost: string;
  ownerPid: number;
}

/** The pure create options of a process's open network. */
export function openNetworkOptions(owner: OpenNetworkOwner): Docker.NetworkCreateOptions {
  return {
    Name: `hintbox-${owner.id}-open`,
    Driver: 'bridge',
    Internal: false,
    CheckDuplicate: true,
    Labels: {
      [LABEL_OPEN_NETWORK]: owner.id,
      [LABEL_CLASS]: OPEN_NETWORK_CLASS,
      [LABEL_OWNER_HOST]: owner.ownerHost,
      [LABEL_OWNER_PID]: String(owner.ownerPid),
    },
    Options: { [NO_ICC_OPTION]: 'false' },
  };
}

/**
 * Creates the open network and returns its name. Fails closed: an engine that did not keep the
 * option (so its containers could meet) gets the network removed and an error.
 */
export async function createOpenNetwork(docker: Docker, owner: OpenNetworkOwner): Promise<string> {
  const options = openNetworkOptions(owner);
  const network = await docker.createNetwork(options).catch((error: Error) => {
    throw new Error(`could not create the open sandboxes' network ${options.Name}: ${error.message}`);
  });
  const info = (await network.inspect()) as { Options?: Record<string, string> };
  if (info.Options?.[NO_ICC_OPTION] !== 'false') {
    await network.remove().catch(() => undefined);
    throw new Error(
      `the engine did not keep ${NO_ICC_OPTION}=false on network ${options.Name}: its sandboxes could reach each other, so none is started`,
    );
  }
  return options.Name;
}

/** How long `removeOpenNetwork` waits for the removals of its last containers to finish. */
const REMOVE_WAIT_MS = 15_000;

/**
 * Removes the open network when its process is done with it: first the containers still on it
 * (only its own process's sandboxes join it; their sessions' removal normally took them, and one
 * may still be under way), then the network, once the engine no longer counts an endpoint on it.
 * One already gone is fine.
 */
export async function removeOpenNetwork(docker: Docker, name: string): Promise<void> {
  const network = docker.getNetwork(name);
  const deadline = Date.now() + REMOVE_WAIT_MS;
  for (;;) {
    const info = (await network.inspect().catch(gone)) as { Containers?: Record<string, unknown> } | undefined;
    if (!info) return;
    await Promise.all(Object.keys(info.Containers ?? {}).map((id) => removeContainer(docker.getContainer(id))));
    try {
      await network.remove();
      return;
    } catch (error) {
      // 403/409: endpoints left (a removal still under way); 404: gone meanwhile.
      const status = (error as { statusCode?: number }).statusCode;
      if (status === 404) return;
      if ((status !== 403 && status !== 409) || Date.now() > deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Already gone (404) or being removed (409) is no failure here. */
function gone(error: Error & { statusCode?: number }): undefined {
  if (error.statusCode !== 404 && error.statusCode !== 409) throw error;
  return undefined;
}
