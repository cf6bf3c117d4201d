import assert from 'node:assert/strict';
import { request as httpRequest, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';

/**
 * Plain HTTP to the console, as a forger would send it (any headers, no browser enforcing cookie
 * paths or SameSite), and what its replies carry: the cookie set, the page's form token.
 */

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** Request headers; `host: null` sends none. */
export type Headers = Record<string, string | null | undefined>;

/** One request to the console on loopback at `port`, with exactly these headers; `host: null` sends none. */
export function sendTo(
  port: number,
  method: string,
  path: string,
  headers: Headers = {},
  body?: string | Buffer,
): Promise<Reply> {
  const { host, ...rest } = headers;
  const sent: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(rest)) if (typeof value === 'string') sent[name] = value;
  if (typeof host === 'string') sent.host = host;
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        setHost: host === undefined,
        headers: sent,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export const setCookieOf = (reply: Reply): string => {
  const all = reply.headers['set-cookie'] ?? [];
  assert.equal(all.length, 1, `one cookie set: ${JSON.stringify(all)}`);
  return all[0]!;
};
/** The `name=value` of a Set-Cookie, as a Cookie header sends it back. */
export const cookiePair = (setCookie: string): string => setCookie.split(';')[0]!.trim();
export const csrfOf = (page: string): string => {
  const found = /<input type="hidden" name="csrf" value="([^"]+)"/.exec(page)?.[1];
  assert.ok(found, 'the page carries its form token');
  return found;
};
