import {
  ErrorCode,
  type ClientCapabilities,
  type JSONRPCMessage,
  type RequestId,
  type Root,
} from '@modelcontextprotocol/sdk/types.js';
import type { AuditEvent } from '../audit/audit-record.js';
import type { Logger } from '../util/logger.js';
import { renderServerText } from '../util/render-server-text.js';
import { isObject, type JsonRpcObject } from './forwarded-call.js';
import type { Upstream } from './sandbox-pool.js';

/**
 * Requests a server makes of its client — `sampling/createMessage` (use the client's model),
 * `elicitation/create` (ask the person), `roots/list` (which folders to work in) — what hintbox
 * lets through (pure), and how one is answered (`answerServerRequest`).
 */

/** A request of the client in flight in a sandbox (a tool call or a read): what a server request is bound to. */
export interface InFlight {
  clientId: RequestId;
  /** The tool, or the method of a read. */
  what: string;
}

/** What the relay records (the session adds its id and the server's name). */
export type RequestAuditEvent = DistributiveOmit<
  Extract<AuditEvent, { type: 'request' | 'server.request' | 'server.request.answered' }>,
  'session' | 'server'
>;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** The person's side of the client, for requests of the server. */
export interface ClientPeer {
  capabilities(): ClientCapabilities | undefined;
  /** Sends a request to the client as part of the client's request `relatedRequestId`. */
  request(
    method: string,
    params: Record<string, unknown> | undefined,
    options: { relatedRequestId: RequestId; timeoutMs: number },
  ): Promise<Record<string, unknown>>;
}

/** What the profile lets a server ask of the client (`serverRequests`). */
export interface ServerRequestPolicy {
  sampling: boolean;
  elicitation: boolean;
  roots: boolean;
}

/** The requests from a server that hintbox takes, by the feature of the policy that allows each. */
export const SERVER_REQUESTS = Object.freeze({
  'sampling/createMessage': 'sampling',
  'elicitation/create': 'elicitation',
  'roots/list': 'roots',
} as const satisfies Record<string, keyof ServerRequestPolicy>);

export type ServerRequestMethod = keyof typeof SERVER_REQUESTS;

export function isServerRequest(method: unknown): method is ServerRequestMethod {
  return typeof method === 'string' && Object.hasOwn(SERVER_REQUESTS, method);
}

/**
 * What hintbox, as the sandboxes' client, declares at `initialize`: the features the profile
 * allows, so that a well-behaved server does not ask for the others. (A server that asks anyway
 * is refused.)
 */
export function upstreamClientCapabilities(policy: ServerRequestPolicy): ClientCapabilities {
  return {
    ...(policy.sampling ? { sampling: {} } : {}),
    ...(policy.elicitation ? { elicitation: { form: {}, url: {} } } : {}),
    ...(policy.roots ? { roots: {} } : {}),
  };
}

/** At most this many requests of one sandbox's server wait for the client at once; more are refused. */
export const MAX_PENDING_SERVER_REQUESTS = 4;

/** The roots a server is told: its sandboxes' mount targets, never the client's host paths. */
export function sandboxRoots(mounts: readonly { target: string }[]): Root[] {
  // Percent-encoded: a target may hold a space, `#` or `?`, which would end the path of the URI.
  return mounts.map((m) => ({
    uri: `file://${encodeURI(m.target).replace(/[?#]/g, encodeURIComponent)}`,
    name: m.target,
  }));
}

/**
 * Why a request from the server is not passed on to the client, or undefined when it may be:
 * the profile must allow it; sampling and elicitation must come while a request of the client
 * is in flight in that sandbox (they are bound to it) and the client must have declared the
 * feature. `roots/list` is answered by hintbox itself, at any time: the client's own roots are
 * host paths, and the sandbox's are no secret of the client's.
 */
export function refusalOf(
  method: ServerRequestMethod,
  params: unknown,
  policy: ServerRequestPolicy,
  client: ClientCapabilities | undefined,
  bound: boolean,
  /** The sandbox's requests already waiting for the client. */
  pending = 0,
): string | undefined {
  const feature = SERVER_REQUESTS[method];
  if (!policy[feature]) return `the profile does not let this server use ${feature} (serverRequests.${feature})`;
  if (method === 'roots/list') return undefined;
  if (!bound) return `${method} outside any request of the client: nothing to bind it to`;
  if (pending >= MAX_PENDING_SERVER_REQUESTS) {
    return `${MAX_PENDING_SERVER_REQUESTS} requests of this server already wait for the client`;
  }
  if (method === 'sampling/createMessage' && !client?.sampling) return 'the client does not support sampling';
  if (method === 'elicitation/create') {
    if (!client?.elicitation) return 'the client does not support elicitation';
    const url = isObject(params) && params.mode === 'url';
    const modes = client.elicitation as { form?: unknown; url?: unknown };
    if (url && !modes.url) return 'the client does not support URL elicitation';
    // `{}` is form mode (the spec before modes).
    if (!url && modes.url && !modes.form) return 'the client does not support form elicitation';
  }
  return undefined;
}

