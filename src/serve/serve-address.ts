import { isIP } from 'node:net';

/**
 * Whether `host` only listens on this machine. `hintbox serve` listens elsewhere only with
 * tokens: without them, anyone who reaches the port could call every server's tools.
 */
export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

/** A server's name from a URL path segment; undefined for one that is not valid percent-encoding (a 404, not a 500). */
export function pathName(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
