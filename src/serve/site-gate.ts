import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../util/logger.js';
import type { RequestSite, SiteRefusal } from '../util/request-site.js';
import { reply } from './http-messages.js';

/**
 * serve's first check of every request: one of another host or site ({@link RequestSite}) is
 * refused before anything of it is read, and counted; it is logged the first time of each kind
 * only (a page can send them by the thousand), not audited.
 */
export class SiteGate {
  /** The kinds of refusal logged once already. */
  private readonly logged = new Set<SiteRefusal['kind']>();
  /**
   * Per connection, the last `Host`, `Origin` and `Sec-Fetch-Site` admitted: the decision
   * depends on nothing else (those headers, the address and port the connection reached, this
   * gate's rules), so the next request of a kept-alive connection with the same three is
   * admitted without deciding again. Any other value is decided in full.
   */
  private readonly admitted = new WeakMap<Socket, SiteHeaders>();

  constructor(
    private readonly site: RequestSite,
    private readonly log: Logger,
    /** Told of each refusal (metrics count them). */
    private readonly refused?: (refusal: SiteRefusal) => void,
  ) {}

  /** Whether the request may go on; when not, it has been answered. */
  admit(req: IncomingMessage, res: ServerResponse): boolean {
    const { headers, socket } = req;
    const seen = this.admitted.get(socket);
    const host = headers.host;
    const origin = headers.origin;
    const site = headers['sec-fetch-site'];
    if (seen !== undefined && seen.host === host && seen.origin === origin && seen.site === site) return true;
    const refusal = this.site.refusal(headers, socket);
    if (!refusal) {
      this.admitted.set(socket, { host, origin, site });
      return true;
    }
    this.refused?.(refusal);
    if (!this.logged.has(refusal.kind)) {
      this.logged.add(refusal.kind);
      const hint =
        refusal.kind === 'host'
          ? " (a proxy's name: --allowed-host)"
          : ' (a browser client of yours: --allowed-origin)';
      this.log.warn(
        `serve: ${refusal.status} for ${req.socket.remoteAddress ?? 'an unknown address'}: ${refusal.reason}${hint}; further refusals are counted in /metrics only`,
      );
    }
    reply(res, refusal.status, { error: refusal.reason }, { Connection: 'close' });
    return false;
  }
}

/** The request headers a site decision reads. */
interface SiteHeaders {
  host: string | undefined;
  origin: string | undefined;
  site: string | string[] | undefined;
}
