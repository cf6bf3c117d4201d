import type { ClientCapabilities, Root } from '@modelcontextprotocol/sdk/types.js';
import { renderServerText } from '../util/render-server-text.js';
import { isObject } from './forwarded-call.js';

/**
 * Requests a server makes of its client — `sampling/createMessage` (use the client's model),
 * `elicitation/create` (ask the person), `roots/list` (which folders to work in) — and what
 * hintbox lets through. Pure.
 */

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
): string | undefined {
  const feature = SERVER_REQUESTS[method];
  if (!policy[feature]) return `the profile does not let this server use ${feature} (serverRequests.${feature})`;
  if (method === 'roots/list') return undefined;
  if (!bound) return `${method} outside any request of the client: nothing to bind it to`;
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
