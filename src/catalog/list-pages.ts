import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';

/**
 * Pages of the lists hintbox serves (`tools/list`, `prompts/list`, `resources/list`,
 * `resources/templates/list`): a client gets at most `pageSize` items per answer and a
 * `nextCursor` for the rest, as MCP's pagination says. The cursor is opaque to the client (the
 * offset, encoded); one that hintbox did not make is refused with `InvalidParams`. A list that
 * changes between pages is announced (`list_changed`), and the client lists again. Pure.
 */

/** Items per page unless the gateway is told otherwise. */
export const DEFAULT_PAGE_SIZE = 100;

const CURSOR = /^o([0-9]{1,9})$/;

export function pageOf<T>(
  items: readonly T[],
  cursor: unknown,
  pageSize = DEFAULT_PAGE_SIZE,
): { page: T[]; nextCursor?: string } {
  let offset = 0;
  if (cursor !== undefined) {
    const decoded = typeof cursor === 'string' ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
    const match = CURSOR.exec(decoded);
    offset = Number(match?.[1]);
    // Base64 decoding skips what it cannot read ('=', spaces, '!'), and the offset may have
    // leading zeros: only the one spelling hintbox writes is its own.
    if (!match || cursor !== cursorOf(offset)) {
      throw new McpError(ErrorCode.InvalidParams, 'Invalid cursor: not one hintbox gave');
    }
  }
  const page = items.slice(offset, offset + pageSize);
  const next = offset + pageSize;
  return next < items.length ? { page, nextCursor: cursorOf(next) } : { page };
}

function cursorOf(offset: number): string {
  return Buffer.from(`o${offset}`, 'utf8').toString('base64url');
}
