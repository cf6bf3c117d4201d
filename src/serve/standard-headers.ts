import { isUtf8 } from 'node:buffer';
import type { IncomingHttpHeaders } from 'node:http';
import { isObject } from '../mcp/json-rpc.js';
import { declaredVersion, isModernRequest } from '../protocol/protocol-era.js';

/**
 * The standard request headers of MCP 2026-07-28 over streamable HTTP (pure): a 2026 request
 * POST names its protocol version, its method and, for the methods that name a tool, prompt or
 * resource, that name, in headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`), so that a
 * proxy, a load balancer or a WAF can route and filter without reading the body. That is only
 * safe when the headers say what the body does: a request whose header says `tools/list` while
 * its body calls a write tool would pass a filter on headers and run the write. So each header
 * is required and checked against the body; any difference refuses the whole request.
 */

/** JSON-RPC error of a header missing or disagreeing with the body (the spec's `HeaderMismatch`; HTTP 400). */
export const HEADER_MISMATCH = -32020;

/** The body field `Mcp-Name` mirrors, per method (the spec's table; tasks are an extension hintbox does not serve). */
const NAME_SOURCE: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
};

const BASE64_PREFIX = '=?base64?';
const BASE64_SUFFIX = '?=';

/** Strict base64 (RFC 4648, the standard alphabet, padded): groups of four, `=` only at the end. */
const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * A header value as the spec encodes it: plain ASCII, or `=?base64?<utf-8 in base64>?=`;
 * undefined when the wrapped value is not strictly that: a character outside the alphabet,
 * missing or extra padding, spare bits set (it does not re-encode to itself), or bytes that are
 * not UTF-8. A lenient decoder (Node's skips what it does not know) would let other header
 * bytes, which a filter in front sees as another value, pass for the same name.
 */
export function decodeHeaderValue(value: string): string | undefined {
  if (!value.startsWith(BASE64_PREFIX) || !value.endsWith(BASE64_SUFFIX)) return value;
  const encoded = value.slice(BASE64_PREFIX.length, -BASE64_SUFFIX.length);
  if (!STRICT_BASE64.test(encoded)) return undefined;
  const bytes = Buffer.from(encoded, 'base64');
  if (bytes.toString('base64') !== encoded) return undefined;
  return isUtf8(bytes) ? bytes.toString('utf8') : undefined;
}

/**
 * Why a 2026 request's standard headers do not match its body (one line), or undefined when
 * they do. `body` is one JSON-RPC request (with a method); notifications are not checked.
 */
export function standardHeaderMismatch(
  headers: IncomingHttpHeaders,
  body: Record<string, unknown>,
): string | undefined {
  const header = (name: string): string | undefined => headerOf(headers, name);
  const method = String(body.method);
  const version = header('mcp-protocol-version');
  if (version === undefined) return 'the MCP-Protocol-Version header is missing';
  if (version !== declaredVersion(body.params)) {
    return `the MCP-Protocol-Version header (${version}) is not the request's (${String(declaredVersion(body.params))})`;
  }
  const named = header('mcp-method');
  if (named === undefined) return 'the Mcp-Method header is missing';
  if (named !== method) return `the Mcp-Method header (${named}) is not the request's method (${method})`;
  const { field, value } = namedBy(method, body.params);
  // A body without the name is refused further on (invalid params); there is nothing to mirror.
  if (value === undefined) return undefined;
  const name = header('mcp-name');
  if (name === undefined) return `the Mcp-Name header is missing (${method} names ${field})`;
  return nameMismatch(name, field, value);
}

function headerOf(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** The body field `Mcp-Name` mirrors for `method`, and its value when it is a string. */
function namedBy(method: string, params: unknown): { field: string | undefined; value: string | undefined } {
  const field = Object.hasOwn(NAME_SOURCE, method) ? NAME_SOURCE[method] : undefined;
  const value = field !== undefined && isObject(params) ? params[field] : undefined;
  return { field, value: typeof value === 'string' ? value : undefined };
}

/** Why an `Mcp-Name` header is not `value` (the body's `field`), or undefined when it is. */
function nameMismatch(name: string, field: string | undefined, value: string | undefined): string | undefined {
  const decoded = decodeHeaderValue(name);
  if (decoded === undefined) return 'the Mcp-Name header is not valid base64 (=?base64?...?=)';
  if (value === undefined || decoded !== value) return `the Mcp-Name header is not the request's ${field ?? 'name'}`;
  return undefined;
}

/**
 * On a 2025 session, why the body contradicts the `Mcp-Method` / `Mcp-Name` headers the request
 * carries (a 2025 client need not send them, but a filter in front may act on them), or
 * undefined: each one present must say what the body does. A batch may carry neither (they
 * name one request) and no 2026 request (2026 has no batches, and a 2026 request's headers are
 * checked on its own path, which a batch would skip).
 */
export function carriedHeaderMismatch(headers: IncomingHttpHeaders, body: unknown): string | undefined {
  const method = headerOf(headers, 'mcp-method');
  const name = headerOf(headers, 'mcp-name');
  if (Array.isArray(body)) {
    if (body.some((m) => isObject(m) && isModernRequest(m.params))) return 'a 2026 request may not be sent in a batch';
    if (method !== undefined || name !== undefined) {
      return 'the Mcp-Method and Mcp-Name headers name one request, not a batch';
    }
    return undefined;
  }
  if (!isObject(body) || typeof body.method !== 'string') {
    return method !== undefined || name !== undefined
      ? 'the Mcp-Method and Mcp-Name headers name a request'
      : undefined;
  }
  if (method !== undefined && method !== body.method) {
    return `the Mcp-Method header (${method}) is not the request's method (${body.method})`;
  }
  if (name === undefined) return undefined;
  const { field, value } = namedBy(body.method, body.params);
  return nameMismatch(name, field, value);
}
