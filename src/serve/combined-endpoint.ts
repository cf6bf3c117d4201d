import type { IncomingHttpHeaders } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestParamsSchema,
  CallToolRequestSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  isJSONRPCErrorResponse,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  McpError,
  ToolListChangedNotificationSchema,
  type ClientCapabilities,
  type RequestId,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { isModernRequest, RETRY_FIELDS } from '../protocol/protocol-era.js';
import type { Logger } from '../util/logger.js';
import { VERSION } from '../version.js';
import type { Access, AuthResult, Authenticator } from './authenticator.js';
import type { ClientSession } from './client-session.js';

/**
 * `hintbox serve --one-endpoint`: every server a caller may use behind one MCP endpoint, `/mcp`,
 * each tool named `<server>__<tool>`. It is a client of the per-server sessions a caller would
 * get at `/mcp/<server>` (the same gateways: approvals, pins, tags, audit, over the same shared
 * sandboxes), connected in memory, and passes each call to its server's, with its progress and
 * cancellation; what a server's gateway asks (a confirmation, the server's own question or
 * sampling) goes to the client. Tools only: prompts and resources stay at `/mcp/<server>`.
 */

/** The pseudo server name of the combined endpoint in the HTTP server and the audit trail. */
export const COMBINED = '*';
/** Between a server's name and its tool's in the combined endpoint's tool names. */
export const SEPARATOR = '__';

/**
 * A `tools/call` with its params as the client sent them: the SDK's schema would strip a 2026
 * retry's `requestState` and `inputResponses`, and the member's gateway would ask again forever.
 */
const CallToolAsSent = CallToolRequestSchema.extend({ params: CallToolRequestParamsSchema.loose() });

/** The credentials of `/mcp`: each server's own check; the servers they allow, with their tags. */
export function combinedAuthenticator(inner: Authenticator, servers: () => readonly string[]): Authenticator {
  return {
    description: inner.description,
    document: inner.document?.bind(inner),
    challenge: (denial, server) => inner.challenge(denial, server),
    authenticate: async (headers: IncomingHttpHeaders, server: string): Promise<AuthResult> => {
      if (server !== COMBINED) return inner.authenticate(headers, server);
      const results = await Promise.all(
        servers().map(async (name) => [name, await inner.authenticate(headers, name, COMBINED)] as const),
      );
      const allowed = results.flatMap(([name, r]) => (r.allowed ? [[name, r] as const] : []));
      const first = allowed[0]?.[1];
      if (!first) {
        const denial = results.find(([, r]) => !r.allowed && r.status === 401)?.[1] ?? results[0]?.[1];
        if (!denial || denial.allowed) return { allowed: false, status: 403, reason: 'no servers', caller: null };
        return denial;
      }
      return { allowed: true, caller: first.caller, servers: new Map(allowed.map(([name, r]) => [name, r.tags])) };
    },
  };
}

