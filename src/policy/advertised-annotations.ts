import type { DatabasePrivilege } from './database-privilege.js';
import { HINT_DEFAULTS, HINT_NAMES, type ToolHints } from './hints.js';
import {
  unenforcedHints,
  type NetworkMode,
  type PlannedSandbox,
  type PlannedTool,
  type SandboxGrant,
  type SandboxPlan,
} from './plan-sandboxes.js';

/**
 * What a client is told of a tool's hints: pure. Clients auto-approve on `readOnlyHint`, so the
 * server's claims passed on unchanged would let a lying server be auto-approved. hintbox knows
 * which hints the tool's sandbox makes true: those are kept, the others fall back to the spec's
 * worst case, and `_meta["io.hintbox/enforced"]` says what holds and why (README, "What clients
 * are told"). The server's definition is never changed: a new object is returned, and pins and
 * approvals stay those of what the server sent.
 */

/** The `_meta` key of hintbox's account of a tool's hints. */
export const ENFORCED_META_KEY = 'io.hintbox/enforced';
/** Its shape's version: a client reads the version it knows, and a change of shape bumps it. */
export const ENFORCED_META_VERSION = 1;

/**
 * Which annotations `tools/list` carries (the profile's `annotations`, default `enforced`):
 * the hints that hold in the tool's sandbox, or the server's claims as it sent them.
 */
export type AnnotationsMode = 'enforced' | 'claimed';

/** One hint of one tool, as hintbox accounts for it. */
export interface HintAccount {
  /** The server's value, the spec's default where it sent none (as `hintbox approve` pins it). */
  claimed: boolean;
  /** After the operator's overrides: what hintbox planned the sandbox from. */
  effective: boolean;
  /** The value that holds in the sandbox: what `annotations: enforced` advertises. */
  holds: boolean;
  /**
   * The sandbox makes `effective` true, or `effective` promises nothing (it is the spec's worst
   * case). False exactly when `reason` is given.
   */
  enforced: boolean;
  /** Why the sandbox does not make `effective` true; null when it does. */
  reason: string | null;
}

/** `_meta["io.hintbox/enforced"]`, version 1. Every key is always present. */
export interface EnforcedMeta {
  version: typeof ENFORCED_META_VERSION;
  /** Which form the tool's `annotations` carry. */
  annotations: AnnotationsMode;
  /** The tool's sandbox: what it may touch. Host paths are never given, only where the server sees them. */
  sandbox: {
    /** The sandbox class id, e.g. `ro-offline`, `rw-online-dbappend`. */
    id: string;
    mounts: { target: string; readOnly: boolean }[];
    network: NetworkMode;
    /** The privilege of its database role; null without a database. */
    database: DatabasePrivilege | null;
  };
  /** An operator's override in the profile replaced some of the server's claims. */
  overridden: boolean;
  hints: Record<keyof ToolHints, HintAccount>;
}

/** The fields of a listed tool this module reads and writes. */
export interface AdvertisableTool {
  annotations?: unknown;
  _meta?: unknown;
}

/**
 * The value each hint holds in the tool's sandbox, and why an effective hint does not:
 * - `readOnlyHint` and `destructiveHint: false` hold as the plan says (mounts, database role)
 *   and only without a network (a networked tool can change what it reaches outside), else
 *   fall back to false and true. A tool that falls back to not read-only is then judged
 *   as one that writes: "only adds" holds only where it could not destroy either.
 * - `openWorldHint` holds false wherever the sandbox has no network, whatever the server
 *   claimed (nothing there can reach the outside); with a network it is true.
 * - `idempotentHint` is no sandbox property: passed on as effective, never enforced when true.
 * Read-only is never raised from what the server said: a read-only sandbox keeps host files and
 * the database, not the server's own memory, which a tool that says it writes may change.
 */
