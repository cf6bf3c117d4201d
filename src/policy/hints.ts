/**
 * Tool annotations as hintbox sees them. The one place where the MCP spec's defaults are
 * filled in and the operator's overrides applied; everything after works on `ToolHints`.
 */

/** The four behavioural hints, all present. */
export interface ToolHints {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: boolean;
}

/** What a server claimed: each hint true, false, or missing (undefined). */
export type ClaimedHints = { [K in keyof ToolHints]?: boolean };

export const HINT_NAMES = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const;

/**
 * The MCP schema's defaults (2025-03-26 … 2026-07-28): a tool that says nothing may write,
 * destructively, in the open world. Missing annotations mean the worst case.
 */
export const HINT_DEFAULTS: Readonly<ToolHints> = Object.freeze({
  readOnlyHint: false,
  destructiveHint: true,
  idempotentHint: false,
  openWorldHint: true,
});

/** Reads the hints out of a tool's raw `annotations`; anything not a boolean counts as missing. */
export function claimedHints(annotations: unknown): ClaimedHints {
  const claimed: ClaimedHints = {};
  if (annotations === null || typeof annotations !== 'object') return claimed;
  for (const name of HINT_NAMES) {
    const value = (annotations as Record<string, unknown>)[name];
    if (typeof value === 'boolean') claimed[name] = value;
  }
  return claimed;
}

/**
 * Effective hints: the operator's override where given, else the server's claim, else the
 * spec default. Nothing is inferred from one hint to another: `destructiveHint` and
 * `idempotentHint` are kept as resolved even when `readOnlyHint` is true (where the spec says
 * they mean nothing); consumers look at `readOnlyHint` first.
 */
export function effectiveHints(claimed: ClaimedHints, override: ClaimedHints = {}): ToolHints {
  const pick = (name: keyof ToolHints): boolean => override[name] ?? claimed[name] ?? HINT_DEFAULTS[name];
  return {
    readOnlyHint: pick('readOnlyHint'),
    destructiveHint: pick('destructiveHint'),
    idempotentHint: pick('idempotentHint'),
    openWorldHint: pick('openWorldHint'),
  };
}
