import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  ErrorCode,
  isJSONRPCRequest,
  SUPPORTED_PROTOCOL_VERSIONS,
  type JSONRPCRequest,
} from '@modelcontextprotocol/sdk/types.js';
import type { DenialSink } from '../audit/denial-recorder.js';
import { METHOD } from '../mcp/methods.js';
import { MODERN_PROTOCOL_VERSION } from '../protocol/protocol-era.js';
import { callerKey, callerText } from '../util/caller-identity.js';
import type { Logger } from '../util/logger.js';
import type { Access } from './authenticator.js';
import type { ClientSession } from './client-session.js';
import { jsonRpcError, reply } from './http-messages.js';
import type { SessionCap } from './session-cap.js';
import { HEADER_MISMATCH, standardHeaderMismatch } from './standard-headers.js';
import { StatelessTransport } from './stateless-transport.js';

/**
 * What `hintbox serve` keeps for 2026 clients, which open no session: one gateway per caller
 * (the authenticated principal: subject and client) and server (profile), with what its access
 * allows (tags; at `/mcp`, servers), opened by its first request and closed when idle. It is
 * what a 2025 client's session holds — over a shared server's sandboxes and trust, its own
 * one-time approvals — so any request of that caller, from any connection or client, finds
 * the same state; a request of another caller, or with other access, never does. A
 * confirmation's `requestState` is bound to the caller and the server besides (and redeemed in
 * the process's store), so it redeems in this gateway only.
 *
 * Each counts in its caller's session cap as a session would, from its first request until it
 * ends. Everything here lives in this process's memory.
 */

export interface StatelessClientsOptions {
  /** Opens a gateway of `server` for `access` (as for a 2025 session). */
  openSession(server: string, access: Access | null): Promise<ClientSession>;
  /** The cap on what a caller holds (shared with 2025 sessions). */
  cap: SessionCap;
  /** What one gateway of `server` weighs in the cap (at `/mcp`: one per server behind it). */
  weightOf(server: string, access: Access | null): number;
  /** Where refusals go (a request whose headers lie, a gateway past the cap). */
  denials: DenialSink;
  log: Logger;
}

/**
 * The answer to a 2026 `initialize` (MCP 2026-07-28 has no handshake: an unknown method is 404,
 * -32601 over HTTP); it names the versions served, as the spec asks of an error to `initialize`.
 */
const NO_INITIALIZE = (id: JSONRPCRequest['id']) => ({
  jsonrpc: '2.0',
  id,
  error: {
    code: ErrorCode.MethodNotFound,
    message: `Method not found: initialize (MCP ${MODERN_PROTOCOL_VERSION} has none: send server/discover); a 2025 client initializes without the 2026 _meta (served: ${[MODERN_PROTOCOL_VERSION, ...SUPPORTED_PROTOCOL_VERSIONS].join(', ')})`,
  },
});

interface StatelessClient {
  key: string;
  server: string;
  /** The gateway being opened, then open. */
  opening: Promise<{ session: ClientSession; transport: StatelessTransport }>;
  lastSeen: number;
  release: () => void;
  closing?: Promise<void>;
}

/** The key of a caller's gateway on a server: who, where, and with exactly which access. */
function keyOf(server: string, access: Access | null): string {
  const servers = access?.servers ? [...access.servers].sort(([a], [b]) => a.localeCompare(b)) : null;
  return JSON.stringify([server, callerKey(access?.caller), access?.tags ?? null, servers]);
}

export class StatelessClients {
  private readonly clients = new Map<string, StatelessClient>();

  constructor(private readonly options: StatelessClientsOptions) {}

  /** How many gateways are open (or opening). */
  get size(): number {
    return this.clients.size;
  }

  /**
   * One 2026 POST of `access` on `server`. A request's standard headers must say what its body
   * does (else 400, -32020: nothing of it reaches a gateway, nothing opens); an `initialize` is
   * no method of 2026 (404, -32601, naming the versions served: nothing opens either); then its
   * caller's gateway (opened if need be) answers it. A notification is taken and dropped (202): a
   * 2026 client cancels a request by closing it.
   */
  handle(
    server: string,
    access: Access | null,
    req: IncomingMessage,
    res: ServerResponse,
    body: Record<string, unknown>,
  ): Promise<void> | void {
    if (body.id === undefined) return void res.writeHead(202).end();
    if (!isJSONRPCRequest(body)) return reply(res, 400, jsonRpcError('not a JSON-RPC request'));
    if (this.refusedHeaders(server, req, res, body)) return;
    if (body.method === METHOD.initialize) {
      this.refused(req, server, 'refused initialize: a 2026 request opens no session');
      return reply(res, 404, NO_INITIALIZE(body.id));
    }
    return this.answer(server, access, req, res, body);
  }

