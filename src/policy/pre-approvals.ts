import { compileArgumentRule, matchesArgumentRule, type ArgumentRule } from './argument-rule.js';

/** A pre-approval from the profile, with its argument rules compiled. */
export interface PreApproval {
  tool: string;
  arguments: ReadonlyMap<string, ArgumentRule>;
}

/**
 * Does a pre-approval match these arguments? Every listed argument must be present and satisfy
 * its rule: a regex matches the whole raw text (never one with a `..` path segment), a path rule
 * only a path strictly inside its folder (see argument-rule.ts).
 */
export function matchesPreApproval(
  rule: PreApproval,
  tool: string,
  args: Record<string, unknown> | undefined,
): boolean {
  if (rule.tool !== tool) return false;
  for (const [name, argumentRule] of rule.arguments) {
    if (!matchesArgumentRule(argumentRule, args?.[name])) return false;
  }
  return true;
}

/** Compiles the profile's rules: a pattern must match the whole value; `{ under }` is a folder. */
export function compilePreApprovals(
  rules: readonly { tool: string; arguments: Record<string, string | { under: string }> }[],
): PreApproval[] {
  return rules.map((rule) => ({
    tool: rule.tool,
    arguments: new Map(Object.entries(rule.arguments).map(([name, source]) => [name, compileArgumentRule(source)])),
  }));
}
