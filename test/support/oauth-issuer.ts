import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWTPayload, type CryptoKey } from 'jose';
import { stringify } from 'yaml';
import { scratchFolder } from './scratch-folder.js';

/**
 * A stand-in authorization server for the tests of `hintbox serve --oauth`: its JWKS served over
 * HTTP on 127.0.0.1 (as hintbox fetches a real one), and tokens signed with its key — or with a
 * key it does not publish, or with none at all.
 */
export interface TestIssuer extends AsyncDisposable {
  /** The issuer identifier (`iss`). */
  issuer: string;
  jwksUri: string;
  /** How often the JWKS was fetched. */
  fetches(): number;
  /** A token signed with the published key; `claims` override the defaults (sub, iss, exp, …). */
  sign(claims: JWTPayload, options?: SignOptions): Promise<string>;
  /** An unsecured token (`alg: none`) with these claims. */
  unsigned(claims: JWTPayload): string;
  close(): Promise<void>;
}

export interface SignOptions {
  key?: 'published' | 'stranger';
  expiresIn?: string | number;
  /** Its `iat` (seconds since the epoch); default now. */
  issuedAt?: number;
}

export async function startTestIssuer(): Promise<TestIssuer> {
  const published = await generateKeyPair('ES256');
  const stranger = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(published.publicKey)), kid: 'test-key', alg: 'ES256', use: 'sig' };
  let fetches = 0;
  const server = createServer((req, res) => {
    if (req.url === '/jwks') {
      fetches++;
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
    } else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  const sign = (claims: JWTPayload, options: SignOptions = {}) => {
    const key: CryptoKey = options.key === 'stranger' ? stranger.privateKey : published.privateKey;
    return new SignJWT({ iss: base, sub: 'alice', ...claims })
      .setProtectedHeader({ alg: 'ES256', kid: 'test-key', typ: 'at+jwt' })
      .setIssuedAt(options.issuedAt)
      .setExpirationTime(options.expiresIn ?? '5m')
      .sign(key);
  };
  const unsigned = (claims: JWTPayload): string => {
    const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    return `${part({ alg: 'none', typ: 'JWT' })}.${part({ iss: base, sub: 'alice', iat: now, exp: now + 300, ...claims })}.`;
  };
  return {
    issuer: base,
    jwksUri: `${base}/jwks`,
    fetches: () => fetches,
    sign,
    unsigned,
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** A `serve --oauth` settings file naming the issuer, with the rest of `settings` (resource, scopes, …). */
export function oauthSettingsFile(issuer: TestIssuer, settings: Record<string, unknown>): string {
  const file = path.join(scratchFolder('hintbox-oauth-settings-'), 'oauth.yaml');
  writeFileSync(file, stringify({ issuer: issuer.issuer, jwksUri: issuer.jwksUri, ...settings }));
  return file;
}