/**
 * An elicitation of the server as the person sees it: its message said to be the server's (by
 * the profile's name, which the operator chose) and, like every text a server made, rendered
 * so that it can neither forge a line nor act on a terminal; the titles and descriptions of
 * its form's fields too. hintbox's own confirmations say they are hintbox's: the two cannot be
 * taken for each other.
 */
export function markedElicitation(serverName: string, params: Record<string, unknown>): Record<string, unknown> {
  const message = typeof params.message === 'string' ? renderServerText(params.message) : '';
  const marked: Record<string, unknown> = {
    ...params,
    message: `The MCP server "${serverName}" asks (its own question, not hintbox's): ${message}`,
  };
  const schema = params.requestedSchema;
  if (isObject(schema) && isObject(schema.properties)) {
    // fromEntries defines own keys: assigning a field named `__proto__` would set the prototype and drop the field.
    const properties = Object.fromEntries(
      Object.entries(schema.properties).map(([name, property]) => [
        name,
        isObject(property) ? renderTexts(property, ['title', 'description']) : property,
      ]),
    );
    marked.requestedSchema = { ...schema, properties };
  }
  return marked;
}

function renderTexts(value: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  const copy = { ...value };
  for (const key of keys) if (typeof copy[key] === 'string') copy[key] = renderServerText(copy[key]);
  return copy;
}

/** What answering a server's request needs. */
export interface ServerRequestContext {
  serverName: string;
  policy: ServerRequestPolicy;
  peer: ClientPeer;
  roots(): Root[];
  timeoutMs: number;
  log: Logger;
  record(event: RequestAuditEvent): void;
}

/**
 * A request of the server, in its sandbox: refused (recorded, logged, answered with an error),
 * answered by hintbox (`roots/list`: the sandbox's folders), or passed to the client as part of
 * the request it is bound to — an elicitation marked as the server's — and the client's answer
 * passed back. Recorded before it is passed on, and again once answered.
 */
export async function answerServerRequest(options: {
  context: ServerRequestContext;
  /** Names the request in both of its audit lines. */
  ref: string;
  sandbox: string;
  upstream: Upstream;
  method: ServerRequestMethod;
  request: JsonRpcObject;
  /** The client's request in flight in that sandbox it is bound to (the oldest). */
  bound: InFlight | undefined;
  /** The sandbox's requests already waiting for the client. */
  pending: number;
}): Promise<void> {
  const { context, ref, sandbox, upstream, method, request, bound } = options;
  const answer = (message: Record<string, unknown>): Promise<void> =>
    upstream.forwarded.send({ jsonrpc: '2.0', id: request.id!, ...message } as JSONRPCMessage).catch(() => undefined);
  const base = { ref, sandbox, method, boundTo: bound?.what ?? null };
  const capabilities = context.peer.capabilities();
  const refused = refusalOf(method, request.params, context.policy, capabilities, !!bound, options.pending);
  if (refused) {
    context.record({ type: 'server.request', ...base, decision: 'refused', reason: refused });
    context.log.warn(`${context.serverName} (sandbox ${sandbox}) asked for ${method}: refused, ${refused}`);
    return answer({ error: { code: ErrorCode.InvalidRequest, message: `hintbox refused ${method}: ${refused}` } });
  }
  if (method === 'roots/list') {
    context.record({ type: 'server.request', ...base, decision: 'answered-by-hintbox', reason: null });
    return answer({ result: { roots: context.roots() } });
  }
  if (!bound) return; // refused above: sampling and elicitation are bound to a request
  context.record({ type: 'server.request', ...base, decision: 'passed', reason: null });
  const params =
    method === 'elicitation/create' && isObject(request.params)
      ? markedElicitation(context.serverName, request.params)
      : request.params;
  try {
    const result = await context.peer.request(method, params, {
      relatedRequestId: bound.clientId,
      timeoutMs: context.timeoutMs,
    });
    // An elicitation's answer says what the person did (accept, decline, cancel); never its content.
    const detail = typeof result.action === 'string' ? result.action : null;
    context.record({ type: 'server.request.answered', ref, sandbox, method, outcome: 'ok', detail });
    await answer({ result });
  } catch (error) {
    const detail = (error as Error).message;
    context.record({ type: 'server.request.answered', ref, sandbox, method, outcome: 'error', detail });
    const code = (error as { code?: unknown }).code;
    await answer({ error: { code: typeof code === 'number' ? code : ErrorCode.InternalError, message: detail } });
  }
}