/** A combined session over each member server's session (by server name), as the client sees one. */
export function combinedSession(members: ReadonlyMap<string, ClientSession>, log: Logger): ClientSession {
  const server = new Server(
    { name: 'hintbox', version: VERSION, title: 'hintbox: every server' },
    { capabilities: { tools: { listChanged: true } } },
  );
  const clients = new Map<string, Client>();
  /** Which of the client's calls each member's request to it belongs to, by server. */
  const links = new Map<string, RequestLinks>();
  let ready: Promise<void> | undefined;
  let closing: Promise<void> | undefined;

  const close = (): Promise<void> =>
    (closing ??= (async () => {
      await Promise.allSettled([...clients.values()].map((client) => client.close()));
      await Promise.allSettled([...members.values()].map((member) => member.close()));
      await server.close().catch(() => undefined);
    })());

  /** Connects to every member as a client with the capabilities the client declared. */
  const connectMembers = (capabilities: ClientCapabilities): Promise<void> =>
    (ready ??= (async () => {
      const asked = {
        ...(capabilities.elicitation ? { elicitation: capabilities.elicitation } : {}),
        ...(capabilities.sampling ? { sampling: capabilities.sampling } : {}),
      };
      await Promise.all(
        [...members].map(async ([name, member]) => {
          const [ours, theirs] = InMemoryTransport.createLinkedPair();
          const linked = new RequestLinks();
          links.set(name, linked);
          await member.connect(eachInTurn(linked.member(theirs)), () => void close());
          const client = new Client({ name: 'hintbox-one-endpoint', version: VERSION }, { capabilities: asked });
          // Asked of the client as the server's gateway asked them (as it declared it can answer), on
          // the stream of the call they belong to: a client need not listen anywhere else.
          const related = (id: RequestId): { relatedRequestId?: RequestId } => {
            const call = linked.callOf(id);
            return call === undefined ? {} : { relatedRequestId: call };
          };
          if (asked.elicitation) {
            client.setRequestHandler(ElicitRequestSchema, (request, extra) =>
              server.elicitInput(request.params, { ...related(extra.requestId), signal: extra.signal }),
            );
          }
          if (asked.sampling) {
            client.setRequestHandler(CreateMessageRequestSchema, (request, extra) =>
              server.createMessage(request.params, { ...related(extra.requestId), signal: extra.signal }),
            );
          }
          client.setNotificationHandler(ToolListChangedNotificationSchema, () =>
            server.sendToolListChanged().catch(() => undefined),
          );
          await client.connect(linked.ours(ours));
          clients.set(name, client);
        }),
      );
    })());

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    await connectMembers(server.getClientCapabilities() ?? {});
    const tools: Tool[] = [];
    const servers = [...clients.keys()];
    for (const [name, client] of clients) {
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : {});
        for (const tool of page.tools) {
          const combined = `${name}${SEPARATOR}${tool.name}`;
          // A name two servers could have made ("a" + "b__c", "a__b" + "c") is not served.
          if (memberOf(combined, servers)?.server === name) tools.push({ ...tool, name: combined });
          else log.warn(`one endpoint: ${combined} could be a tool of two servers: left out`);
        }
        cursor = page.nextCursor;
      } while (cursor);
    }
    return { tools };
  });

  server.setRequestHandler(CallToolAsSent, async (request, extra) => {
    await connectMembers(server.getClientCapabilities() ?? {});
    const found = memberOf(request.params.name, [...clients.keys()]);
    const client = found && clients.get(found.server);
    if (!found || !client) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    const { progressToken, ...meta } = request.params._meta ?? {};
    // A 2026 client's retry: its state and answers are the member gateway's to redeem (never a
    // server's). A 2025 request's params stay as they were before (these fields left out).
    const fields = isModernRequest(request.params) ? RETRY_FIELDS : [];
    const retry = Object.fromEntries(fields.flatMap((f) => (f in request.params ? [[f, request.params[f]]] : [])));
    /** Progress passed on: sent before the answer, which would end the call's stream. */
    const passed: Promise<void>[] = [];
    try {
      const result = await client.callTool(
        {
          name: found.tool,
          ...(request.params.arguments ? { arguments: request.params.arguments } : {}),
          _meta: meta,
          ...retry,
        },
        undefined,
        {
          signal: extra.signal,
          // What the member asks as part of this call goes to the client as part of it.
          relatedRequestId: extra.requestId,
          // The server's gateway keeps the call's ceiling (timeouts.call) and a person's time to answer.
          timeout: 2 ** 31 - 1,
          ...(progressToken !== undefined
            ? {
                onprogress: (progress) =>
                  void passed.push(
                    extra
                      .sendNotification({ method: 'notifications/progress', params: { ...progress, progressToken } })
                      .catch(() => undefined),
                  ),
              }
            : {}),
        },
      );
      await Promise.all(passed);
      return result;
    } finally {
      links.get(found.server)?.ended(extra.requestId);
    }
  });

  return {
    close,
    connect: async (transport: Transport, onClosed: () => void) => {
      server.onclose = onClosed;
      await server.connect(transport);
    },
  };
}

