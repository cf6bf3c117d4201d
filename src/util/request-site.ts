import type { IncomingHttpHeaders } from 'node:http';
import { isIP } from 'node:net';

/**
 * Whether an HTTP request to one of hintbox's servers on this machine (`serve`, the console)
 * comes from where it may: not from a web page that reached it through DNS rebinding (a name
 * of the attacker's that resolves to this machine: its `Host` is that name), nor from a page of
 * another site (its `Origin`, or `Sec-Fetch-Site` without one). MCP's transport specification
 * asks servers to check `Origin`; the `Host` check is what stops rebinding, where the browser
 * takes the page and the server for one origin.
 *
 * Its own address is the one the connection reached (the socket's local address and port): the
 * bound address, or with a wildcard bind (`0.0.0.0`, `::`) whichever address of the machine the
 * client used; on loopback also `localhost` with the port. Nothing else, unless the operator
 * names it ({@link SiteRules}): a proxy's public name, a port published from a container.
 *
 * Rules are checked once when made (the constructor throws on a bad one); each request is then
 * a pure function of its headers and its socket's local end.
 */

/** What the operator allows besides the server's own address. */
export interface SiteRules {
  /**
   * `Host` values allowed besides the server's own address: `NAME` (any port) or `NAME:PORT`,
   * a DNS name or an IP address (IPv6 in brackets). A request naming one may come from a page
   * of `http(s)://<that Host>`. Default none.
   */
  allowedHosts?: readonly string[];
  /** Origins (`https://app.example.com`) of pages that may use the server. Default none. */
  allowedOrigins?: readonly string[];
}

/** The local end of a request's connection (a `net.Socket` is one). */
export interface LocalEnd {
  readonly localAddress?: string | undefined;
  readonly localPort?: number | undefined;
}

/** Why a request is refused: another host (421, Misdirected Request) or another site (403). */
export interface SiteRefusal {
  status: 421 | 403;
  kind: 'host' | 'origin';
  /** One line, for the log and the response body. */
  reason: string;
}

interface AllowedHost {
  name: string;
  /** Undefined: any port. */
  port?: number;
}

/** `name` or `name:port` (IPv6 in brackets), lower case; the name part as written. */
const HOST_PATTERN = /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::(\d{1,5}))?$/;
const DNS_NAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/**
 * Whether `host` only listens on this machine. `hintbox serve` listens elsewhere only with
 * tokens: without them, anyone who reaches the port could call every server's tools.
 */
export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

/**
 * The site rules of `hintbox serve`. Its decision is a pure function of a request's `Host`,
 * `Origin` and `Sec-Fetch-Site`, the address and port the connection reached, and rules fixed
 * at construction: serve's SiteGate keeps it per connection on that ground. A decision that
 * reads anything else, or rules changed in place, must change the gate's memo with it.
 */
export class RequestSite {
  private readonly hosts: AllowedHost[];
  private readonly origins: Set<string>;

  constructor(rules: SiteRules = {}) {
    this.hosts = (rules.allowedHosts ?? []).map(parseAllowedHost);
    this.origins = new Set((rules.allowedOrigins ?? []).map(parseAllowedOrigin));
  }

  /** Whether a `Host` header names this server: its own address (and port), or an allowed name. */
  hostAllowed(host: string | undefined, local: LocalEnd): boolean {
    return this.hostKind(host, local) !== undefined;
  }

  /**
   * Whether a page of `origin` may use the server: a page of the very host the request names
   * (`http://<Host>`; `https://` too for an allowed name, behind a TLS proxy), or an allowed origin.
   */
  originAllowed(origin: string, host: string | undefined, local: LocalEnd): boolean {
    const given = origin.toLowerCase();
    if (this.origins.has(given)) return true;
    const kind = this.hostKind(host, local);
    if (kind === undefined || host === undefined) return false;
    const named = host.toLowerCase();
    return given === `http://${named}` || (kind === 'allowed' && given === `https://${named}`);
  }

