import { timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { z } from 'zod';
import { normalizeTag } from '../policy/tool-tags.js';
import { sha256Bytes, sha256Hex } from '../util/sha256.js';
import { parseSettings, readSettingsFile, settingsProblems } from './settings-file.js';
import { bearerChallenge, bearerToken, type AuthResult, type Authenticator, type Denial } from './authenticator.js';

/**
 * The bearer tokens of `hintbox serve` (`--tokens FILE`): a YAML or JSON list of
 * `{ name, sha256, servers?, tags?, metrics? }`. Only each token's SHA-256 is kept, in the file and in memory, so
 * a copy of the file (or of the process's memory) gives nobody a token. The file is checked once,
 * when serve starts (every problem in one line each, as profiles are); each request is then
 * checked by {@link BearerTokens.check}, a pure function of the request's header.
 */

export const TokenEntrySchema = z
  .object({
    /** Who holds the token: recorded as the caller of every call it makes. */
    name: z.string().min(1).max(200),
    /** SHA-256 (hex) of the token (`hintbox serve --hash-token`). */
    sha256: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, 'expected 64 hex digits (the SHA-256 of the token)')
      .transform((hex) => hex.toLowerCase()),
    /** The servers (profile names) it may use. Default: every server. */
    servers: z.array(z.string().min(1)).min(1).optional(),
    /**
     * The tool tags it may use: its sessions serve only tools with one of them (as `hintbox run
     * --tags`), and a call to another tool is refused as an unknown tool. Default: every tool.
     */
    tags: z
      .array(z.string().transform(normalizeTag).pipe(z.string().min(1, 'expected a tag name')))
      .min(1)
      .optional(),
    /**
     * Whether it may read `/metrics` (they name servers, tools and outcomes): `true` besides its
     * servers, `only` and no server (a scraper's). Default false.
     */
    metrics: z.union([z.boolean(), z.literal('only')]).optional(),
  })
  .strict();

export const TokenFileSchema = z.array(TokenEntrySchema);

export type TokenEntry = z.infer<typeof TokenEntrySchema>;

/** The SHA-256 (hex) of a token, as the tokens file keeps it. */
export function hashToken(token: string): string {
  return sha256Hex(token);
}

export class BearerTokens implements Authenticator {
  readonly description = 'bearer tokens';

  private readonly entries: readonly { entry: TokenEntry; digest: Buffer }[];

  constructor(entries: readonly TokenEntry[]) {
    this.entries = entries.map((entry) => ({ entry, digest: Buffer.from(entry.sha256, 'hex') }));
  }

  /** Parses a tokens file's text; throws one line per problem, `file: path: message`. */
  static parse(text: string, file: string): BearerTokens {
    const entries = parseSettings(text, file, TokenFileSchema);
    const fail = (lines: string[]): never => settingsProblems(file, lines);
    const problems: string[] = [];
    const seen = new Map<string, number>();
    entries.forEach((entry, i) => {
      const twin = entries.findIndex((other) => other.sha256 === entry.sha256);
      if (twin !== i) problems.push(`${i}.sha256: the same token as entry ${twin}`);
      if (seen.has(entry.name)) problems.push(`${i}.name: "${entry.name}" is also entry ${seen.get(entry.name)}`);
      seen.set(entry.name, i);
    });
    if (problems.length > 0) fail(problems);
    if (entries.length === 0) fail(['no tokens: the file must list at least one']);
    return new BearerTokens(entries);
  }

  static load(file: string): BearerTokens {
    return BearerTokens.parse(readSettingsFile(file, 'the tokens file'), file);
  }

  /** The servers named by some token that are not among `servers` (a typo would lock everyone out). */
  unknownServers(servers: readonly string[]): string[] {
    const names = new Set(this.entries.flatMap(({ entry }) => entry.servers ?? []));
    return [...names].filter((name) => !servers.includes(name));
  }

  /**
   * Checks an `Authorization` header for `server`. Every known hash is compared, each in
   * constant time, so the time taken says nothing about how close a wrong token came.
   */
  check(authorization: string | undefined, server: string): AuthResult {
    const found = this.find(authorization);
    if ('status' in found) return found;
    if (found.metrics === 'only' || (found.servers && !found.servers.includes(server))) {
      return {
        allowed: false,
        status: 403,
        reason: `token not allowed for ${server}`,
        caller: { subject: found.name },
      };
    }
    return { allowed: true, caller: { subject: found.name }, ...(found.tags ? { tags: found.tags } : {}) };
  }

  /** Checks an `Authorization` header for `/metrics`: only a token with `metrics` (true or only) may read them. */
  checkMetrics(authorization: string | undefined): AuthResult {
    const found = this.find(authorization);
    if ('status' in found) return found;
    if (found.metrics !== true && found.metrics !== 'only') {
      return { allowed: false, status: 403, reason: 'token not allowed for /metrics', caller: { subject: found.name } };
    }
    return { allowed: true, caller: { subject: found.name } };
  }

  /** The entry of the header's token, each known hash compared in constant time; else the 401. */
  private find(authorization: string | undefined): TokenEntry | ({ allowed: false } & Denial) {
    const token = bearerToken(authorization);
    if (token === undefined) {
      return { allowed: false, status: 401, reason: authorization ? 'not a bearer token' : 'no token', caller: null };
    }
    const digest = sha256Bytes(token);
    let found: TokenEntry | undefined;
    for (const { entry, digest: known } of this.entries) {
      if (timingSafeEqual(digest, known)) found = entry;
    }
    return found ?? { allowed: false, status: 401, reason: 'unknown token', caller: null };
  }

  authenticate(headers: IncomingHttpHeaders, server: string): Promise<AuthResult> {
    return Promise.resolve(this.check(headers.authorization, server));
  }

  /** 401: `Bearer realm="hintbox"` (RFC 6750), with `invalid_token` when one was given; 403: none. */
  challenge(denial: Denial): string | undefined {
    if (denial.status !== 401) return undefined;
    return bearerChallenge({
      realm: 'hintbox',
      error: denial.reason === 'unknown token' ? 'invalid_token' : undefined,
    });
  }
}