/** The server and tool a combined tool name stands for; undefined for none, or two servers that could have made it. */
export function memberOf(combined: string, servers: readonly string[]): { server: string; tool: string } | undefined {
  const found = servers.filter(
    (name) => combined.startsWith(`${name}${SEPARATOR}`) && combined.length > name.length + SEPARATOR.length,
  );
  const server = found.length === 1 ? found[0] : undefined;
  return server === undefined ? undefined : { server, tool: combined.slice(server.length + SEPARATOR.length) };
}

/**
 * Servers no tool of which the combined endpoint could serve, each with the server that hides
 * it: `x__y` beside `x` (every `x__y__<tool>` could be `x`'s tool `y__<tool>`, so none is served).
 * `hintbox serve --one-endpoint` refuses such a folder (and a reload that would make one).
 */
export function hiddenServers(names: readonly string[]): { server: string; by: string }[] {
  return names.flatMap((server) =>
    names.filter((other) => server.startsWith(`${other}${SEPARATOR}`)).map((by) => ({ server, by })),
  );
}

/** The servers a combined session may use, and each one's access (undefined tags: every tool). */
export function membersOf(access: Access | null, all: readonly string[]): Map<string, Access | null> {
  if (!access?.servers) return new Map(all.map((name) => [name, access]));
  return new Map(
    [...access.servers].map(([name, tags]) => [name, { caller: access.caller, ...(tags ? { tags } : {}) }]),
  );
}

/**
 * A transport whose messages are delivered each in a turn of its own, as over a socket: the
 * SDK handles a notification a microtask late and a response at once, so a call's last
 * progress, handed over in the same turn as its answer, would come after it and be lost.
 */
function eachInTurn<T extends Transport>(transport: T): T {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => new Promise((resolve) => setImmediate(() => resolve(send(message, options))));
  return transport;
}

/**
 * What the SDK's in-memory pair drops: which request a message belongs to (`relatedRequestId`).
 * Over HTTP it decides the stream a server's request goes on: the POST stream of the call it
 * belongs to, else the GET stream, which a client need not open. Between the combined endpoint
 * and one member, this keeps the two links that make a member's request (a confirmation, the
 * server's own question) the client's call's: our call to the member and the client's call it
 * serves, and the member's request and our call it was sent as part of.
 */
class RequestLinks {
  /** Our call to the member (its id on the pair) → the client's call it serves. */
  private readonly callerOf = new Map<RequestId, RequestId>();
  /** The member's request to us → our call it belongs to. */
  private readonly partOf = new Map<RequestId, RequestId>();

  /** Our side of the pair: each call sent as part of a client's call is noted. */
  ours<T extends Transport>(transport: T): T {
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      if (isJSONRPCRequest(message) && options?.relatedRequestId !== undefined) {
        this.callerOf.set(message.id, options.relatedRequestId);
      } else if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && message.id !== undefined) {
        this.partOf.delete(message.id); // answered
      }
      return send(message, options);
    };
    return transport;
  }

  /** The member's side: each request it sends as part of one of our calls is noted. */
  member<T extends Transport>(transport: T): T {
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      if (isJSONRPCRequest(message) && options?.relatedRequestId !== undefined) {
        this.partOf.set(message.id, options.relatedRequestId);
      } else if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) {
        if (message.id !== undefined) this.callerOf.delete(message.id); // our call answered
      }
      return send(message, options);
    };
    return transport;
  }

  /** The client's call a member's request (by its id) belongs to; undefined when none is known. */
  callOf(request: RequestId): RequestId | undefined {
    const ours = this.partOf.get(request);
    return ours === undefined ? undefined : this.callerOf.get(ours);
  }

  /** A client's call ended (answered, failed or cancelled): what served it is forgotten. */
  ended(call: RequestId): void {
    for (const [ours, theirs] of this.callerOf) if (theirs === call) this.callerOf.delete(ours);
  }
}
