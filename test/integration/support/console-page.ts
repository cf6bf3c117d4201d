import assert from 'node:assert/strict';
import { request, type IncomingHttpHeaders } from 'node:http';

/**
 * The console's pages as the console tests drive them without a browser: plain HTTP requests
 * with any headers (as a person's browser sends them, or as a forger would).
 */

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One plain HTTP request to the console (as a person's browser would send it, headers by hand). */
export function http(
  url: string,
  method: 'GET' | 'POST',
  headers: Record<string, string> = {},
  body?: string,
): Promise<Reply> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: target.hostname, port: target.port, path: target.pathname + target.search, method, headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Opens a confirmation's link as a browser does: the token for a cookie, then the page and its form token. */
export async function openLink(link: string): Promise<{ cookie: string; page: string; csrf: string | undefined }> {
  const exchanged = await http(link, 'GET');
  assert.equal(exchanged.status, 303, `the link opens the page: ${exchanged.body}`);
  const cookie = (exchanged.headers['set-cookie'] ?? [])[0]?.split(';')[0] ?? '';
  assert.match(cookie, /^hintbox-approval-/);
  const url = new URL(link);
  const page = await http(`${url.origin}${url.pathname}`, 'GET', { cookie });
  assert.equal(page.status, 200);
  return { cookie, page: page.body, csrf: /name="csrf" value="([^"]+)"/.exec(page.body)?.[1] };
}

/** The person's answer on the page: a POST from the page's origin with its form token. */
export function answerOnPage(
  link: string,
  cookie: string,
  csrf: string,
  answer: 'approve' | 'decline',
): Promise<Reply> {
  const url = new URL(link);
  return http(
    `${url.origin}${url.pathname}/answer`,
    'POST',
    { cookie, origin: url.origin, 'content-type': 'application/x-www-form-urlencoded' },
    new URLSearchParams({ csrf, answer }).toString(),
  );
}
