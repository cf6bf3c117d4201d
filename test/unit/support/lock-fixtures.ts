import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { emptyLock, instructionsHash, lockTool, type LockFile } from '../../../src/approvals/lock-file.js';
import { pinTool } from '../../../src/policy/tool-pin.js';

/** Lock files the lock file's tests start from. */

/** A tool that writes (every hint the worst), tagged. */
export const writeTool: Tool = {
  name: 'write_file',
  description: 'Write a file',
  inputSchema: { type: 'object', properties: { path: { type: 'string' } } },
  annotations: { readOnlyHint: false, destructiveHint: true, openWorldHint: true },
  _meta: { tags: ['files'] },
};

/** A lock of server `fs` with these tools and instructions. */
export function lockOf(...tools: Tool[]): LockFile {
  let lock = emptyLock('fs');
  for (const t of tools) lock = lockTool(lock, pinTool(t));
  return { ...lock, instructions: { text: 'Use me well.', sha256: instructionsHash('Use me well.') } };
}
