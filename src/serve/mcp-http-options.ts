import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DenialSink } from '../audit/denial-recorder.js';
import type { Logger } from '../util/logger.js';
import type { RequestSite, SiteRefusal } from '../util/request-site.js';
import type { Access, Authenticator } from './authenticator.js';
import type { ClientSession } from './client-session.js';
import type { ServerState } from './server-readiness.js';

/** What `hintbox serve`'s HTTP endpoint (`McpHttpServer`) is given. */

export interface McpHttpServerOptions {
  /** The servers by name (profile names). */
  servers: readonly string[];
  /** Serve every server at `/mcp` too (`--one-endpoint`): `openSession` is asked for {@link COMBINED}. */
  combined?: boolean;
  /**
   * Who may use what (bearer tokens, OAuth). Without, every request is let in (serve refuses to
   * listen beyond loopback then).
   */
  auth?: Authenticator;
  /**
   * Opens a session of `server` for a new client (its gateway not yet connected); `access` is
   * what its credentials earned (null without an authenticator): its tags limit the tools served.
   */
  openSession(server: string, access: Access | null): Promise<ClientSession>;
  /** Where refusals go (401, 403 and the like): written down within a budget per address (`denial-recorder.ts`). */
  denials: DenialSink;
  /** Answers `/metrics` (it checks its own access); without it `/metrics` is 404. */
  metrics?(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /**
   * A client's session with no request for this long (and none in flight, no stream open) is
   * closed: a client that vanished without ending it. Default {@link DEFAULT_IDLE_MS}.
   */
  idleTimeoutMs?: number;
  /**
   * The most sessions one caller (its subject and client; without credentials, everyone) may
   * have open at once: each may hold sandboxes (`clients: separate`). A session at `/mcp` counts
   * one for each server behind it (each is a session of that server). Default
   * {@link DEFAULT_MAX_SESSIONS}.
   */
  maxSessionsPerCaller?: number;
  /**
   * The names and origins the operator allows besides serve's own address (a proxy's, a port
   * published from a container). Default: serve's own address only.
   */
  site?: RequestSite;
  /** Told of each request refused for its `Host` or `Origin` (metrics count them). */
  refused?(refusal: SiteRefusal): void;
  /** Whether every server is ready (`verified`: `/readyz?verified`), and each one's state (`server-readiness.ts`). */
  ready(verified: boolean): { ready: boolean; servers: Record<string, ServerState> };
  log: Logger;
}

/** Sessions one caller may have open at once; a client session idle this long is closed (30 minutes). */
export const DEFAULT_MAX_SESSIONS = 64;
export const DEFAULT_IDLE_MS = 30 * 60_000;
