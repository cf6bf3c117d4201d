import type Docker from 'dockerode';
import type { SessionIdentity } from '../sandbox-engine.js';
import { LABEL_CLASS, LABEL_OWNER_HOST, LABEL_OWNER_PID, LABEL_SERVER, LABEL_SESSION } from './container-spec.js';

/**
 * The network of a session's open sandboxes (`network: open`, the grant's `bridge`). Not the
 * engine's default bridge, where every open sandbox of every session and server would meet (and
 * could read what another listens on): a bridge of the session's own, with traffic between its
 * containers off (`enable_icc=false`), so no sandbox reaches another, not even one of its own
 * session. Docker keeps bridges apart from each other, so sandboxes of other sessions, the
 * default bridge's containers and egress proxies are not reachable either; the way out (NAT
 * through the host) is as on the default bridge, and so is the host itself: its services on
 * every address (and ports published by containers) answer, those on 127.0.0.1 do not.
 * Labelled with the session and its owner: removed with the session, swept after a crash.
 */

/** A session network's class label. */
export const OPEN_NETWORK_CLASS = 'open-network';

/** Docker's bridge option that drops traffic between the containers of one bridge. */
export const NO_ICC_OPTION = 'com.docker.network.bridge.enable_icc';

/** The pure create options of a session's open network. */
export function sessionNetworkOptions(session: SessionIdentity, server: string): Docker.NetworkCreateOptions {
  return {
    Name: `hintbox-${session.sessionId}-open`,
    Driver: 'bridge',
    Internal: false,
    CheckDuplicate: true,
    Labels: {
      [LABEL_SESSION]: session.sessionId,
      [LABEL_SERVER]: server,
      [LABEL_CLASS]: OPEN_NETWORK_CLASS,
      [LABEL_OWNER_HOST]: session.ownerHost,
      [LABEL_OWNER_PID]: String(session.ownerPid),
    },
    Options: { [NO_ICC_OPTION]: 'false' },
  };
}

/**
 * Creates the session's open network and returns its name. Fails closed: an engine that did not
 * keep the option (so its containers could meet) gets the network removed and an error.
 */
export async function createSessionNetwork(docker: Docker, session: SessionIdentity, server: string): Promise<string> {
  const options = sessionNetworkOptions(session, server);
  const network = await docker.createNetwork(options).catch((error: Error) => {
    throw new Error(`could not create the network of session ${session.sessionId}: ${error.message}`);
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
