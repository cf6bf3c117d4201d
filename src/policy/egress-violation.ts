import { matchesEgressHost, type EgressHost } from './egress-hosts.js';

/**
 * Whether a request through a sandbox's egress proxy broke `openWorldHint: false`: a closed-world
 * tool may reach only the server's backend, so a request outside it (allowed by the proxy or not)
 * is a violation — when every tool that could have made it is closed-world (the calls in flight
 * in the sandbox, else the tools planned there). Pure; returns the violation's text or undefined.
 */
export function egressViolation(input: {
  request: { host: string; port: number; allowed: boolean };
  /** The tools with calls in flight in the sandbox, else those planned in it. */
  tools: readonly string[];
  closedWorld: (tool: string) => boolean;
  backend: readonly EgressHost[];
}): string | undefined {
  const { request, tools } = input;
  if (tools.length === 0 || !tools.every(input.closedWorld)) return undefined;
  if (input.backend.some((entry) => matchesEgressHost(entry, request.host, request.port))) return undefined;
  const target = `${request.host.includes(':') ? `[${request.host}]` : request.host}:${request.port}`;
  return `openWorldHint: asked the egress proxy for ${target}, outside the server's backend (${request.allowed ? 'allowed by network.allow' : 'refused'})`;
}
