import { isObject } from '../mcp/json-rpc.js';
import { DISCOVER_METHOD, META_KEY, MODERN_PROTOCOL_VERSION, RETRY_FIELDS } from './protocol-era.js';

/**
 * The server side of the two eras (pure): how hintbox, as a client of a sandboxed server,
 * tells a 2026 server from a 2025 one and what it writes to a 2026 server. The transport that
 * applies it is `modern-upstream-transport.ts`.
 */

/** The era of a sandboxed server, found once when it starts (`server/discover` answered with 2026-07-28, or not). */
export type UpstreamEra = '2025' | '2026';

/** Who hintbox says it is to a 2026 server, in every request's envelope. */
export interface UpstreamIdentity {
  clientInfo: { name: string; version: string };
  /** What hintbox declares to the server (the profile's `serverRequests`), as to a 2025 server in `initialize`. */
  capabilities: Record<string, unknown>;
}

/** What a 2026 server said of itself in its `server/discover` answer. */
export interface DiscoveredServer {
  capabilities: Record<string, unknown>;
  serverInfo: { name: string; version: string };
  instructions?: string;
}

/**
 * The id of hintbox's `server/discover` probe: a string the SDK client never uses (its ids are
 * numbers), so a late answer to the probe can be told apart and dropped.
 */
export const PROBE_ID = 'hintbox-probe-discover';

/** The `_meta` envelope of a request to a 2026 server. */
export function envelopeOf(identity: UpstreamIdentity, logLevel?: string): Record<string, unknown> {
  return {
    [META_KEY.protocolVersion]: MODERN_PROTOCOL_VERSION,
    [META_KEY.clientInfo]: identity.clientInfo,
    [META_KEY.clientCapabilities]: identity.capabilities,
    ...(logLevel ? { [META_KEY.logLevel]: logLevel } : {}),
  };
}

/** The probe hintbox sends a server first. */
export function discoverRequest(identity: UpstreamIdentity): {
  jsonrpc: '2.0';
  id: string;
  method: string;
  params: Record<string, unknown>;
} {
  return { jsonrpc: '2.0', id: PROBE_ID, method: DISCOVER_METHOD, params: { _meta: envelopeOf(identity) } };
}

/**
 * A request's params as a 2026 server gets them: hintbox's envelope, whatever the client's
 * request carried in those keys (a 2026 client's own envelope speaks for the client, not for
 * hintbox, which is the server's client). Other `_meta` keys (`progressToken`, `traceparent`)
 * pass. The round trip's fields (`requestState`, `inputResponses`) never pass from a client:
 * only hintbox's own retry adds them (`retryParams`), after the server's questions went through
 * hintbox's rules; a client's would answer the server's questions unasked, unmarked, unaudited.
 */
export function withEnvelope(params: unknown, envelope: Record<string, unknown>): Record<string, unknown> {
  const base = { ...(isObject(params) ? params : {}) };
  delete base.requestState;
  delete base.inputResponses;
  const meta = isObject(base._meta) ? base._meta : {};
  return { ...base, _meta: { ...meta, ...envelope } };
}

/**
 * What a `server/discover` answer says, when it names 2026-07-28 among the versions the server
 * speaks; undefined otherwise (an error, another version, an answer that is not one): then the
 * server is spoken to in 2025.
 */
export function discoveredServer(answer: unknown): DiscoveredServer | undefined {
  if (!isObject(answer) || !isObject(answer.result)) return undefined;
  const result = answer.result;
  const versions = result.supportedVersions;
  if (!Array.isArray(versions) || !versions.includes(MODERN_PROTOCOL_VERSION)) return undefined;
  const meta = isObject(result._meta) ? result._meta : {};
  const info = meta[META_KEY.serverInfo];
  const serverInfo =
    isObject(info) && typeof info.name === 'string' && typeof info.version === 'string'
      ? { name: info.name, version: info.version }
      : { name: 'unknown', version: 'unknown' };
  return {
    capabilities: isObject(result.capabilities) ? result.capabilities : {},
    serverInfo,
    ...(typeof result.instructions === 'string' ? { instructions: result.instructions } : {}),
  };
}

/**
 * The `initialize` answer hintbox gives its own SDK client for a 2026 server (which has no
 * `initialize`): the version the client asked for, and what the server said in `server/discover`.
 */
export function initializeAnswer(requested: unknown, server: DiscoveredServer): Record<string, unknown> {
  return {
    protocolVersion: typeof requested === 'string' ? requested : '2025-11-25',
    capabilities: server.capabilities,
    serverInfo: server.serverInfo,
    ...(server.instructions ? { instructions: server.instructions } : {}),
  };
}

/**
 * A 2026 server's result as the rest of hintbox (2025 inside) takes it: without `resultType`,
 * the cache fields and the server's info in `_meta`. The client-facing layer stamps a 2026
 * client's answers again with what hintbox decides (`stampResult`), never with the server's.
 */
export function legacyResult(result: Record<string, unknown>): Record<string, unknown> {
  const copy: Record<string, unknown> = { ...result };
  for (const field of ['resultType', 'ttlMs', 'cacheScope', ...RETRY_FIELDS, 'inputRequests']) delete copy[field];
  if (isObject(copy._meta)) {
    const meta: Record<string, unknown> = { ...copy._meta };
    delete meta[META_KEY.serverInfo];
    if (Object.keys(meta).length === 0) delete copy._meta;
    else copy._meta = meta;
  }
  return copy;
}

/** One question of a 2026 server's `input_required`, under the key it is to be answered by. */
export interface InputRequest {
  key: string;
  method: string;
  params: Record<string, unknown>;
}

/** What a 2026 server asks in an `input_required` result, and the state it wants echoed. */
export interface InputRequired {
  requests: InputRequest[];
  /** Echoed on the retry byte for byte (a string, as the spec has it), never read by hintbox. */
  requestState?: unknown;
}

/**
 * The questions of an `input_required` result; undefined for any other result. A question
 * that is not `{ method: string, params?: object }` is left out: its key stays unanswered, and
 * the server, which asked it, decides what that means on the retry.
 */
export function inputRequiredOf(result: unknown): InputRequired | undefined {
  if (!isObject(result) || result.resultType !== 'input_required') return undefined;
  const requests: InputRequest[] = [];
  const asked = isObject(result.inputRequests) ? result.inputRequests : {};
  for (const [key, request] of Object.entries(asked)) {
    if (!isObject(request) || typeof request.method !== 'string') continue;
    if (request.params !== undefined && !isObject(request.params)) continue;
    requests.push({ key, method: request.method, params: request.params ?? {} });
  }
  return { requests, ...(result.requestState !== undefined ? { requestState: result.requestState } : {}) };
}

/** The retry of a request after `input_required`: the same params, the answers, the server's state untouched. */
export function retryParams(
  params: Record<string, unknown>,
  asked: InputRequired,
  responses: Record<string, unknown>,
): Record<string, unknown> {
  return {
    ...params,
    inputResponses: responses,
    ...(asked.requestState !== undefined ? { requestState: asked.requestState } : {}),
  };
}
