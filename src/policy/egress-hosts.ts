/**
 * The hosts a sandbox may reach through hintbox's egress proxy, as the profile names them:
 * `host:port`, where host is a DNS name (`api.github.com`), a wildcard for the subdomains of
 * one (`*.githubusercontent.com`: not the name itself), an IPv4 address, or an IPv6 address in
 * brackets. A port is always given: an entry opens one port of one host. Pure.
 */

export type EgressHost =
  | { kind: 'name'; name: string; port: number }
  /** `*.example.com`: `suffix` is `example.com`; matches `a.example.com`, `a.b.example.com`, never `example.com`. */
  | { kind: 'subdomains'; suffix: string; port: number }
  | { kind: 'ipv4' | 'ipv6'; address: string; port: number };

const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const NAME = new RegExp(`^(?:${LABEL}\\.)*${LABEL}$`);

/** Parses one entry; the error says what is wrong with it. Names are lower-cased. */
export function parseEgressHost(entry: string): EgressHost | { error: string } {
  const match = /^(.*):(\d{1,5})$/.exec(entry);
  if (!match) return { error: `expected host:port, such as api.example.com:443 (got ${JSON.stringify(entry)})` };
  const [, rawHost = '', rawPort = ''] = match;
  const port = Number(rawPort);
  if (port < 1 || port > 65535) return { error: `port ${rawPort} is not between 1 and 65535` };
  if (rawHost.startsWith('[') && rawHost.endsWith(']')) {
    const address = rawHost.slice(1, -1).toLowerCase();
    return isIpv6(address) ? { kind: 'ipv6', address, port } : { error: `${rawHost} is not an IPv6 address` };
  }
  if (/^[\d.]+$/.test(rawHost)) {
    return isIpv4(rawHost) ? { kind: 'ipv4', address: rawHost, port } : { error: `${rawHost} is not an IPv4 address` };
  }
  const host = rawHost.toLowerCase();
  if (host.startsWith('*.')) {
    const suffix = host.slice(2);
    // No top-level domain is all digits: a suffix that ends so (`*.2.3.4`) would match addresses by their text.
    return NAME.test(suffix) && suffix.includes('.') && !/(^|\.)\d+$/.test(suffix)
      ? { kind: 'subdomains', suffix, port }
      : { error: `${rawHost}: a wildcard is "*." before a domain of at least two labels (*.example.com)` };
  }
  if (host.length > 253 || !NAME.test(host)) return { error: `${rawHost} is not a host name` };
  return { kind: 'name', name: host, port };
}

/** Parses entries that passed the profile's check (a bad one throws). */
export function parseEgressHosts(entries: readonly string[]): EgressHost[] {
  return entries.map((entry) => {
    const parsed = parseEgressHost(entry);
    if ('error' in parsed) throw new Error(parsed.error);
    return parsed;
  });
}

/** The entry as hintbox writes it back (lower-case, one form). */
export function formatEgressHost(host: EgressHost): string {
  switch (host.kind) {
    case 'name':
      return `${host.name}:${host.port}`;
    case 'subdomains':
      return `*.${host.suffix}:${host.port}`;
    case 'ipv4':
      return `${host.address}:${host.port}`;
    case 'ipv6':
      return `[${host.address}]:${host.port}`;
  }
}

/**
 * Does a request to `host` (a name or an address, as the client sent it) and `port` match an
 * entry? Names match exactly or as subdomains; an address matches only an entry by address.
 */
export function matchesEgressHost(entry: EgressHost, host: string, port: number): boolean {
  if (entry.port !== port) return false;
  const h = host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  switch (entry.kind) {
    case 'name':
      return h === entry.name;
    case 'subdomains':
      return h.endsWith(`.${entry.suffix}`);
    default:
      return h === entry.address;
  }
}

function isIpv4(text: string): boolean {
  const parts = text.split('.');
  return parts.length === 4 && parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255 && !/^0\d/.test(p));
}

function isIpv6(text: string): boolean {
  if (!/^[0-9a-f:]+$/.test(text) || !text.includes(':')) return false;
  const halves = text.split('::');
  if (halves.length > 2) return false;
  const groups = halves.flatMap((half) => (half === '' ? [] : half.split(':')));
  if (groups.some((g) => g.length === 0 || g.length > 4)) return false;
  return halves.length === 2 ? groups.length < 8 : groups.length === 8;
}
