import type { GuardedTool } from '../../../src/gateway/call-guard.js';
import { effectiveHints, type ClaimedHints } from '../../../src/policy/hints.js';
import { pinTool } from '../../../src/policy/tool-pin.js';

/**
 * A tool as the call guard knows it, for unit tests of the guard: enforced, network-less,
 * untagged, pinned from `claimed` (and `description`, when given), approved unless told otherwise.
 */
export function guardedTool(
  name: string,
  claimed: ClaimedHints,
  more: { sandbox?: string; description?: string; pinState?: GuardedTool['pinState']; rule?: GuardedTool['rule'] } = {},
): GuardedTool {
  const { sandbox = 'rw-offline', description, pinState = 'approved', rule } = more;
  const definition = { name, ...(description ? { description } : {}), inputSchema: { type: 'object' as const } };
  return {
    name,
    sandbox,
    claimed,
    effective: effectiveHints(claimed),
    annotationsMissing: false,
    enforced: true,
    networked: false,
    tags: [],
    pin: pinTool({ ...definition, annotations: claimed }),
    pinState,
    ...(rule ? { rule } : {}),
  };
}