  /** Whether a 2026 request's standard headers contradict its body, and if so, refuses it (400, -32020). */
  private refusedHeaders(server: string, req: IncomingMessage, res: ServerResponse, body: JSONRPCRequest): boolean {
    const mismatch = standardHeaderMismatch(req.headers, body);
    if (mismatch === undefined) return false;
    this.refused(req, server, `refused a request: ${mismatch}`);
    const error = { code: HEADER_MISMATCH, message: `hintbox refused the request: ${mismatch}` };
    reply(res, 400, { jsonrpc: '2.0', id: body.id, error });
    return true;
  }

  private async answer(
    server: string,
    access: Access | null,
    req: IncomingMessage,
    res: ServerResponse,
    request: JSONRPCRequest,
  ): Promise<void> {
    const client = this.clients.get(keyOf(server, access)) ?? this.open(server, access, req);
    if (!client) return reply(res, 429, jsonRpcError('too many sessions: end some first'), { 'Retry-After': '10' });
    client.lastSeen = Date.now();
    let opened: Awaited<StatelessClient['opening']>;
    try {
      opened = await client.opening;
    } catch (error) {
      return reply(res, 500, jsonRpcError(`hintbox could not start ${server}: ${firstLine(error)}`));
    }
    if (client.closing) return reply(res, 503, jsonRpcError(`${server} ended this caller's state: send it again`));
    res.once('close', () => (client.lastSeen = Date.now()));
    opened.transport.answer(req, res, request);
  }

  /** Ends the gateways idle past `idleMs` with nothing in flight. */
  closeIdle(idleMs: number, now = Date.now()): void {
    for (const client of this.clients.values()) {
      if (now - client.lastSeen <= idleMs) continue;
      void client.opening.then(
        ({ transport }) => {
          if (transport.size === 0 && now - client.lastSeen > idleMs)
            void this.endOne(client, `no request for ${Math.round(idleMs / 1000)} s`);
        },
        () => undefined,
      );
    }
  }

  /** Ends the gateways of these servers (a reload), or of every server. */
  async endFor(servers: readonly string[] | 'all', why: string, combined?: string): Promise<void> {
    const ending = [...this.clients.values()].filter(
      (c) => servers === 'all' || servers.includes(c.server) || (c.server === combined && servers.length > 0),
    );
    await Promise.allSettled(ending.map((client) => this.endOne(client, why)));
  }

  private open(server: string, access: Access | null, req: IncomingMessage): StatelessClient | undefined {
    const key = keyOf(server, access);
    const held = this.options.cap.reserve(access?.caller ?? null, this.options.weightOf(server, access));
    if ('refused' in held) {
      this.refused(req, server, held.refused);
      return undefined;
    }
    const opening = (async () => {
      const session = await this.options.openSession(server, access);
      const transport = new StatelessTransport();
      await session.connect(transport, () => void this.endOne(client, 'its gateway closed'));
      this.options.log.info(`serve: ${server}: 2026 requests of ${callerText(access?.caller)} served statelessly`);
      return { session, transport };
    })();
    const client: StatelessClient = { key, server, opening, lastSeen: Date.now(), release: held.release };
    this.clients.set(key, client);
    // A gateway that could not open leaves nothing: the next request tries again.
    opening.catch((error: unknown) => {
      this.options.log.error(`serve: ${server}: a gateway for 2026 requests could not start: ${firstLine(error)}`);
      if (this.clients.get(key) === client) this.clients.delete(key);
      held.release();
    });
    return client;
  }

  private refused(req: IncomingMessage, server: string, why: string): void {
    this.options.denials.deny({ remoteAddress: req.socket.remoteAddress ?? null, message: `serve: ${server}: ${why}` });
  }

  private endOne(client: StatelessClient, why: string): Promise<void> {
    return (client.closing ??= (async () => {
      if (this.clients.get(client.key) === client) this.clients.delete(client.key);
      client.release();
      const opened = await client.opening.catch(() => undefined);
      if (!opened) return;
      this.options.log.info(`serve: ${client.server}: stateless gateway ends (${why})`);
      await opened.transport.close();
      await opened.session.close().catch((error: Error) => this.options.log.error(`serve: ${error.message}`));
    })());
  }
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
}
