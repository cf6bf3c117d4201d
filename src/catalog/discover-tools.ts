import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ToolSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { pinTool } from '../policy/tool-pin.js';
import { renderServerText } from '../util/render-server-text.js';
import { listAll } from './list-all.js';

/** A tool the server listed that cannot be used, and why. */
export interface RejectedTool {
  index: number;
  name?: string;
  reason: string;
}

export interface DiscoveredTools {
  /** Valid tools, each exactly as received (unknown keys kept). */
  tools: Tool[];
  rejected: RejectedTool[];
}

/**
 * The spec's rule for tool names (2025-11-25, "Tool names"): 1 to 128 characters, each an ASCII
 * letter, a digit, `_`, `-` or `.`. A name outside it is malformed: it is what a server would use
 * to forge a line of a confirmation (a newline), to act on a terminal (an escape sequence) or to
 * pass for another tool (invisible or look-alike characters).
 */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;

/**
 * Validates each listed tool on its own: one malformed tool is reported and left out, the
 * others pass on untouched (the SDK's schema would strip keys it does not know). A name must
 * follow the spec's rule ({@link TOOL_NAME_PATTERN}). Duplicate names are rejected after the
 * first, because routing is by name. A rejected tool's name is reported as the server sent it:
 * render it (`renderServerText`) before a person sees it. Pure.
 */
export function validateTools(raw: readonly unknown[]): DiscoveredTools {
  const tools: Tool[] = [];
  const rejected: RejectedTool[] = [];
  const seen = new Set<string>();
  raw.forEach((candidate, index) => {
    const name =
      candidate && typeof candidate === 'object' && typeof (candidate as { name?: unknown }).name === 'string'
        ? (candidate as { name: string }).name
        : undefined;
    const parsed = ToolSchema.safeParse(candidate);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue?.path.length ? `${issue.path.join('.')}: ` : '';
      rejected.push({ index, ...(name ? { name } : {}), reason: `${where}${issue?.message ?? 'invalid'}` });
    } else if (!TOOL_NAME_PATTERN.test(parsed.data.name)) {
      rejected.push({
        index,
        name: parsed.data.name,
        reason: "name: not 1 to 128 characters of A-Z, a-z, 0-9, _, - and . (the MCP spec's rule for tool names)",
      });
    } else if (seen.has(parsed.data.name)) {
      rejected.push({ index, name: parsed.data.name, reason: 'duplicate tool name' });
    } else if (!pinnable(candidate as Tool)) {
      // Nested too deep for the stack: it could be neither pinned nor passed on.
      rejected.push({ index, name: parsed.data.name, reason: 'its definition cannot be pinned (nested too deep)' });
    } else {
      seen.add(parsed.data.name);
      tools.push(candidate as Tool);
    }
  });
  return { tools, rejected };
}

function pinnable(tool: Tool): boolean {
  try {
    pinTool(tool);
    return true;
  } catch {
    return false;
  }
}

/** `tool #3 (name) left out: reason`, for the log: the server's name rendered for a person. */
export function describeRejected(r: RejectedTool): string {
  const name = r.name !== undefined ? ` (${renderServerText(r.name)})` : '';
  return `tool #${r.index}${name} left out: ${renderServerText(r.reason)}`;
}

/** A server's tools (`tools/list`, every page, capped as every list is: `listAll`), each validated on its own. */
export async function listTools(client: Client, timeoutMs: number): Promise<DiscoveredTools> {
  return validateTools(await listAll(client, 'tool', timeoutMs));
}
