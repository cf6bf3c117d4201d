import { isObject } from '../mcp/json-rpc.js';
import { METHOD } from '../mcp/methods.js';

/**
 * The client's reads — what `request-relay.ts` forwards to the strictest sandbox — and what is
 * checked of them before: a hidden prompt or template is as unknown to them as to the lists.
 * Pure.
 */

/** The client's reads, forwarded to the strictest sandbox. */
export const READS: ReadonlySet<string> = new Set([
  METHOD.resourcesRead,
  METHOD.resourcesSubscribe,
  METHOD.resourcesUnsubscribe,
  METHOD.promptsGet,
  METHOD.complete,
]);

/** What the client may see now: the approved, listed prompts and resources. */
export interface ShownItems {
  showsPrompt(name: string): boolean;
  /** A template's URI template, or a resource's URI (a completion's `ref/resource` may be either). */
  showsResourceRef(uri: string): boolean;
}

/** Why a read is not forwarded (malformed, or about a prompt or template that is not shown), or undefined. */
export function readRefusal(method: string, params: Record<string, unknown>, shown: ShownItems): string | undefined {
  if (method === METHOD.promptsGet) {
    const name = params.name;
    if (typeof name !== 'string') return 'Invalid prompts/get request: expected params.name (string)';
    if (!shown.showsPrompt(name)) return `Unknown prompt (or not approved): ${name}`;
  }
  if (method === METHOD.complete) {
    const ref = params.ref;
    if (!isObject(ref)) return 'Invalid completion/complete request: expected params.ref';
    if (ref.type === 'ref/prompt') {
      if (typeof ref.name !== 'string' || !shown.showsPrompt(ref.name)) return 'Unknown prompt (or not approved)';
    } else if (ref.type === 'ref/resource') {
      if (typeof ref.uri !== 'string' || !shown.showsResourceRef(ref.uri)) {
        return 'Unknown resource template (or not approved)';
      }
      // Any other reference would pass no check of what is shown: MCP has only these two.
    } else return 'Invalid completion/complete request: params.ref.type is neither ref/prompt nor ref/resource';
  }
  if (method.startsWith('resources/') && typeof params.uri !== 'string') {
    return `Invalid ${method} request: expected params.uri (string)`;
  }
  return undefined;
}

/** What a read is about, for the audit: a URI, a prompt's name, a completion's reference. */
export function subjectOf(method: string, params: Record<string, unknown>): string | null {
  if (typeof params.uri === 'string') return params.uri;
  if (method === METHOD.promptsGet && typeof params.name === 'string') return params.name;
  if (method === METHOD.complete && isObject(params.ref)) {
    const ref = params.ref;
    const name = typeof ref.name === 'string' ? ref.name : typeof ref.uri === 'string' ? ref.uri : undefined;
    return name === undefined ? null : `${String(ref.type)} ${name}`;
  }
  return null;
}
