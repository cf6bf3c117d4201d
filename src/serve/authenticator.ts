import type { IncomingHttpHeaders } from 'node:http';
import type { Caller } from '../util/caller-identity.js';

/**
 * How `hintbox serve` decides who a request is and what it may use, whatever the credentials:
 * bearer tokens from a file (`--tokens`, {@link BearerTokens}) or OAuth access tokens
 * (`--oauth`, {@link OAuthResourceServer}). The HTTP endpoint asks an authenticator before it
 * reads anything else of a request, and knows nothing of tokens itself.
 */

/** What a request's credentials earn it on one server. */
export interface Access {
  /**
   * Who: a token's name, or a JWT's subject and client, as two fields. Its sessions, its cap and
   * its grants are keyed on the pair, and it is recorded with every call.
   */
  caller: Caller;
  /**
   * The tool tags it may use on that server: a session it opens serves only tools with one of
   * them (as `hintbox run --tags`). Undefined: every tool.
   */
  tags?: readonly string[];
  /**
   * At the combined endpoint (`/mcp`, `--one-endpoint`): the servers it may use there, each with
   * its tags. Undefined elsewhere.
   */
  servers?: ReadonlyMap<string, readonly string[] | undefined>;
}

/** Why a request was refused: 401 (who are you?) or 403 (not this). */
export interface Denial {
  status: 401 | 403;
  /** For the audit log and the log: never a token's text. */
  reason: string;
  /** Who it was, when the credentials said so (a 403); null otherwise. */
  caller: Caller | null;
  /** RFC 6750's error code, for the `WWW-Authenticate` answer (none for a request without credentials). */
  error?: 'invalid_request' | 'invalid_token' | 'insufficient_scope';
  /** With `insufficient_scope`: the scopes that would be enough (space-separated). */
  scope?: string;
}

export type AuthResult = ({ allowed: true } & Access) | ({ allowed: false } & Denial);

export interface Authenticator {
  /** How it is named in the log: `bearer tokens`, `OAuth (issuer …)`. */
  readonly description: string;
  /**
   * Checks a request's headers for `server` (a profile name). Never throws: a failure is a
   * denial. `endpoint` is the endpoint asked when it is not the server's own: the combined one
   * (`/mcp`, `COMBINED`), a resource of its own (OAuth: tokens issued for it pass there).
   */
  authenticate(headers: IncomingHttpHeaders, server: string, endpoint?: string): Promise<AuthResult>;
  /** The `WWW-Authenticate` header of a denial; undefined for none. */
  challenge(denial: Denial, server: string): string | undefined;
  /**
   * A document served to anyone at `pathname` (a GET without credentials: OAuth's protected
   * resource metadata); undefined when the path is not one of its own.
   */
  document?(pathname: string): unknown;
}

/** The `Bearer <token>` of an `Authorization` header; undefined when it holds no bearer token. */
export function bearerToken(authorization: string | undefined): string | undefined {
  return /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];
}

/**
 * Whether access with `tags` may use a session opened with `sessionTags`: a session stays with
 * what it was opened for, so a later request (a refreshed token with fewer scopes) must allow
 * at least as much. Undefined tags: every tool.
 */
export function coversTags(tags: readonly string[] | undefined, sessionTags: readonly string[] | undefined): boolean {
  if (tags === undefined) return true;
  if (sessionTags === undefined) return false;
  return sessionTags.every((tag) => tags.includes(tag));
}

/** {@link coversTags} for access (at the combined endpoint: every server of the session, each with its tags). */
export function coversAccess(access: Access | null, session: Access | null): boolean {
  if (!coversTags(access?.tags, session?.tags)) return false;
  if (!session?.servers) return true;
  const now = access?.servers;
  return (
    now !== undefined && [...session.servers].every(([name, tags]) => now.has(name) && coversTags(now.get(name), tags))
  );
}

/** An RFC 6750 challenge: `Bearer realm="hintbox", error="…", …`. Values are quoted strings. */
export function bearerChallenge(params: Record<string, string | undefined>): string {
  const fields = Object.entries(params)
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(([key, value]) => `${key}="${value.replace(/["\\]/g, '\\$&')}"`);
  return fields.length > 0 ? `Bearer ${fields.join(', ')}` : 'Bearer';
}
