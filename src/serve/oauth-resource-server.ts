import type { IncomingHttpHeaders } from 'node:http';
import { createRemoteJWKSet, errors, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { bearerChallenge, bearerToken, type AuthResult, type Authenticator, type Denial } from './authenticator.js';
import { COMBINED } from './combined-endpoint.js';
import { accessOfScopes, callerOfClaims, scopesFor, scopesOfClaims, type OAuthConfig } from './oauth-config.js';
import { pathName } from './serve-address.js';

/**
 * `hintbox serve --oauth`: each server is an OAuth 2.1 resource server as MCP's authorization
 * spec describes. A request carries an access token (a JWT) that an authorization server issued;
 * hintbox checks it (with `jose`) and nothing more:
 *
 * - the signature, against the issuer's published keys (its JWKS, fetched and cached), with an
 *   asymmetric algorithm of the settings (never `none`, never an HMAC);
 * - `iss` is the issuer; `aud` is the server's resource identifier (`<resource>/mcp/<name>`) or
 *   an audience of the settings; `exp` is required, `exp`/`nbf`/`iat` hold within the clock
 *   tolerance (`iat` not after now: jose alone checks it only with a maximum age); `sub` and the
 *   client (`client_id`, else `azp`) name the caller, as two fields (a part that cannot be
 *   recorded whole refuses the token: never dropped, never merged);
 * - its scopes give the server (else 403 `insufficient_scope`), and the tags they give limit the
 *   tools of the sessions it opens.
 *
 * Not checked: whether the token was revoked since (no introspection); each token is taken at
 * its word until it expires. The token itself goes nowhere: the MCP servers behind hintbox never
 * see it (the spec forbids passing it through).
 *
 * Protected resource metadata (RFC 9728) is served to anyone at
 * `/.well-known/oauth-protected-resource/mcp/<name>` (each server's) and at
 * `/.well-known/oauth-protected-resource` (the whole of serve), and every 401 names the
 * server's in `WWW-Authenticate: Bearer resource_metadata="…"`. The combined endpoint (`/mcp`,
 * `--one-endpoint`) is a resource of its own, `<resource>/mcp`, with its metadata at
 * `/.well-known/oauth-protected-resource/mcp` (every scope): a token issued for it passes there
 * for each server its scopes give, and nowhere else.
 */

const METADATA_PATH = '/.well-known/oauth-protected-resource';

export interface OAuthResourceServerOptions {
  config: OAuthConfig;
  /** The servers (profile names) served now (a SIGHUP may change them). */
  servers: () => readonly string[];
  /** The issuer's keys; default: its JWKS (`jwksUri`), fetched when first needed and cached. */
  keys?: JWTVerifyGetKey;
  /** Whether `/mcp` serves every server (`--one-endpoint`): it is then a resource of its own. */
  combined?: boolean;
  /** The clock that `exp` and `nbf` are checked against; default the system's. */
  now?: () => Date;
}

export class OAuthResourceServer implements Authenticator {
  readonly description: string;
  private readonly config: OAuthConfig;
  private readonly keys: JWTVerifyGetKey;

  constructor(private readonly options: OAuthResourceServerOptions) {
    this.config = options.config;
    this.description = `OAuth (issuer ${this.config.issuer})`;
    this.keys =
      options.keys ??
      createRemoteJWKSet(new URL(this.config.jwksUri), {
        timeoutDuration: 5_000,
        // A key the set lacks makes it fetch again, at most this often (a rotation).
        cooldownDuration: 30_000,
        cacheMaxAge: 10 * 60_000,
      });
  }

  /** A server's resource identifier: the audience its tokens are issued for. */
  resourceOf(server: string): string {
    return `${this.config.resource}/mcp${server === COMBINED ? '' : `/${encodeURIComponent(server)}`}`;
  }

  /** Where a server's protected resource metadata is (RFC 9728 §3.1: the path after the well-known one). */
  metadataUrlOf(server: string): string {
    return `${this.config.resource}${METADATA_PATH}${new URL(this.resourceOf(server)).pathname}`;
  }

  async authenticate(headers: IncomingHttpHeaders, server: string, endpoint?: string): Promise<AuthResult> {
    const token = bearerToken(headers.authorization);
    if (token === undefined) {
      const given = headers.authorization !== undefined;
      return { allowed: false, status: 401, reason: given ? 'not a bearer token' : 'no token', caller: null };
    }
    let claims: Record<string, unknown>;
    const now = this.options.now?.() ?? new Date();
    try {
      ({ payload: claims } = await jwtVerify(token, this.keys, {
        issuer: this.config.issuer,
        audience: [
          this.resourceOf(server),
          ...(endpoint === COMBINED && this.options.combined ? [this.resourceOf(COMBINED)] : []),
          ...(this.config.audience ?? [this.config.resource]),
        ],
        algorithms: this.config.algorithms,
        clockTolerance: this.config.clockToleranceSeconds,
        requiredClaims: ['exp', 'sub'],
        currentDate: now,
      }));
    } catch (error) {
      return { allowed: false, status: 401, reason: rejection(error), caller: null, error: 'invalid_token' };
    }
    // jose checks `iat` against the clock only with a maximum age; a token from the future is
    // refused all the same (a forged clock, or one minted to outlive its key's rotation).
    if (typeof claims.iat === 'number' && claims.iat > now.getTime() / 1000 + this.config.clockToleranceSeconds) {
      const reason = rejection(new errors.JWTClaimValidationFailed('iat in the future', claims, 'iat'));
      return { allowed: false, status: 401, reason, caller: null, error: 'invalid_token' };
    }
    const caller = callerOfClaims(claims);
    if ('refused' in caller) {
      return { allowed: false, status: 401, reason: caller.refused, caller: null, error: 'invalid_token' };
    }
    const access = accessOfScopes(this.config, scopesOfClaims(claims), server);
    if (access === undefined) {
      return {
        allowed: false,
        status: 403,
        reason: `no scope of the token gives ${server}`,
        caller,
        error: 'insufficient_scope',
        scope: scopesFor(this.config, server).join(' '),
      };
    }
    return { allowed: true, caller, ...access };
  }

  challenge(denial: Denial, server: string): string {
    return bearerChallenge({
      resource_metadata: this.metadataUrlOf(server),
      error: denial.error,
      ...(denial.error ? { error_description: denial.reason } : {}),
      scope: denial.scope ?? (denial.status === 401 ? this.scopesOf(server).join(' ') : undefined),
    });
  }

  /** RFC 9728 protected resource metadata: each server's, and one for the whole of serve. */
  document(pathname: string): unknown {
    if (pathname === METADATA_PATH) return this.metadata(this.config.resource, Object.keys(this.config.scopes));
    if (pathname === `${METADATA_PATH}/mcp` && this.options.combined) {
      return this.metadata(this.resourceOf(COMBINED), this.scopesOf(COMBINED), 'every server');
    }
    const match = /^\/\.well-known\/oauth-protected-resource\/mcp\/([^/]+)$/.exec(pathname);
    const server = match ? pathName(match[1] as string) : undefined;
    if (server === undefined || !this.options.servers().includes(server)) return undefined;
    return this.metadata(this.resourceOf(server), scopesFor(this.config, server), server);
  }

  /** The scopes that give a server; at the combined endpoint, every scope. */
  private scopesOf(server: string): string[] {
    return server === COMBINED ? Object.keys(this.config.scopes) : scopesFor(this.config, server);
  }

  private metadata(resource: string, scopes: string[], server?: string): unknown {
    return {
      resource,
      authorization_servers: [this.config.issuer],
      scopes_supported: scopes,
      bearer_methods_supported: ['header'],
      resource_name: server ? `hintbox: ${server}` : 'hintbox',
    };
  }
}

/** Why a token was refused, in words for the audit log: never its text or its claims' values. */
function rejection(error: unknown): string {
  if (error instanceof errors.JWTExpired) return 'the token has expired';
  if (error instanceof errors.JWTClaimValidationFailed) {
    const why: Record<string, string> = {
      iss: 'the token was issued by another issuer',
      aud: 'the token was issued for another audience',
      nbf: 'the token is not valid yet',
      iat: 'the token was issued in the future',
      sub: 'the token names no subject',
      exp: 'the token has no expiry',
    };
    return why[error.claim] ?? `the token's "${error.claim}" claim is refused`;
  }
  if (error instanceof errors.JOSEAlgNotAllowed) return 'the token is signed with an algorithm not accepted';
  if (error instanceof errors.JWKSNoMatchingKey) return 'the token is signed by a key the issuer does not publish';
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'the token has a bad signature';
  if (error instanceof errors.JWKSTimeout) return "the issuer's keys could not be fetched (timeout)";
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid) return 'not a well-formed signed JWT';
  if (error instanceof errors.JOSEError) return `the token is refused (${error.code})`;
  // Not jose's own: the JWKS request failed (refused, reset, not JSON).
  return `the issuer's keys could not be fetched (${error instanceof Error ? error.message : String(error)})`;
}
