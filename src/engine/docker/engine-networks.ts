import type { EngineKind } from './docker-connection.js';

/**
 * Which sandbox networks an engine of the Docker API can be trusted with. Egress (`network:
 * {allow}`) puts a sandbox on an internal engine network whose only other member is the egress
 * proxy; an open sandbox (`network: open`) goes on a bridge with traffic between its containers
 * off. Docker keeps both promises (an internal network has no route out and, with
 * `inhibit_ipv4`, no address of the host). Podman 4's compatible API does not: an internal
 * network's gateway is the host's own address, `inhibit_ipv4` is ignored, and a container on it
 * reaches services of the host; `enable_icc` is not kept. So on Podman only network-less
 * sandboxes start. Pure.
 */

/** The grant's network, as the plan names it. */
export type GrantNetwork = 'none' | 'egress' | 'bridge';

/** Why a sandbox with this network may not start on this engine (one line), or undefined when it may. */
export function networkRefusal(kind: EngineKind, network: GrantNetwork, sandboxId: string): string | undefined {
  if (kind !== 'podman' || network === 'none') return undefined;
  const what = network === 'egress' ? 'its egress (network by host name)' : 'its open network';
  return (
    `sandbox ${sandboxId}: ${what} is refused on Podman, whose networks do not keep a sandbox from the host ` +
    "(an internal network's gateway is the host); run it on Docker, or give its tools no network (network: none)"
  );
}
