/** Whether an address only listens on this machine (kept with the check of a request's `Host`). */
export { isLoopbackHost } from '../util/request-site.js';

/** A server's name from a URL path segment; undefined for one that is not valid percent-encoding (a 404, not a 500). */
export function pathName(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
