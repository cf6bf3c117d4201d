import type { EgressHost } from '../../policy/egress-hosts.js';
import type { EgressRequest } from '../sandbox-engine.js';

/**
 * The configuration of one egress proxy (Squid): what one sandbox class may reach. Pure.
 *
 * Order of the rules: only the class's own network may use the proxy; an entry given by address
 * is allowed as given; then every request whose destination resolves into an address no sandbox
 * may reach (loopback, link-local and cloud metadata, private and unique-local ranges, the
 * engine's gateways and this host's own addresses) is denied, whatever its name; then the
 * entries by name; everything else is denied. Squid checks `dst` on the addresses it will
 * connect to, so a listed name that resolves to a private address is refused too.
 */

/** Destinations no sandbox may reach unless an entry names them by address. */
export const ALWAYS_DENIED: readonly string[] = [
  '0.0.0.0/8', // "this network"
  '127.0.0.0/8', // loopback
  '10.0.0.0/8', // RFC 1918
  '172.16.0.0/12',
  '192.168.0.0/16',
  '100.64.0.0/10', // carrier-grade NAT (RFC 6598): often a cloud's internal network
  '169.254.0.0/16', // link-local, cloud metadata (169.254.169.254)
  '::/128',
  '::1/128',
  '::ffff:0:0/96', // IPv4-mapped: the IPv4 rules above apply to these too
  'fc00::/7', // unique local (ULA), fd00:ec2::254 (EC2 metadata) among them
  'fe80::/10', // link-local
];

/** The proxy's port inside its container. */
export const SQUID_PORT = 3128;
/** The first word of each access log line hintbox reads back (see `parseSquidLogLine`). */
const LOG_TAG = 'hintbox-egress';

export interface SquidConfigInput {
  hosts: readonly EgressHost[];
  /** The subnet(s) of the class's internal network: the only clients the proxy serves. */
  clients: readonly string[];
  /** Addresses of the engine's gateways and of this host (denied as /32 or /128). */
  hostAddresses: readonly string[];
}

export function squidConfig({ hosts, clients, hostAddresses }: SquidConfigInput): string {
  const lines = [
    '# Written by hintbox for one sandbox class; see src/engine/docker/squid-config.ts.',
    `http_port ${SQUID_PORT}`,
    'pid_filename none',
    'cache deny all',
    'cache_mem 0 MB',
    'coredump_dir /tmp',
    'shutdown_lifetime 0 seconds',
    'via off',
    'forwarded_for delete',
    'httpd_suppress_version_string on',
    'cache_log stdio:/dev/stderr',
    `logformat hintbox ${LOG_TAG} %Ss %>Hs %rm %>rd %>rP`,
    'access_log stdio:/dev/stdout logformat=hintbox',
    `acl hintbox_clients src ${clients.join(' ')}`,
    `acl hintbox_denied dst ${[...ALWAYS_DENIED, ...hostAddresses.map(asHostCidr)].join(' ')}`,
  ];
  const byAddress: string[] = [];
  const byName: string[] = [];
  hosts.forEach((host, i) => {
    const acl = `hintbox_host_${i}`;
    if (host.kind === 'name') lines.push(`acl ${acl} dstdomain ${host.name}`);
    else if (host.kind === 'subdomains') lines.push(`acl ${acl} dstdom_regex -i \\.${escapeRegex(host.suffix)}$`);
    else lines.push(`acl ${acl} dst ${asHostCidr(host.address)}`);
    lines.push(`acl ${acl}_port port ${host.port}`);
    (host.kind === 'ipv4' || host.kind === 'ipv6' ? byAddress : byName).push(`http_access allow ${acl} ${acl}_port`);
  });
  lines.push(
    'http_access deny !hintbox_clients',
    ...byAddress,
    'http_access deny hintbox_denied',
    ...byName,
    'http_access deny all',
    'icp_access deny all',
    'htcp_access deny all',
  );
  return lines.join('\n') + '\n';
}

/** `hintbox-egress TCP_DENIED 403 CONNECT example.com 443` → the entry; other lines → undefined. */
export function parseSquidLogLine(line: string): EgressRequest | undefined {
  const match = new RegExp(`^${LOG_TAG} (\\S+) (\\d{3}|-) (\\S+) (\\S+) (\\d+|-)\\s*$`).exec(line.trim());
  if (!match) return undefined;
  const [, status = '', code = '', method = '', host = '', port = ''] = match;
  // NONE_…: the proxy did not even take it (a malformed request): not let through either.
  const denied = status.includes('DENIED') || code === '403' || status.startsWith('NONE');
  const defaultPort = method === 'CONNECT' ? 443 : 80;
  return { allowed: !denied, method, host, port: port === '-' ? defaultPort : Number(port) };
}

function asHostCidr(address: string): string {
  return address.includes('/') ? address : address.includes(':') ? `${address}/128` : `${address}/32`;
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
