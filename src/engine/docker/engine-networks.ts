import type { EngineKind } from './docker-connection.js';

/**
 * Which sandbox networks an engine of the Docker API can be trusted with. Egress (`network:
 * {allow}`) needs none: the sandbox has no network at all and reaches its class's proxy through
 * the gate's relay (a Unix socket; see egress-proxy.ts), on every engine. An open sandbox
 * (`network: open`) goes on a bridge with traffic between its containers off. Docker keeps that
 * promise; Podman 4's compatible API does not (`enable_icc` is not kept, and its networks are
 * not isolated from the host: an internal network's gateway is the host's own address,
 * `inhibit_ipv4` is ignored, and a container on it reaches services of the host). So on Podman
 * an open sandbox is refused. Pure.
 */

/** The grant's network, as the plan names it. */
export type GrantNetwork = 'none' | 'egress' | 'bridge';

/** Why a sandbox with this network may not start on this engine (one line), or undefined when it may. */
export function networkRefusal(kind: EngineKind, network: GrantNetwork, sandboxId: string): string | undefined {
  if (kind !== 'podman' || network !== 'bridge') return undefined;
  return (
    `sandbox ${sandboxId}: its open network is refused on Podman, whose networks do not keep a sandbox from the host ` +
    "(an internal network's gateway is the host); run it on Docker, or list its hosts (network: {allow: [...]})"
  );
}
