/**
 * The serve bench's lean MCP client over streamable HTTP: `node:http` with a keep-alive Agent
 * (one socket), no `fetch`, no SDK. It measures serve's own cost per call, not the client's
 * transport (the SDK's `StreamableHTTPClientTransport` takes 0.4–0.7 ms a call in undici's
 * `fetch` alone; docs/benchmarks.md, "where serve's time goes").
 *
 * The real handshake of a 2025 session, as the SDK's client does it: `initialize` with the
 * SDK's latest protocol version, the session id and the version serve answered kept and sent on
 * every later request (`Mcp-Session-Id`, `MCP-Protocol-Version`), `notifications/initialized`,
 * the bearer token on every request; a `DELETE` at the end. An answer is read whether it is one
 * JSON body or an event stream (its events parsed, the one with the request's id taken).
 */
import http from 'node:http';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A JSON-RPC answer (result or error) of one request. */
interface Reply {
  id?: unknown;
  result?: unknown;
  error?: { code: number; message: string };
}

export class LeanHttpClient {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  private readonly target: URL;
  private sessionId: string | undefined;
  private protocolVersion: string | undefined;
  private nextId = 0;

  private constructor(
    url: string,
    private readonly token: string | undefined,
  ) {
    this.target = new URL(url);
  }

  /** Connects to the MCP endpoint `url` (initialize, then initialized); throws naming what failed. */
  static async connect(url: string, token?: string): Promise<LeanHttpClient> {
    const client = new LeanHttpClient(url, token);
    try {
      const init = (await client.request('initialize', {
        protocolVersion: LATEST_PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: 'hintbox-bench-lean', version: '1.0.0' },
      })) as { protocolVersion?: unknown };
      if (typeof init.protocolVersion !== 'string') throw new Error('initialize: no protocolVersion in its result');
      client.protocolVersion = init.protocolVersion;
      const sent = await client.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
      if (sent.status !== 202) throw new Error(`notifications/initialized: HTTP ${sent.status}: ${sent.body}`);
      return client;
    } catch (error) {
      client.agent.destroy();
      throw error;
    }
  }

  /** The session this client opened and the protocol version serve answered. */
  get session(): { sessionId: string; protocolVersion: string } {
    if (this.sessionId === undefined || this.protocolVersion === undefined) throw new Error('no session yet');
    return { sessionId: this.sessionId, protocolVersion: this.protocolVersion };
  }

  /** `tools/call`; its result, or throws with the JSON-RPC error. */
  callTool(name: string, args: Record<string, unknown>): Promise<unknown> {
    return this.request('tools/call', { name, arguments: args });
  }

  /** Ends the session (`DELETE`) and closes the connection. */
  async close(): Promise<void> {
    try {
      if (this.sessionId !== undefined) await this.send('DELETE', undefined);
    } finally {
      this.agent.destroy();
    }
  }

  private async request(method: string, params: unknown): Promise<unknown> {
    const id = ++this.nextId;
    const answer = await this.post({ jsonrpc: '2.0', id, method, params });
    if (answer.status !== 200) throw new Error(`${method}: HTTP ${answer.status}: ${answer.body.slice(0, 200)}`);
    const session = answer.headers['mcp-session-id'];
    if (method === 'initialize') {
      if (typeof session !== 'string') throw new Error('initialize: no Mcp-Session-Id in the answer');
      this.sessionId = session;
    }
    const reply = replyOf(answer, id);
    if (reply.error) throw new Error(`${method}: ${reply.error.message} (${reply.error.code})`);
    return reply.result;
  }

  private post(message: unknown): Promise<Answer> {
    return this.send('POST', JSON.stringify(message));
  }

  private send(method: 'POST' | 'DELETE', body: string | undefined): Promise<Answer> {
    const headers: Record<string, string> = { Accept: 'application/json, text/event-stream' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(body));
    }
    if (this.token !== undefined) headers.Authorization = `Bearer ${this.token}`;
    if (this.sessionId !== undefined) headers['Mcp-Session-Id'] = this.sessionId;
    if (this.protocolVersion !== undefined) headers['MCP-Protocol-Version'] = this.protocolVersion;
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          agent: this.agent,
          host: this.target.hostname,
          port: this.target.port,
          path: this.target.pathname,
          method,
          headers,
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }
}

/** The answer to request `id` in a JSON body or in an event stream's `data:` lines. */
export function replyOf(answer: Answer, id: number): Reply {
  const type = answer.headers['content-type'] ?? '';
  const messages: unknown[] = [];
  if (type.startsWith('application/json')) {
    const json = JSON.parse(answer.body) as unknown;
    messages.push(...(Array.isArray(json) ? (json as unknown[]) : [json]));
  } else if (type.startsWith('text/event-stream')) {
    // Events are separated by a blank line; an event's data is its `data:` lines joined.
    for (const event of answer.body.split(/\r?\n\r?\n/)) {
      const data = event
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5));
      if (data.length > 0 && data.join('') !== '') messages.push(JSON.parse(data.join('\n')) as unknown);
    }
  } else {
    throw new Error(`an answer of type '${type}': neither JSON nor an event stream`);
  }
  const reply = messages.find(
    (m): m is Reply => typeof m === 'object' && m !== null && (m as Reply).id === id && ('result' in m || 'error' in m),
  );
  if (!reply) throw new Error(`no answer to request ${id} in: ${answer.body.slice(0, 200)}`);
  return reply;
}
