import { isObject } from '../mcp/json-rpc.js';

/**
 * The two eras of MCP a client of hintbox may speak, told apart per request (pure).
 *
 * - 2025 (`2025-03-26` … `2025-11-25`): a session opened with `initialize`; the server asks the
 *   client in the middle of a call (`elicitation/create`).
 * - 2026 (`2026-07-28`): stateless; every request carries its protocol version, the client's
 *   info and capabilities in `_meta`; a client first asks `server/discover`; a server that needs
 *   input answers `input_required` (`inputRequests`, `requestState`) and the client retries the
 *   same request with `inputResponses` and the state echoed byte for byte. Every result says
 *   its `resultType`.
 */

/** The 2026 revision hintbox speaks to clients. */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';

/** The reserved `_meta` keys of a 2026 request's envelope. */
export const META_KEY = Object.freeze({
  protocolVersion: 'io.modelcontextprotocol/protocolVersion',
  clientInfo: 'io.modelcontextprotocol/clientInfo',
  clientCapabilities: 'io.modelcontextprotocol/clientCapabilities',
  logLevel: 'io.modelcontextprotocol/logLevel',
  serverInfo: 'io.modelcontextprotocol/serverInfo',
} as const);

/** The method a 2026 client asks first (and whenever it wants the server's capabilities). */
export const DISCOVER_METHOD = 'server/discover';

/** The fields of a retry that belong to the round trip, not to the call (never forwarded to a server). */
export const RETRY_FIELDS = ['requestState', 'inputResponses'] as const;

/** What a 2026 client's retry carried back: the echoed state and the answers to hintbox's questions. */
export interface RoundTrip {
  /** The request's envelope declares form elicitation (an `input_required` question can be shown). */
  canElicit: boolean;
  /** The `requestState` echoed by the client; untrusted until verified. */
  requestState?: unknown;
  /** The client's answers, keyed as hintbox asked (`inputResponses`); untrusted. */
  inputResponses?: unknown;
}

/** The protocol version a request declares in its `_meta` envelope (2026 era), or undefined (2025 era). */
export function declaredVersion(params: unknown): string | undefined {
  const meta = isObject(params) ? params._meta : undefined;
  const version = isObject(meta) ? meta[META_KEY.protocolVersion] : undefined;
  return typeof version === 'string' ? version : undefined;
}

/** Whether a request is of the 2026 era: its envelope names the 2026 revision. */
export function isModernRequest(params: unknown): boolean {
  return declaredVersion(params) === MODERN_PROTOCOL_VERSION;
}

/** The round-trip fields of a 2026 request (an empty object on its first try); undefined for a 2025 request. */
export function roundTripOf(params: unknown): RoundTrip | undefined {
  if (!isModernRequest(params) || !isObject(params)) return undefined;
  const meta = params._meta as Record<string, unknown>;
  const capabilities = meta[META_KEY.clientCapabilities];
  const elicitation = isObject(capabilities) ? capabilities.elicitation : undefined;
  return {
    // `elicitation: {}` means form mode (the spec's default); `{ url: {} }` alone does not.
    canElicit: isObject(elicitation) && (Object.keys(elicitation).length === 0 || isObject(elicitation.form)),
    ...(params.requestState !== undefined ? { requestState: params.requestState } : {}),
    ...(params.inputResponses !== undefined ? { inputResponses: params.inputResponses } : {}),
  };
}

/**
 * A 2026 request's params as a 2025 server gets them: without the round trip's fields (the
 * state is hintbox's, the answers were the person's to hintbox) and without the envelope's
 * reserved keys (a 2025 server has its session for them). Other `_meta` keys (`progressToken`,
 * `traceparent`) pass. A 2025 request is returned as it is (the same object).
 */
export function forUpstream(params: Record<string, unknown>): Record<string, unknown> {
  if (!isModernRequest(params)) return params;
  const copy: Record<string, unknown> = { ...params };
  for (const field of RETRY_FIELDS) delete copy[field];
  if (isObject(copy._meta)) {
    const meta: Record<string, unknown> = { ...copy._meta };
    for (const key of [META_KEY.protocolVersion, META_KEY.clientInfo, META_KEY.clientCapabilities, META_KEY.logLevel]) {
      delete meta[key];
    }
    if (Object.keys(meta).length === 0) delete copy._meta;
    else copy._meta = meta;
  }
  return copy;
}

/**
 * Marks a result hintbox itself made for a 2026 client (an `input_required`). A symbol: it never
 * reaches the wire, so no server's JSON can carry it.
 */
const HINTBOX_OWN = Symbol('hintbox.ownResult');

/** `result`, marked as hintbox's own: its `resultType` is kept as it is. */
export function ownResult<T extends object>(result: T): T {
  return Object.assign(result, { [HINTBOX_OWN]: true });
}

/** The methods whose 2026 results say how long and for whom they may be cached. */
const CACHEABLE = new Set([
  'tools/list',
  'prompts/list',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'server/discover',
]);

/**
 * Never cached, for nobody else: what hintbox lists is filtered per caller (approvals, trust,
 * pins) and changes without notice to a 2026 client (no `subscriptions/listen` yet), so a
 * client must ask again.
 */
const NO_CACHE = { ttlMs: 0, cacheScope: 'private' } as const;

/**
 * The answer to a 2026 request of `method`, as its era requires: a `resultType`, and for the
 * cacheable methods `ttlMs` and `cacheScope` (`NO_CACHE`). Only hintbox's own results
 * (`ownResult`) keep the `resultType` they have; any other is `complete`, whatever it said: a
 * 2025 server has no `resultType`, and one that writes `input_required` would ask the person
 * through the client past hintbox's policy of what a server may ask.
 */
export function stampResult(method: string, result: unknown): unknown {
  if (!isObject(result) || HINTBOX_OWN in result) return result;
  return { ...result, ...(CACHEABLE.has(method) ? NO_CACHE : {}), resultType: 'complete' };
}

/** What hintbox tells a 2026 client that asks `server/discover`. */
export interface DiscoverAnswer {
  capabilities: Record<string, unknown>;
  serverInfo: { name: string; version: string; title?: string };
  instructions?: string;
}

/** The `server/discover` result: the versions hintbox speaks, its capabilities, who it is. */
export function discoverResult(answer: DiscoverAnswer): Record<string, unknown> {
  return {
    resultType: 'complete',
    supportedVersions: [MODERN_PROTOCOL_VERSION],
    capabilities: answer.capabilities,
    ...(answer.instructions ? { instructions: answer.instructions } : {}),
    ...NO_CACHE,
    _meta: { [META_KEY.serverInfo]: answer.serverInfo },
  };
}
