import type { ToolHints } from './hints.js';

/**
 * Which database privilege a tool's hints need, and what a sandbox's role gets: pure. The
 * database layer turns a privilege into a role and its grants (`src/database/role-grants.ts`).
 */

/** From least to most: read; append (insert, never update or delete); write. */
export const DATABASE_PRIVILEGES = ['read', 'append', 'write'] as const;
export type DatabasePrivilege = (typeof DATABASE_PRIVILEGES)[number];

const PRIVILEGE_RANK: Readonly<Record<DatabasePrivilege, number>> = { read: 0, append: 1, write: 2 };

/** readOnly → read; not readOnly, not destructive ("only adds") → append; destructive → write. */
export function classPrivilege(hints: Pick<ToolHints, 'readOnlyHint' | 'destructiveHint'>): DatabasePrivilege {
  if (hints.readOnlyHint) return 'read';
  return hints.destructiveHint ? 'write' : 'append';
}

export function minPrivilege(a: DatabasePrivilege, b: DatabasePrivilege): DatabasePrivilege {
  return PRIVILEGE_RANK[a] <= PRIVILEGE_RANK[b] ? a : b;
}

export function maxPrivilege(a: DatabasePrivilege, b: DatabasePrivilege): DatabasePrivilege {
  return PRIVILEGE_RANK[a] >= PRIVILEGE_RANK[b] ? a : b;
}

/** The privilege of one tool: its class privilege, capped by the operator's ceiling. */
export function toolPrivilege(hints: ToolHints, ceiling: DatabasePrivilege): DatabasePrivilege {
  return minPrivilege(classPrivilege(hints), ceiling);
}

/**
 * Why a tool's database hint is not made true by the role its sandbox got (a sandbox shared
 * with tools that need more), or undefined when it is.
 */
export function unenforcedDatabaseHint(
  hints: ToolHints,
  granted: DatabasePrivilege,
): { hint: 'readOnlyHint' | 'destructiveHint'; reason: string } | undefined {
  const claimed = classPrivilege(hints);
  if (PRIVILEGE_RANK[granted] <= PRIVILEGE_RANK[claimed]) return undefined;
  return {
    hint: claimed === 'read' ? 'readOnlyHint' : 'destructiveHint',
    reason: `database role has ${granted} privilege (shared with tools that need it)`,
  };
}
