import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { isObject } from '../mcp/json-rpc.js';
import { isModernRequest } from '../protocol/protocol-era.js';
import { carriedHeaderMismatch, HEADER_MISMATCH } from './standard-headers.js';
import { callerFields, callerText, sameCaller } from '../util/caller-identity.js';
import { delay } from '../util/delay.js';
import { RequestSite } from '../util/request-site.js';
import { coversAccess, type Access, type Denial } from './authenticator.js';
import type { ClientSession } from './client-session.js';
import { COMBINED, membersOf } from './combined-endpoint.js';
import { dropCredentials, jsonRpcError, readJson, reply, requestIds } from './http-messages.js';
import { JsonAnswerTransport } from './json-answer-transport.js';
import { requestTarget } from './request-target.js';
import { pathName } from './serve-address.js';
import { SiteGate } from './site-gate.js';
import { DEFAULT_IDLE_MS, DEFAULT_MAX_SESSIONS, type McpHttpServerOptions } from './mcp-http-options.js';
import { SessionCap } from './session-cap.js';
import { StatelessClients } from './stateless-clients.js';
import { verifiedParameter } from './server-readiness.js';

export type { ClientSession } from './client-session.js';
export { DEFAULT_IDLE_MS, DEFAULT_MAX_SESSIONS, type McpHttpServerOptions } from './mcp-http-options.js';

/**
 * The SDK's streamable HTTP transport, loaded when `serve` first needs it: `hintbox run` (the
 * same bundle) never evaluates it and its web-server dependencies, and holds less memory.
 */
let httpTransport: Promise<{ StreamableHTTPServerTransport: typeof StreamableHTTPServerTransport }> | undefined;
const loadHttpTransport = () => (httpTransport ??= import('@modelcontextprotocol/sdk/server/streamableHttp.js'));

/**
 * The HTTP side of `hintbox serve`: each server at `/mcp/<name>` over MCP's streamable HTTP
 * transport (the SDK's), one transport — and, in this first slice, one hintbox session with its
 * own sandboxes — per MCP session of a client. The authenticator (bearer tokens, OAuth) is asked
 * before anything else of a request is read, and the `Authorization` header is dropped once it
 * has answered: nothing behind it sees the client's credentials. `/healthz`, `/readyz` and the
 * authenticator's documents (OAuth's metadata) need none and name nothing but servers.
 *
 * Before all of that, on every path, a request must name serve's own address (or a name the
 * operator allows) as its `Host`, and come from no other site's page (`Origin`,
 * `Sec-Fetch-Site`): a web page that reached serve through DNS rebinding, or calls 127.0.0.1
 * from another site, gets 421 or 403 and starts nothing ({@link RequestSite}).
 *
 * Draining (SIGTERM): new sessions and new requests are refused with 503, while the answers of
 * requests in flight and the client's answers to them (a confirmation) still pass, until they
 * are done or the deadline passes; then every session is closed.
 */

interface Client {
  id: string;
  server: string;
  access: Access | null;
  transport: JsonAnswerTransport;
  session: ClientSession;
  closing?: Promise<void>;
  /** When its last request came. */
  lastSeen: number;
  /** Its requests in flight and streams open. */
  open: number;
  /** Gives back what it held of its caller's session cap. */
  release: () => void;
}

export class McpHttpServer {
  private readonly http: Server;
  private readonly clients = new Map<string, Client>();
  /** Sessions being opened: a drain waits for them to close them too. */
  private readonly opening = new Set<Promise<unknown>>();
  /** The sessions each caller holds, those being opened included. */
  private readonly cap: SessionCap;
  /** Responses to client requests still open (a call's answer not yet sent). */
  private inFlight = 0;
  private draining = false;
  private readonly idleSweep: NodeJS.Timeout;
  private servers: string[];
  private readonly siteGate: SiteGate;
  /** The gateways of 2026 clients, which have no session: one per caller and server (`stateless-clients.ts`). */
  private readonly stateless: StatelessClients;

