import type { EgressHost } from '../policy/egress-hosts.js';
import type { EgressRequest } from './sandbox-engine.js';

/**
 * The configuration of one egress proxy (Squid): what one sandbox class may reach. Pure.
 *
 * Order of the rules: the cache manager is refused to everyone; only its clients (see below) may
 * use the proxy, and only for plain HTTP or a CONNECT tunnel (no ftp://, cache_object://, ...);
 * an entry given by address is allowed as given; a request whose host is not listed is refused
 * by its text alone, before anything is resolved (a name no entry lists is never looked up, so
 * DNS carries nothing out); then a listed name that resolves into an address no sandbox may reach
 * (loopback, link-local and cloud metadata, private and unique-local ranges, the engine's
 * gateways and this host's own addresses) is denied; then the entries by name; everything else
 * is denied. Every name ACL has `-n`: Squid would otherwise match a request for a bare address
 * against the names by that address's reverse DNS, which whoever owns the address writes.
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
  '::/96', // unspecified (::), loopback (::1), IPv4-compatible (deprecated)
  '::ffff:0:0/96', // IPv4-mapped: the IPv4 rules above apply to these too
  'fc00::/7', // unique local (ULA), fd00:ec2::254 (EC2 metadata) among them
  'fe80::/10', // link-local
  '64:ff9b::/96', // NAT64: an IPv4 address (169.254.169.254 too) written as IPv6
  '64:ff9b:1::/48', // local-use NAT64
  '2002::/16', // 6to4: another IPv4 address in IPv6
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, and 255.255.255.255
  'ff00::/8', // IPv6 multicast
];

/** The image that runs this configuration: Debian's Squid on the server suite's base (any engine's proxy). */
export const EGRESS_PROXY_IMAGE = 'hintbox/egress-proxy:trixie';

/** The proxy's port inside its container. */
export const SQUID_PORT = 3128;
/** The first word of each access log line hintbox reads back (see `parseSquidLogLine`). */
const LOG_TAG = 'hintbox-egress';

export interface SquidConfigInput {
  hosts: readonly EgressHost[];
  /** The only clients the proxy serves: loopback (the relay) or, on Kubernetes, any (its NetworkPolicy chooses). */
  clients: readonly string[];
  /** Addresses of the engine's gateways and of this host (denied as /32 or /128). */
  hostAddresses: readonly string[];
  /**
   * Where Squid listens: `loopback` (127.0.0.1 only: the Docker/Podman proxy, reached only
   * through the gate's relay in its container) or `all` (the Kubernetes proxy Pod, reached
   * through its Service).
   */
  listen: 'loopback' | 'all';
}