  /**
   * The refusal of a request that is not for this server or not from its own pages, else
   * undefined: the `Host` first (421); then an `Origin` not its own or allowed (403), or without
   * one, a browser's `Sec-Fetch-Site` other than `same-origin` or `none` (a typed address).
   */
  refusal(headers: IncomingHttpHeaders, local: LocalEnd): SiteRefusal | undefined {
    const host = headers.host;
    if (!this.hostAllowed(host, local)) {
      return { status: 421, kind: 'host', reason: `this server does not answer to the host ${show(host)}` };
    }
    const origin = headers.origin;
    if (origin !== undefined) {
      return this.originAllowed(origin, host, local)
        ? undefined
        : { status: 403, kind: 'origin', reason: `a page of another site (${show(origin)}) may not use this server` };
    }
    const site = headers['sec-fetch-site'];
    if (site === undefined || site === 'same-origin' || site === 'none') return undefined;
    return { status: 403, kind: 'origin', reason: `a request of another site (Sec-Fetch-Site ${show(site)})` };
  }

  /** `own` for the server's own address, `allowed` for a name of the rules, else undefined. */
  private hostKind(host: string | undefined, local: LocalEnd): 'own' | 'allowed' | undefined {
    const parsed = HOST_PATTERN.exec((host ?? '').toLowerCase());
    if (!parsed) return undefined;
    const name = parsed[1] as string;
    const port = parsed[2] === undefined ? 80 : Number(parsed[2]);
    if (port === local.localPort && ownNames(local.localAddress).includes(name)) return 'own';
    const allowed = this.hosts.some(
      (entry) => entry.name === name && (entry.port === undefined || entry.port === port),
    );
    return allowed ? 'allowed' : undefined;
  }
}

/** The names of the address a connection reached: the address itself, and `localhost` on loopback. */
function ownNames(localAddress: string | undefined): string[] {
  if (localAddress === undefined) return [];
  const address = localAddress.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '').toLowerCase();
  const literal = isIP(address) === 6 ? `[${address}]` : address;
  return isLoopbackHost(address) ? [literal, 'localhost'] : [literal];
}

/** An allowed host as the operator wrote it; throws a one-line error naming it. */
export function parseAllowedHost(text: string): AllowedHost {
  const parsed = HOST_PATTERN.exec(text.toLowerCase());
  const name = parsed?.[1];
  const port = parsed?.[2] === undefined ? undefined : Number(parsed[2]);
  const bracketed = name?.startsWith('[') === true;
  const validName =
    name !== undefined &&
    (bracketed ? isIP(name.slice(1, -1)) === 6 : isIP(name) === 4 || (DNS_NAME.test(name) && !/^[\d.]+$/.test(name)));
  if (!validName || (port !== undefined && (port < 1 || port > 65535))) {
    throw new Error(
      `${JSON.stringify(text)}: expected a host name or address, optionally with :port (hintbox.example.com, 127.0.0.1:8080, [::1]:8931)`,
    );
  }
  return port === undefined ? { name } : { name, port };
}

/** An allowed origin, as browsers send it (`https://app.example.com`, no path); throws a one-line error naming it. */
export function parseAllowedOrigin(text: string): string {
  const url = URL.canParse(text) ? new URL(text) : undefined;
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.origin !== text.toLowerCase()) {
    throw new Error(
      `${JSON.stringify(text)}: expected an http(s) origin as a browser sends it (https://app.example.com, http://localhost:6274), without a path`,
    );
  }
  return url.origin;
}

/** A header's value for a message: quoted, at most 100 characters. */
function show(value: string | string[] | undefined): string {
  if (value === undefined) return '(none)';
  const text = Array.isArray(value) ? value.join(', ') : value;
  return JSON.stringify(text.length > 100 ? `${text.slice(0, 100)}…` : text);
}