  constructor(private readonly options: McpHttpServerOptions) {
    this.servers = [...options.servers];
    this.cap = new SessionCap(options.maxSessionsPerCaller ?? DEFAULT_MAX_SESSIONS);
    this.stateless = new StatelessClients({
      openSession: (server, access) => options.openSession(server, access),
      cap: this.cap,
      weightOf: (server, access) => this.weightOf(server, access),
      denials: options.denials,
      log: options.log,
    });
    this.siteGate = new SiteGate(options.site ?? new RequestSite(), options.log, (refusal) =>
      options.refused?.(refusal),
    );
    const idleMs = options.idleTimeoutMs ?? DEFAULT_IDLE_MS;
    this.idleSweep = setInterval(() => this.closeIdle(idleMs), Math.min(idleMs / 2, 30_000));
    this.idleSweep.unref();
    this.http = createServer((req, res) => {
      this.handle(req, res).catch((error: Error) => {
        options.log.error(`serve: ${req.method} ${req.url}: ${error.message}`);
        if (!res.headersSent) reply(res, 500, { error: 'internal error' });
        else res.end();
      });
    });
  }

  /** Listens; resolves with the port (an ephemeral one for port 0). */
  listen(port: number, host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.http.once('error', reject);
      this.http.listen(port, host, () => {
        this.http.off('error', reject);
        resolve((this.http.address() as AddressInfo).port);
      });
    });
  }

  /** Serves these servers from now on (a reload); `/mcp/<name>` of another is 404. */
  setServers(servers: readonly string[]): void {
    this.servers = [...servers];
  }

  /** Ends the sessions of every client of these servers (their profile changed or is gone). */
  async endClientsOf(servers: readonly string[], why: string): Promise<void> {
    // A combined session (`/mcp`) ends with any of its servers.
    const ending = [...this.clients.values()].filter(
      (client) => servers.includes(client.server) || (client.server === COMBINED && servers.length > 0),
    );
    await Promise.allSettled([
      ...ending.map((client) => this.end(client, why)),
      this.stateless.endFor(servers, why, COMBINED),
    ]);
  }

  /** How many client sessions are open. */
  get sessions(): number {
    return this.clients.size;
  }

  /**
   * Refuses new sessions and requests, lets those in flight finish for up to `deadlineMs`, then
   * closes every session and the listener.
   */
  async drain(deadlineMs: number): Promise<void> {
    this.draining = true;
    clearInterval(this.idleSweep);
    const until = Date.now() + deadlineMs;
    while (this.inFlight > 0 && Date.now() < until) await delay(50);
    if (this.inFlight > 0) this.options.log.warn(`serve: ${this.inFlight} request(s) still in flight at the deadline`);
    await Promise.allSettled([...this.opening]);
    await Promise.allSettled([
      ...[...this.clients.values()].map((client) => this.end(client, 'hintbox is stopping')),
      this.stateless.endFor('all', 'hintbox is stopping'),
    ]);
    this.http.closeAllConnections();
    await new Promise((resolve) => this.http.close(resolve));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.siteGate.admit(req, res)) return;
    // A request target that is no URL (`http://[…`) is the client's error: answered, not logged.
    // Parsed once (URL.canParse and then new URL parsed each request's target twice).
    const url = requestTarget(req.url);
    if (!url) return reply(res, 400, { error: 'bad request target' });
    if (url.pathname === '/healthz') return reply(res, 200, { ok: true });
    if (url.pathname === '/readyz') {
      const verified = verifiedParameter(new URLSearchParams(url.search));
      if (verified === undefined)
        return reply(res, 400, { error: '/readyz: verified is given without a value, or 1 or true' });
      const state = this.options.ready(verified);
      return reply(res, state.ready && !this.draining ? 200 : 503, state);
    }
    if (url.pathname === '/metrics' && this.options.metrics) return this.options.metrics(req, res);
    const document = req.method === 'GET' ? this.options.auth?.document?.(url.pathname) : undefined;
    if (document !== undefined) return reply(res, 200, document);
    const match = /^\/mcp\/([^/]+)\/?$/.exec(url.pathname);
    const combined = this.options.combined === true && /^\/mcp\/?$/.test(url.pathname);
    const server = combined ? COMBINED : match ? pathName(match[1] as string) : undefined;
    if (server === undefined || !(combined || this.servers.includes(server)))
      return reply(res, 404, { error: 'no such server' });

    let access: Access | null = null;
    if (this.options.auth) {
      const result = await this.options.auth.authenticate(req.headers, server);
      if (!result.allowed) return this.deny(req, res, server, result);
      access = {
        caller: result.caller,
        ...(result.tags ? { tags: result.tags } : {}),
        ...(result.servers ? { servers: result.servers } : {}),
      };
    }
    dropCredentials(req);
    const caller = access?.caller ?? null;
    let body: unknown;
    if (req.method === 'POST') {
      const read = await readJson(req);
      if ('status' in read)
        return reply(res, read.status, jsonRpcError(read.message), read.status === 413 ? { Connection: 'close' } : {});
      body = read.json;
    }
    // While draining, what asks for new work is refused; answers and notifications pass.
    if (this.draining && (req.method === 'GET' || (req.method === 'POST' && requestIds(body).length > 0))) {
      return reply(res, 503, jsonRpcError('hintbox is stopping'), { 'Retry-After': '5' });
    }
    const sessionId = req.headers['mcp-session-id'];
    // A 2026 request opens no session: its caller's gateway answers it (`stateless-clients.ts`).
    // One that carries an Mcp-Session-Id is served the same, the id ignored (MCP 2026-07-28: a
    // request with the modern _meta is served statelessly), so its headers are checked as any.
    if (req.method === 'POST' && isObject(body) && isModernRequest(body.params)) {
      if (body.id !== undefined) this.inFlight++;
      res.once('close', () => body.id !== undefined && this.inFlight--);
      return this.stateless.handle(server, access, req, res, body);
    }
    // Anything else (2025, or a batch) may still carry Mcp-Method / Mcp-Name: they must be true.
    const carried = req.method === 'POST' ? carriedHeaderMismatch(req.headers, body) : undefined;
    if (carried !== undefined) {
      this.options.denials.deny({
        remoteAddress: req.socket.remoteAddress ?? null,
        message: `serve: ${server}: ${carried}`,
      });
      const error = { code: HEADER_MISMATCH, message: `hintbox refused the request: ${carried}` };
      return reply(res, 400, { jsonrpc: '2.0', id: null, error });
    }
    if (typeof sessionId === 'string') {
      const client = this.clients.get(sessionId);
      if (!client || client.server !== server) return reply(res, 404, jsonRpcError('session not found'));
      // A session is its caller's (subject and client): another may not ride on it, nor a token allowing fewer tools.
      if (!sameCaller(client.access?.caller, caller))
        return this.deny(req, res, server, { status: 403, reason: "another caller's session", caller });
      if (!coversAccess(access, client.access)) {
        const reason = 'the token no longer allows the tags its session was opened with';
        return this.deny(req, res, server, { status: 403, reason, caller, error: 'insufficient_scope' });
      }
      return this.pass(client.transport, req, res, body, client);
    }
    if (req.method !== 'POST' || !isInitializeRequest(body)) {
      return reply(res, 400, jsonRpcError('no session: start with an initialize request'));
    }
    const held = this.cap.reserve(caller, this.weightOf(server, access));
    if ('refused' in held) {
      this.options.denials.deny({
        remoteAddress: req.socket.remoteAddress ?? null,
        message: `serve: ${server}: ${held.refused}`,
      });
      return reply(res, 429, jsonRpcError(held.refused), { 'Retry-After': '10' });
    }
    await this.start(server, access, held.release, req, res, body);
  }

  /** A session at /mcp is a session of each server behind it, each counted in the cap. */
  private weightOf(server: string, access: Access | null): number {
    return server === COMBINED ? Math.max(1, membersOf(access, this.servers).size) : 1;
  }

  /** A new client: its own hintbox session, connected to a transport of its own. */
  private async start(
    server: string,
    access: Access | null,
    release: () => void,
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
  ): Promise<void> {
    const opening = this.options.openSession(server, access);
    this.opening.add(opening);
    let session: ClientSession;
    try {
      session = await opening;
    } catch (error) {
      release();
      this.options.log.error(`serve: ${server}: a session could not start: ${(error as Error).message}`);
      return reply(
        res,
        500,
        jsonRpcError(`hintbox could not start ${server}: ${(error as Error).message.split('\n')[0]}`),
      );
    } finally {
      this.opening.delete(opening);
    }
    let client: Client | undefined;
    const { StreamableHTTPServerTransport: HttpTransport } = await loadHttpTransport();
    // A call answered as JSON where nothing comes before its result, else as a stream (json-answer-transport.ts).
    const transport: JsonAnswerTransport = new JsonAnswerTransport(
      new HttpTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          client = { id, server, access, transport, session, lastSeen: Date.now(), open: 0, release };
          this.clients.set(id, client);
          const tags = access?.tags ? ` (tags ${access.tags.join(', ')})` : '';
          this.options.log.info(
            `serve: ${server}: session ${id} opened${access ? ` for ${callerText(access.caller)}${tags}` : ''}`,
          );
        },
        onsessionclosed: () => void (client && this.end(client, 'the client ended its session')),
      }),
    );
    try {
      await session.connect(
        transport,
        () => void (client ? this.end(client, 'its HTTP session closed') : session.close()),
      );
      if (this.draining) return reply(res, 503, jsonRpcError('hintbox is stopping'));
      await this.pass(transport, req, res, body, client);
    } finally {
      // No session came of it (stopping, a failure, not an initialize after all): nothing stays.
      if (!client || this.draining) await (client ? this.end(client, 'hintbox is stopping') : session.close());
      if (!client) release();
    }
  }

  /**
   * Hands a request to its transport, counting it in flight until its response ends. A response
   * whose connection closes before it was sent (the client went away) cancels its requests.
   */
  private async pass(
    transport: JsonAnswerTransport,
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    client?: Client,
  ): Promise<void> {
    const requests = req.method === 'POST' ? requestIds(body) : [];
    if (client) {
      client.lastSeen = Date.now();
      // A GET is the client's stream of the server's messages: open while it listens.
      if (requests.length > 0 || req.method === 'GET') client.open++;
    }
    if (requests.length > 0) this.inFlight++;
    res.once('close', () => {
      if (requests.length > 0) this.inFlight--;
      if (client && (requests.length > 0 || req.method === 'GET')) {
        client.open--;
        client.lastSeen = Date.now();
      }
      if (res.writableFinished || !transport.onmessage) return;
      for (const requestId of requests) {
        transport.onmessage({
          jsonrpc: '2.0',
          method: 'notifications/cancelled',
          params: { requestId, reason: 'the client went away' },
        });
      }
    });
    if (!transport.answer(req, res, body)) await transport.handleRequest(req, res, body);
  }

  /** Closes the sessions of clients that vanished: idle past `idleMs`, nothing in flight or open. */
  private closeIdle(idleMs: number): void {
    const now = Date.now();
    for (const client of this.clients.values()) {
      if (client.open === 0 && now - client.lastSeen > idleMs) {
        void this.end(client, `no request for ${Math.round(idleMs / 1000)} s`);
      }
    }
    this.stateless.closeIdle(idleMs);
  }

  /** Ends a client's session: its gateway, sandboxes and everything else of it removed. */
  private end(client: Client, why: string): Promise<void> {
    return (client.closing ??= (async () => {
      this.clients.delete(client.id);
      client.release();
      this.options.log.info(
        `serve: ${client.server}: session ${client.id} ends (${why}): ${client.session.ending ?? 'closing its gateways'}`,
      );
      await client.session
        .close()
        .catch((error: Error) => this.options.log.error(`serve: closing ${client.id}: ${error.message}`));
    })());
  }

  private deny(req: IncomingMessage, res: ServerResponse, server: string, denial: Denial): void {
    const remoteAddress = req.socket.remoteAddress ?? null;
    const { status, reason, caller } = denial;
    const who = { caller: null, ...callerFields(caller) };
    this.options.denials.deny({
      remoteAddress,
      event: { type: 'auth.denied', session: null, server, status, reason, ...who, remoteAddress },
      message: `serve: ${server}: ${status} for ${remoteAddress ?? 'an unknown address'}: ${reason}`,
    });
    const challenge = this.options.auth?.challenge(denial, server);
    const headers: Record<string, string> = challenge ? { 'WWW-Authenticate': challenge } : {};
    reply(res, denial.status, jsonRpcError(denial.status === 401 ? 'unauthorized' : 'forbidden'), headers);
  }
}
