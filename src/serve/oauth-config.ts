import { z } from 'zod';
import { normalizeTag } from '../policy/tool-tags.js';
import type { Caller } from '../util/caller-identity.js';
import { parseSettings, readSettingsFile } from './settings-file.js';
import { isLoopbackHost } from './serve-address.js';

/**
 * The OAuth resource-server settings of `hintbox serve --oauth FILE` (YAML or JSON), checked
 * once when serve starts, every problem one line (`file: field: message`, exit 2), and the pure
 * rules applied to a verified token's claims: which scopes give which servers and tags, and who
 * the caller is. No I/O but reading the file; the token's signature is checked elsewhere
 * (`oauth-resource-server.ts`).
 *
 * ```yaml
 * issuer: https://auth.example.com/realms/platform
 * jwksUri: https://auth.example.com/realms/platform/protocol/openid-connect/certs
 * resource: https://hintbox.example.com
 * scopes:
 *   mcp:filesystem: { servers: [filesystem] }
 *   mcp:k8s-read: { servers: [k8s], tags: [read] }
 * ```
 */

/** Signature algorithms with a public key: a JWKS can check nothing else (no `none`, no HS*). */
export const ASYMMETRIC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;

/** An https URL, or http on this machine (a test's or a sidecar's authorization server). */
const endpointUrl = z.string().superRefine((text, ctx) => {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    ctx.addIssue({ code: 'custom', message: `expected a URL, got ${JSON.stringify(text)}` });
    return;
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(host))) {
    ctx.addIssue({ code: 'custom', message: 'expected an https URL (http only on a loopback address)' });
  }
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    ctx.addIssue({ code: 'custom', message: 'expected a URL without query, fragment or credentials' });
  }
});

/** RFC 6749's scope-token: printable ASCII but space, `"` and `\`. */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

const tagList = z
  .array(z.string().transform(normalizeTag).pipe(z.string().min(1, 'expected a tag name')))
  .min(1, 'expected at least one tag (leave tags out for every tool)');

export const ScopeGrantSchema = z
  .object({
    /** The servers (profile names) the scope gives. Default: every server. */
    servers: z.array(z.string().min(1)).min(1, 'expected at least one server (leave servers out for all)').optional(),
    /** The tool tags it gives on those servers. Default: every tool. */
    tags: tagList.optional(),
  })
  .strict();

export const OAuthConfigSchema = z
  .object({
    /** The authorization server's issuer identifier: the token's `iss` must be exactly this. */
    issuer: endpointUrl,
    /** Where the issuer's public keys are (its JWKS). */
    jwksUri: endpointUrl,
    /**
     * This serve's public base URL, as clients reach it (behind a proxy, the proxy's): each
     * server's resource identifier is `<resource>/mcp/<name>`, and the protected resource
     * metadata names it.
     */
    resource: endpointUrl
      .refine((text) => URL.canParse(text) && new URL(text).pathname === '/', {
        message: 'expected a base URL without a path (https://host[:port]): each server is at /mcp/<name> below it',
      })
      .transform((text) => new URL(text).origin),
    /**
     * Audiences accepted besides each server's own resource identifier (an authorization server
     * that issues one audience for the whole API). Default: `resource` itself.
     */
    audience: z.array(z.string().min(1)).min(1).optional(),
    /** The signature algorithms accepted. Default: every asymmetric one. */
    algorithms: z
      .array(z.enum(ASYMMETRIC_ALGORITHMS))
      .min(1)
      .default([...ASYMMETRIC_ALGORITHMS]),
    /** Seconds of clock skew allowed for `exp`, `nbf` and `iat`. Default 30. */
    clockToleranceSeconds: z.number().int().min(0).max(300).default(30),
    /** What each scope gives; a token's access to a server is the union of its scopes'. */
    scopes: z.record(z.string(), ScopeGrantSchema).superRefine((scopes, ctx) => {
      const names = Object.keys(scopes);
      if (names.length === 0) ctx.addIssue({ code: 'custom', message: 'expected at least one scope' });
      for (const name of names.filter((n) => !SCOPE_TOKEN.test(n))) {
        ctx.addIssue({
          code: 'custom',
          path: [name],
          message: 'expected a scope name (no spaces, quotes or backslashes)',
        });
      }
    }),
  })
  .strict();