export function squidConfig({ hosts, clients, hostAddresses, listen }: SquidConfigInput): string {
  const lines = [
    '# Written by hintbox for one sandbox class; see src/engine/squid-config.ts.',
    `http_port ${listen === 'loopback' ? `127.0.0.1:${SQUID_PORT}` : SQUID_PORT}`,
    'pid_filename none',
    'cache deny all',
    'cache_mem 0 MB',
    'coredump_dir /tmp',
    'shutdown_lifetime 0 seconds',
    'via off',
    'forwarded_for delete',
    'httpd_suppress_version_string on',
    'pinger_enable off',
    'cache_log stdio:/dev/stderr',
    // When the request was logged (s.ms), how long it took (ms), what came of it, what was asked.
    `logformat hintbox ${LOG_TAG} %ts.%03tu %tr %Ss %>Hs %rm %>rd %>rP`,
    'access_log stdio:/dev/stdout logformat=hintbox',
    `acl hintbox_clients src ${clients.join(' ')}`,
    // This file replaces Debian's squid.conf, so CONNECT is defined here (`manager` is built in).
    'acl CONNECT method CONNECT',
    // Squid answers a TRACE itself (Max-Forwards: 0): nothing a sandbox needs.
    'acl hintbox_trace method TRACE',
    'acl hintbox_http proto HTTP',
    `acl hintbox_denied dst ${[...ALWAYS_DENIED, ...hostAddresses.map(asHostCidr)].join(' ')}`,
  ];
  const byAddress: string[] = [];
  const byName: string[] = [];
  const listed = { names: [] as string[], suffixes: [] as string[], addresses: [] as string[] };
  hosts.forEach((host, i) => {
    const acl = `hintbox_host_${i}`;
    if (host.kind === 'name') {
      lines.push(`acl ${acl} dstdomain -n ${host.name}`);
      listed.names.push(host.name);
    } else if (host.kind === 'subdomains') {
      const regex = `\\.${escapeRegex(host.suffix)}$`;
      lines.push(`acl ${acl} dstdom_regex -n -i ${regex}`);
      listed.suffixes.push(regex);
    } else {
      lines.push(`acl ${acl} dst -n ${asHostCidr(host.address)}`);
      listed.addresses.push(asHostCidr(host.address));
    }
    lines.push(`acl ${acl}_port port ${host.port}`);
    (host.kind === 'ipv4' || host.kind === 'ipv6' ? byAddress : byName).push(`http_access allow ${acl} ${acl}_port`);
  });
  // The gate by text: a request passes it only when its host is one of the entries (any port).
  const gate: string[] = [];
  if (listed.names.length > 0) {
    lines.push(`acl hintbox_listed_names dstdomain -n ${[...new Set(listed.names)].join(' ')}`);
    gate.push('!hintbox_listed_names');
  }
  if (listed.suffixes.length > 0) {
    lines.push(`acl hintbox_listed_suffixes dstdom_regex -n -i ${[...new Set(listed.suffixes)].join(' ')}`);
    gate.push('!hintbox_listed_suffixes');
  }
  if (listed.addresses.length > 0) {
    lines.push(`acl hintbox_listed_addresses dst -n ${[...new Set(listed.addresses)].join(' ')}`);
    gate.push('!hintbox_listed_addresses');
  }
  lines.push(
    'http_access deny manager',
    'http_access deny !hintbox_clients',
    'http_access deny !hintbox_http !CONNECT',
    'http_access deny hintbox_trace',
    ...byAddress,
    gate.length > 0 ? `http_access deny ${gate.join(' ')}` : 'http_access deny all',
    'http_access deny hintbox_denied',
    ...byName,
    'http_access deny all',
    'icp_access deny all',
    'htcp_access deny all',
  );
  return lines.join('\n') + '\n';
}

/**
 * `hintbox-egress 1764633600.123 5 TCP_DENIED 403 CONNECT example.com 443` → the entry, with the
 * time the proxy had it (it logs at the end: the start is that less the time it took); other
 * lines → undefined.
 */
export function parseSquidLogLine(line: string): EgressRequest | undefined {
  const text = line.trim();
  if (!text.startsWith(`${LOG_TAG} `)) return undefined;
  // The status code is 0 when the client hung up before the answer (TCP_MISS_ABORTED 0): the
  // request still went out, so it is read like any other.
  const match = new RegExp(`^${LOG_TAG} (\\d+\\.\\d{3}) (\\d+|-) (\\S+) (\\d{1,3}|-) (\\S+) (\\S+) (\\d+|-)$`).exec(
    text,
  );
  // A line of the proxy's access log that cannot be read: a request whose target is unknown,
  // counted as refused and, for a closed-world tool, outside its backend (fail closed).
  if (!match) return { allowed: false, method: '?', host: UNREADABLE_HOST, port: 0 };
  const [, logged = '', took = '', status = '', code = '', method = '', rawHost = '', port = ''] = match;
  // NONE_…: the proxy did not even take it (a malformed request): not let through either.
  const denied = status.includes('DENIED') || code === '403' || status.startsWith('NONE');
  const defaultPort = method === 'CONNECT' ? 443 : 80;
  const endedAt = Math.round(Number(logged) * 1000);
  return {
    allowed: !denied,
    method,
    // Squid writes an IPv6 host in its brackets, escaped (%5B2001:db8::1%5D): the bare address.
    host: rawHost.replace(/^(?:\[|%5B)(.*)(?:\]|%5D)$/i, '$1'),
    port: port === '-' ? defaultPort : Number(port),
    startedAt: endedAt - (took === '-' ? 0 : Number(took)),
    endedAt,
  };
}

/** The host of a request whose log line could not be read. */
export const UNREADABLE_HOST = '(unreadable log line)';

function asHostCidr(address: string): string {
  return address.includes('/') ? address : address.includes(':') ? `${address}/128` : `${address}/32`;
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