export function hintsThatHold(planned: PlannedTool, grant: SandboxGrant): Record<keyof ToolHints, HintAccount> {
  const { effective } = planned;
  const unenforced = new Map(planned.unenforced.map((u) => [u.hint, u.reason]));
  if (grant.network !== 'none') {
    // Clients approve on these two alone: with a network, a tool can change (or delete) what it
    // reaches outside, which no mount or role of the sandbox limits.
    const why = `sandbox has a network (${grant.network}): the tool can change what it reaches outside`;
    if (effective.readOnlyHint && !unenforced.has('readOnlyHint')) unenforced.set('readOnlyHint', why);
    if (!effective.destructiveHint && !unenforced.has('destructiveHint')) unenforced.set('destructiveHint', why);
  }
  const readOnly = effective.readOnlyHint && !unenforced.has('readOnlyHint');
  // Judged again as a writer when read-only fell back: "only adds" must then hold on its own.
  if (effective.readOnlyHint && !readOnly) {
    for (const u of unenforcedHints({ ...effective, readOnlyHint: false }, grant)) {
      if (u.hint === 'destructiveHint' && !unenforced.has(u.hint)) unenforced.set(u.hint, u.reason);
    }
  }
  if (effective.idempotentHint) {
    unenforced.set('idempotentHint', 'no sandbox can make a tool idempotent: passed on as given');
  }
  const holds: ToolHints = {
    readOnlyHint: readOnly,
    destructiveHint: effective.destructiveHint || unenforced.has('destructiveHint'),
    idempotentHint: effective.idempotentHint,
    openWorldHint: grant.network !== 'none',
  };
  const claimed = claimedOrDefault(planned);
  const account = (hint: keyof ToolHints): HintAccount => {
    const reason = unenforced.get(hint) ?? null;
    return {
      claimed: claimed[hint],
      effective: effective[hint],
      holds: holds[hint],
      enforced: reason === null,
      reason,
    };
  };
  return {
    readOnlyHint: account('readOnlyHint'),
    destructiveHint: account('destructiveHint'),
    idempotentHint: account('idempotentHint'),
    openWorldHint: account('openWorldHint'),
  };
}

/**
 * The server's claims with the spec's defaults where it sent none: the form the lock file keeps,
 * so that a cold start (served from the lock file) and the verified server say the same.
 */
function claimedOrDefault(planned: PlannedTool): ToolHints {
  const pick = (hint: keyof ToolHints): boolean => planned.claimed[hint] ?? HINT_DEFAULTS[hint];
  return {
    readOnlyHint: pick('readOnlyHint'),
    destructiveHint: pick('destructiveHint'),
    idempotentHint: pick('idempotentHint'),
    openWorldHint: pick('openWorldHint'),
  };
}

/** hintbox's account of a tool's hints in its sandbox (`_meta["io.hintbox/enforced"]`). */
export function enforcedMeta(
  planned: PlannedTool,
  sandbox: SandboxGrant & { id: string },
  mode: AnnotationsMode,
): EnforcedMeta {
  return {
    version: ENFORCED_META_VERSION,
    annotations: mode,
    sandbox: {
      id: sandbox.id,
      // Targets only: the client and its model know paths as the server sees them; where they
      // lie on the host (a user name, a folder layout) is the operator's, and decides nothing.
      mounts: sandbox.mounts.map((m) => ({ target: m.target, readOnly: m.readOnly })),
      network: sandbox.network,
      database: sandbox.database ?? null,
    },
    overridden: planned.overridden,
    hints: hintsThatHold(planned, sandbox),
  };
}

/**
 * The definition a client is given: the server's, with annotations as `mode` says (the four
 * hints that hold, explicit, other keys such as `title` as sent; or the server's annotations
 * untouched) and hintbox's account merged into its `_meta` (the server's keys kept; one of its
 * own under hintbox's key is replaced). A new object: the server's definition is not changed.
 */
export function advertisedDefinition<T extends AdvertisableTool>(
  definition: T,
  planned: PlannedTool,
  sandbox: SandboxGrant & { id: string },
  mode: AnnotationsMode,
): T {
  const meta = enforcedMeta(planned, sandbox, mode);
  const advertised: T = { ...definition, _meta: { ...objectOrEmpty(definition._meta), [ENFORCED_META_KEY]: meta } };
  if (mode === 'enforced') {
    const holds = Object.fromEntries(HINT_NAMES.map((hint) => [hint, meta.hints[hint].holds]));
    advertised.annotations = { ...objectOrEmpty(definition.annotations), ...holds };
  }
  return advertised;
}

/** `advertisedDefinition` over one plan: each tool with the sandbox the plan gave it. */
export function advertiser(
  plan: Pick<SandboxPlan, 'sandboxes'>,
  mode: AnnotationsMode,
): <T extends AdvertisableTool>(definition: T, planned: PlannedTool) => T {
  const sandboxes = new Map<string, PlannedSandbox>(plan.sandboxes.map((s) => [s.id, s]));
  return (definition, planned) => {
    const sandbox = sandboxes.get(planned.sandbox);
    // The planner gives every tool a sandbox of its plan; anything else is hintbox's own bug.
    if (!sandbox) throw new Error(`${planned.name} is planned into sandbox ${planned.sandbox}, which the plan lacks`);
    return advertisedDefinition(definition, planned, sandbox, mode);
  };
}

function objectOrEmpty(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}
