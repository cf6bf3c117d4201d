import { request, type IncomingHttpHeaders } from 'node:http';

/**
 * What a web page in a person's browser can send to `hintbox serve` on their machine: MCP over
 * plain HTTP with the `Host` and `Origin` the browser gives it. A page reached through DNS
 * rebinding (a name of the attacker's that resolves to 127.0.0.1) sends its own name as `Host`,
 * and is its own client: it answers hintbox's confirmations itself.
 */

/** The headers a browser puts on a page's request. */
export interface PageHeaders {
  host: string;
  origin?: string;
  'sec-fetch-site'?: string;
  /** A token the page got hold of (or a proxy adds): the checks hold with credentials too. */
  authorization?: string;
}

export interface PageReply {
  status: number;
  headers: IncomingHttpHeaders;
  /** The JSON-RPC messages of the answer (its JSON, or each event of its SSE stream). */
  messages: Record<string, unknown>[];
  body: string;
}

/**
 * One request of the page to `url` (its socket goes to the URL's address, its `Host` is the
 * page's). A POST's answer is read to its end; every `elicitation/create` the server sends on
 * the stream is answered `accept` by another POST of the page, as a client would.
 */
export function pageRequest(
  url: string,
  page: PageHeaders,
  options: { method?: 'GET' | 'POST' | 'DELETE'; body?: unknown; session?: string } = {},
): Promise<PageReply> {
  const target = new URL(url);
  const method = options.method ?? (options.body === undefined ? 'GET' : 'POST');
  const headers: Record<string, string> = {
    ...(page as unknown as Record<string, string>),
    accept: 'application/json, text/event-stream',
    ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
    ...(options.session ? { 'mcp-session-id': options.session } : {}),
  };
  return new Promise((resolve, reject) => {
    const req = request({ host: target.hostname, port: target.port, path: target.pathname, method, headers }, (res) => {
      let body = '';
      const messages: Record<string, unknown>[] = [];
      let pending = '';
      const answers: Promise<unknown>[] = [];
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
        if (!String(res.headers['content-type']).startsWith('text/event-stream')) return;
        pending += chunk;
        let end: number;
        while ((end = pending.indexOf('\n\n')) >= 0) {
          const event = pending.slice(0, end);
          pending = pending.slice(end + 2);
          const data = event
            .split('\n')
            .filter((line) => line.startsWith('data:'))
            .map((line) => line.slice(5).trim())
            .join('\n');
          if (data === '') continue;
          const message = JSON.parse(data) as Record<string, unknown>;
          messages.push(message);
          if (message.method === 'elicitation/create') {
            const answer = { jsonrpc: '2.0', id: message.id, result: { action: 'accept', content: { approve: true } } };
            answers.push(
              pageRequest(url, page, {
                body: answer,
                ...(options.session ? { session: options.session } : {}),
              }),
            );
          }
        }
      });
      res.on('end', () => {
        if (String(res.headers['content-type']).startsWith('application/json') && body !== '') {
          const json = JSON.parse(body) as unknown;
          messages.push(...((Array.isArray(json) ? json : [json]) as Record<string, unknown>[]));
        }
        void Promise.allSettled(answers).then(() =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, messages, body }),
        );
      });
    });
    req.on('error', reject);
    req.end(options.body === undefined ? undefined : JSON.stringify(options.body));
  });
}

/** What a page achieved against one server at `url` (its `/mcp/<name>`), step by step. */
export interface PageAttack {
  /** The status of its `initialize`, and whether it got a session. */
  initialize: number;
  session: boolean;
  /** The tools it was listed (none without a session). */
  tools: string[];
  /** The status of its call, and the text of the result it got. */
  call: number;
  result: string;
  /** Confirmations it was asked (and answered itself). */
  confirmations: number;
}

/**
 * A page's whole attempt at one server: open a session, list the tools, call `tool` with
 * `args` and answer the confirmation itself. Each step is tried whatever the one before gave
 * (a refused session is tried on without one), so the outcome shows everything it got.
 */
export async function pageAttack(
  url: string,
  page: PageHeaders,
  tool: string,
  args: Record<string, unknown>,
): Promise<PageAttack> {
  const init = await pageRequest(url, page, {
    body: {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: { elicitation: {} },
        clientInfo: { name: 'a web page', version: '1' },
      },
    },
  });
  const id = init.headers['mcp-session-id'];
  const session = typeof id === 'string' ? { session: id } : {};
  await pageRequest(url, page, { body: { jsonrpc: '2.0', method: 'notifications/initialized' }, ...session });
  const list = await pageRequest(url, page, { body: { jsonrpc: '2.0', id: 2, method: 'tools/list' }, ...session });
  const listed = list.messages.find((m) => m.id === 2)?.result as { tools?: { name: string }[] } | undefined;
  const call = await pageRequest(url, page, {
    body: { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: tool, arguments: args } },
    ...session,
  });
  const answered = call.messages.find((m) => m.id === 3);
  const result = answered?.result as { content?: { text?: string }[] } | undefined;
  return {
    initialize: init.status,
    session: typeof id === 'string',
    tools: (listed?.tools ?? []).map((t) => t.name),
    call: call.status,
    result: result?.content?.[0]?.text ?? JSON.stringify(answered?.error ?? null),
    confirmations: call.messages.filter((m) => m.method === 'elicitation/create').length,
  };
}
