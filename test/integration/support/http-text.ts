import http from 'node:http';

/** GETs `url` from the test process and resolves with the body, or `error <message>` (3 s idle limit). */
export function httpText(url: string): Promise<string> {
  return new Promise((resolve) => {
    const request = http.get(url, { timeout: 3000 }, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      response.on('end', () => resolve(body));
    });
    request.on('timeout', () => request.destroy());
    request.on('error', (error) => resolve(`error ${error.message}`));
  });
}
