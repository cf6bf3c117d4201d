import type { ClientCapabilities, RequestId, Root } from '@modelcontextprotocol/sdk/types.js';
import type { AuditEvent } from '../audit/audit-record.js';
import { renderServerText } from '../util/render-server-text.js';
import { isObject } from '../mcp/json-rpc.js';
import { METHOD } from '../mcp/methods.js';

/**
 * Requests a server makes of its client — `sampling/createMessage` (use the client's model),
 * `elicitation/create` (ask the person), `roots/list` (which folders to work in) — and what
 * hintbox lets through. Pure; `server-request-broker.ts` answers them.
 */

/** A request of the client in flight in a sandbox (a tool call, or a read): what a server's request or log message is bound to. */
export interface InFlight {
  clientId: RequestId;
  /** The pending call (its process-unique number): a 2026 client's retry continues it under another `clientId`. */
  call: number;
  /** The tool, or the method of a read. */
  what: string;
  /** A 2026 client's call: its server's requests are asked through the call's answer (`input_required`). */
  modern?: ModernAsker;
}

/** How a server's request reaches a 2026 client (`server-input-rounds.ts`): no request of hintbox's, an answer and a retry. */
export interface ModernAsker {
  /** What the call's `_meta` envelope declares (the 2026 era has no `initialize`). */
  capabilities: ClientCapabilities;
  /** Why no question may be asked of this client now (its caller has as many calls parked as it may), if none may. */
  refusal(): string | undefined;
  ask(
    method: string,
    params: Record<string, unknown> | undefined,
    options: { timeoutMs: number; signal: AbortSignal },
  ): Promise<Record<string, unknown>>;
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
    options: { relatedRequestId: RequestId; timeoutMs: number; signal: AbortSignal },
  ): Promise<Record<string, unknown>>;
}

/** What the profile lets a server ask of the client (`serverRequests`), now (trust can be lost). */
export interface ServerRequestPolicy {
  sampling: boolean;
  elicitation: boolean;
  /** Elicitation by a link to open: the link can carry what the server read. */
  urlElicitation: boolean;
  roots: boolean;
}

/** The requests from a server that hintbox takes, by the feature of the policy that allows each. */
export const SERVER_REQUESTS = Object.freeze({
  [METHOD.createMessage]: 'sampling',
  [METHOD.elicit]: 'elicitation',
  [METHOD.listRoots]: 'roots',
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
    ...(policy.elicitation ? { elicitation: { form: {}, ...(policy.urlElicitation ? { url: {} } : {}) } } : {}),
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

/** A form field's name as hintbox passes it: the person may see it as it is (no title). */
const FIELD_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * Why a request from the server is not passed on to the client, or undefined when it may be:
 * the profile must allow it; sampling and elicitation must come during a tool call in that
 * sandbox (they are bound to it), the client must have declared the feature, and their params
 * must be what MCP says (an elicitation: an object with a string message; a form's field names
 * plain). `roots/list` is answered by hintbox itself, at any time: the client's own roots are
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
  if (method === METHOD.listRoots) return undefined;
  if (!bound) return `${method} outside any tool call of the client: nothing to bind it to`;
  if (pending >= MAX_PENDING_SERVER_REQUESTS) {
    return `${MAX_PENDING_SERVER_REQUESTS} requests of this server already wait for the client`;
  }
  if (!isObject(params)) return `${method}: params must be an object`;
  if (deeperThan(params, MAX_PARAMS_DEPTH)) return `${method}: params nested deeper than ${MAX_PARAMS_DEPTH}`;
  if (method === METHOD.createMessage && !client?.sampling) return 'the client does not support sampling';
  if (method === METHOD.elicit) {
    if (typeof params.message !== 'string') return 'elicitation/create: params.message must be a string';
    const url = params.mode === 'url';
    if (url && !policy.urlElicitation) {
      return 'the profile does not let this server send the person a link (serverRequests.urlElicitation)';
    }
    if (!client?.elicitation) return 'the client does not support elicitation';
    const modes = client.elicitation as { form?: unknown; url?: unknown };
    if (url && !modes.url) return 'the client does not support URL elicitation';
    // `{}` is form mode (the spec before modes).
    if (!url && modes.url && !modes.form) return 'the client does not support form elicitation';
    const schema = params.requestedSchema;
    const properties = isObject(schema) && isObject(schema.properties) ? Object.keys(schema.properties) : [];
    const odd = properties.find((name) => !FIELD_NAME.test(name));
    if (odd !== undefined) return `elicitation/create: a field name that is not plain (${renderServerText(odd)})`;
  }
  return undefined;
}

/**
 * A sampling request as the client gets it: as the server wrote it, but never asking for the
 * context of the client's other servers (`includeContext: "allServers"`, whose completion would
 * go back to this one): this server's at most.
 */
export function sampledParams(params: Record<string, unknown>): Record<string, unknown> {
  const sent = pick(params, SAMPLING_MEMBERS);
  if (sent.includeContext === 'allServers') sent.includeContext = 'thisServer';
  return sent;
}

/**
 * The members of a sampling request passed on (MCP 2025-11-25): nothing else of what the server
 * wrote — not `task` (a client that takes it answers at once, and the question outlives its
 * call), not `_meta` (a progress token of the server's choosing).
 */
const SAMPLING_MEMBERS = [
  'messages',
  'modelPreferences',
  'systemPrompt',
  'includeContext',
  'temperature',
  'maxTokens',
  'stopSequences',
  'metadata',
  'tools',
  'toolChoice',
] as const;
const FORM_MEMBERS = ['mode', 'message', 'requestedSchema'] as const;
const URL_MEMBERS = ['mode', 'message', 'url', 'elicitationId'] as const;

/** At most this deep a server's request: deeper is refused (nothing is passed on unrendered). */
export const MAX_PARAMS_DEPTH = 32;

function pick(params: Record<string, unknown>, members: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const member of members) if (Object.hasOwn(params, member)) out[member] = params[member];
  return out;
}

function deeperThan(value: unknown, limit: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (limit === 0) return true;
  return Object.values(value).some((v) => deeperThan(v, limit - 1));
}

/**
 * An elicitation of the server as the person sees it: its message said to be the server's (by
 * the profile's name, which the operator chose) and, like every text a server made, rendered
 * so that it can neither forge a line nor act on a terminal — every string of its form too
 * (titles, descriptions, choices, defaults), keys kept. hintbox's own confirmations say they
 * are hintbox's: the two cannot be taken for each other. Never changes its input.
 */
export function markedElicitation(serverName: string, params: Record<string, unknown>): Record<string, unknown> {
  const message = typeof params.message === 'string' ? renderServerText(params.message) : '';
  const marked: Record<string, unknown> = {
    ...pick(params, params.mode === 'url' ? URL_MEMBERS : FORM_MEMBERS),
    message: `The MCP server "${serverName}" asks (its own question, not hintbox's): ${message}`,
  };
  if (params.requestedSchema !== undefined) marked.requestedSchema = renderStrings(params.requestedSchema);
  return marked;
}

/** Every string in a JSON value rendered (`renderServerText`), keys as they are, own keys only. */
function renderStrings(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return renderServerText(value);
  if (depth > 32 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => renderStrings(v, depth + 1));
  const copy: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    // An own entry whatever the key (a field named `__proto__` stays a field).
    Object.defineProperty(copy, key, {
      value: renderStrings(v, depth + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return copy;
}
