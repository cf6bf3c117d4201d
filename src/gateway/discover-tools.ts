import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ToolSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

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

const RawListResult = z.looseObject({
  tools: z.array(z.unknown()),
  nextCursor: z.string().optional(),
});

/**
 * Validates each listed tool on its own: one malformed tool is reported and left out, the
 * others pass on untouched (the SDK's schema would strip keys it does not know). Duplicate
 * names are rejected after the first, because routing is by name. Pure.
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
    } else if (seen.has(parsed.data.name)) {
      rejected.push({ index, name: parsed.data.name, reason: 'duplicate tool name' });
    } else {
      seen.add(parsed.data.name);
      tools.push(candidate as Tool);
    }
  });
  return { tools, rejected };
}

/** `tools/list` with pagination, keeping each tool as received. */
export async function listToolsRaw(client: Client, timeoutMs: number): Promise<unknown[]> {
  const all: unknown[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const result = await client.request({ method: 'tools/list', params: cursor ? { cursor } : {} }, RawListResult, {
      timeout: timeoutMs,
    });
    all.push(...result.tools);
    cursor = result.nextCursor;
    if (!cursor) return all;
  }
  throw new Error('tools/list returned more than 100 pages');
}