export type OAuthConfig = z.infer<typeof OAuthConfigSchema>;
export type ScopeGrant = z.infer<typeof ScopeGrantSchema>;

/** Parses an OAuth settings file's text; throws one line per problem, `file: path: message` (exit 2). */
export function parseOAuthConfig(text: string, file: string): OAuthConfig {
  return parseSettings(text, file, OAuthConfigSchema);
}

export function loadOAuthConfig(file: string): OAuthConfig {
  return parseOAuthConfig(readSettingsFile(file, 'the OAuth settings'), file);
}

/** The servers named by some scope that are not among `servers` (a typo would lock everyone out). */
export function unknownScopeServers(config: OAuthConfig, servers: readonly string[]): string[] {
  const names = new Set(Object.values(config.scopes).flatMap((grant) => grant.servers ?? []));
  return [...names].filter((name) => !servers.includes(name));
}

/** The scopes that give something on `server`. */
export function scopesFor(config: OAuthConfig, server: string): string[] {
  return Object.entries(config.scopes)
    .filter(([, grant]) => grant.servers === undefined || grant.servers.includes(server))
    .map(([scope]) => scope);
}

/**
 * What the granted scopes give on `server`: undefined when none of them names it (a 403);
 * otherwise the union of their tags, or every tool (`tags` undefined) when one of them does not
 * limit tags. Scopes the settings do not know give nothing.
 */
export function accessOfScopes(
  config: OAuthConfig,
  granted: readonly string[],
  server: string,
): { tags?: string[] } | undefined {
  const grants = scopesFor(config, server)
    .filter((scope) => granted.includes(scope))
    .map((scope) => config.scopes[scope] as ScopeGrant);
  if (grants.length === 0) return undefined;
  if (grants.some((grant) => grant.tags === undefined)) return {};
  return { tags: [...new Set(grants.flatMap((grant) => grant.tags ?? []))] };
}

/**
 * The scopes of a token's claims: `scope` (RFC 9068, space-separated) or `scp` (a list or a
 * string, as some authorization servers write it). Anything else gives none.
 */
export function scopesOfClaims(claims: Record<string, unknown>): string[] {
  const split = (value: unknown): string[] =>
    typeof value === 'string'
      ? value.split(' ').filter((s) => s !== '')
      : Array.isArray(value)
        ? value.filter((s): s is string => typeof s === 'string')
        : [];
  return [...new Set([...split(claims.scope), ...split(claims.scp)])];
}

/** The longest subject or client id taken as a caller's (recorded whole, so refused beyond). */
export const MAX_IDENTITY = 256;

/** Characters that could start or forge a line where a caller is written (logs, pages): never in one. */
const LINE_BREAKING = /[\p{Cc}\u2028\u2029]/u;

/**
 * The caller a token names: its subject (`sub`) and the client it was issued to (`client_id`,
 * else `azp`), as two fields ({@link Caller}); or why it names no usable one. Nothing is dropped
 * or shortened: a part too long to record whole (over {@link MAX_IDENTITY} characters), empty,
 * not a string, or with control characters refuses the token, so two callers can never be
 * recorded, or served, as one.
 */
export function callerOfClaims(claims: Record<string, unknown>): Caller | { refused: string } {
  const problem = (name: string, value: unknown): string | undefined => {
    if (typeof value !== 'string' || value === '') return `the token's ${name} is not a non-empty string`;
    if (value.length > MAX_IDENTITY) return `the token's ${name} is longer than ${MAX_IDENTITY} characters`;
    if (LINE_BREAKING.test(value)) return `the token's ${name} holds control characters`;
    return undefined;
  };
  const subjectProblem = problem('subject', claims.sub);
  if (subjectProblem) return { refused: subjectProblem };
  const subject = claims.sub as string;
  const [name, client] = claims.client_id !== undefined ? ['client id', claims.client_id] : ['azp', claims.azp];
  if (client === undefined) return { subject };
  const clientProblem = problem(name, client);
  return clientProblem ? { refused: clientProblem } : { subject, client: client as string };
}
