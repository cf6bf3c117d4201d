import { hintsThatHold, type AnnotationsMode } from '../policy/advertised-annotations.js';
import { HINT_NAMES, type ClaimedHints, type ToolHints } from '../policy/hints.js';
import { grantCanChange, type PlannedSandbox, type PlannedTool, type SandboxPlan } from '../policy/plan-sandboxes.js';
import type { RejectedTool } from '../catalog/discover-tools.js';
import { renderServerText } from '../util/render-server-text.js';
import type { ResolvedMount } from '../profile/load-profile.js';
import { sensitiveWhat } from '../profile/sensitive-paths.js';
import { planWarnings } from './plan-warnings.js';

/** The mounts the profile lets hold sensitive places (`allowSensitive`), for `plan`'s JSON and text. */
export function sensitiveMounts(mounts: readonly ResolvedMount[]) {
  return mounts.flatMap((m, index) =>
    m.allowSensitive ? [{ mount: index, source: m.source, target: m.target, allowed: m.allowSensitive }] : [],
  );
}

/** One line per mount with an opt-in: what of the operator's shell, credentials or agents it hands over. */
export function formatSensitiveMounts(mounts: readonly ResolvedMount[]): string[] {
  return sensitiveMounts(mounts).map(
    (s) =>
      `sensitive: mounts[${s.mount}] ${s.source} -> ${s.target} holds, as the profile allows: ` +
      s.allowed.map((name) => `${name} (${sensitiveWhat(name)})`).join(', '),
  );
}

/** How a sandbox's server runs: only during calls allowed into it (held, frozen between), or freely. */
export function sandboxRuns(sandbox: PlannedSandbox, hold: boolean): 'during-calls' | 'free' {
  return hold && grantCanChange(sandbox) ? 'during-calls' : 'free';
}

/**
 * The hints `tools/list` gives a client for a tool (`advertised-annotations.ts`): those that hold
 * in its sandbox, or (`annotations: claimed`) the server's claims.
 */
export function advertisedHints(
  tool: PlannedTool,
  plan: SandboxPlan,
  annotations: AnnotationsMode,
): ToolHints | ClaimedHints {
  const sandbox = plan.sandboxes.find((s) => s.id === tool.sandbox);
  if (annotations === 'claimed' || !sandbox) return tool.claimed;
  const held = hintsThatHold(tool, sandbox);
  return Object.fromEntries(HINT_NAMES.map((hint) => [hint, held[hint].holds]));
}

/** The JSON form of `hintbox plan --json`. `hold` and `annotations`: the profile's. */
export function planToJson(
  server: string,
  plan: SandboxPlan,
  rejected: readonly RejectedTool[] = [],
  hold = true,
  annotations: AnnotationsMode = 'enforced',
): unknown {
  return {
    server,
    tools: plan.tools.map((t) => ({
      name: t.name,
      claimed: t.claimed,
      effective: t.effective,
      advertised: advertisedHints(t, plan, annotations),
      overridden: t.overridden,
      sandbox: t.sandbox,
      enforced: t.enforced,
      unenforced: t.unenforced,
    })),
    sandboxes: plan.sandboxes.map((s) => ({
      id: s.id,
      tools: s.tools,
      network: s.network,
      ...(s.egress ? { reaches: s.egress.hosts } : {}),
      mounts: s.mounts,
      ...(s.database ? { database: s.database } : {}),
      runs: sandboxRuns(s, hold),
    })),
    rejected,
    warnings: planWarnings(plan, annotations),
  };
}

/**
 * `R` read-only / `w` writes, `D` destructive / `a` only adds, `I`/`i` idempotent, `O` open / `c` closed world;
 * `-` missing; `.` moot (destructive and idempotent of an effective read-only tool).
 */
export function hintCode(h: ClaimedHints | ToolHints, effective = false): string {
  const one = (v: boolean | undefined, yes: string, no: string): string => (v === undefined ? '-' : v ? yes : no);
  // For an effective read-only tool, destructive and idempotent mean nothing (the spec says so).
  const moot = effective && h.readOnlyHint === true;
  return (
    one(h.readOnlyHint, 'R', 'w') +
    (moot ? '.' : one(h.destructiveHint, 'D', 'a')) +
    (moot ? '.' : one(h.idempotentHint, 'I', 'i')) +
    one(h.openWorldHint, 'O', 'c')
  );
}

/** The human table of `hintbox plan`. Server-made text (tool names, reasons quoting it) is rendered. */
export function formatPlanTable(
  server: string,
  plan: SandboxPlan,
  rejected: readonly RejectedTool[] = [],
  hold = true,
  annotations: AnnotationsMode = 'enforced',
): string {
  const sandboxes = new Map(plan.sandboxes.map((s) => [s.id, s]));
  // The DATABASE column (the role's privilege) only for profiles with a database.
  const withDatabase = plan.sandboxes.some((s) => s.database);
  const rows = plan.tools.map((t) => {
    const s = sandboxes.get(t.sandbox);
    return [
      renderServerText(t.name),
      hintCode(t.claimed),
      hintCode(t.effective, true) + (t.overridden ? '*' : ''),
      hintCode(advertisedHints(t, plan, annotations), annotations === 'enforced'),
      t.sandbox,
      s?.mounts.map((m) => `${m.target}:${m.readOnly ? 'ro' : 'rw'}`).join(' ') || '-',
      s?.network ?? '?',
      ...(withDatabase ? [s?.database ?? '-'] : []),
      t.enforced ? 'yes' : `NO: ${t.unenforced.map((u) => `${u.hint} (${u.reason})`).join('; ')}`,
    ];
  });
  const header = [
    'TOOL',
    'CLAIMED',
    'EFFECTIVE',
    'ADVERTISED',
    'SANDBOX',
    'MOUNTS',
    'NETWORK',
    ...(withDatabase ? ['DATABASE'] : []),
    'ENFORCED',
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  const out = [
    `server ${server}: ${plan.tools.length} tool(s) in ${plan.sandboxes.length} sandbox(es)`,
    '',
    line(header),
    ...rows.map(line),
    '',
  ];
  out.push(
    'hints: R read-only / w writes, D destructive / a only adds, I idempotent / i not, O open world / c closed, - not claimed, . moot for read-only tools, * operator override',
    annotations === 'enforced'
      ? 'advertised: what tools/list tells clients, the hints that hold in the sandbox (the worst case for the others)'
      : "advertised: what tools/list tells clients, the server's claims (annotations: claimed)",
  );
  for (const s of plan.sandboxes) {
    const mounts =
      s.mounts.map((m) => `${m.source} -> ${m.target} (${m.readOnly ? 'read-only' : 'read-write'})`).join(', ') ||
      'no mounts';
    const database = s.database ? `; database role: ${s.database}` : '';
    const runs =
      sandboxRuns(s, hold) === 'during-calls'
        ? 'runs only during calls allowed into it (held at its gate until the first, frozen between)'
        : 'runs freely';
    out.push(
      `sandbox ${s.id}: network ${networkText(s)}; ${mounts}${database}; ${runs}; tools: ${s.tools.map(renderServerText).join(', ')}`,
    );
  }
  out.push(...planWarnings(plan, annotations));
  for (const r of rejected) {
    out.push(
      `left out: tool #${r.index}${r.name !== undefined ? ` (${renderServerText(r.name)})` : ''}: ${renderServerText(r.reason)}`,
    );
  }
  return out.join('\n');
}

/** `none`, `bridge (unfiltered)`, or `egress proxy to a:443, b:443 (nothing else)`. */
function networkText(sandbox: PlannedSandbox): string {
  if (sandbox.network === 'bridge')
    return "bridge (out through the host, unfiltered; hintbox's own network, no other sandbox on it reachable)";
  if (sandbox.network === 'egress')
    return `only through hintbox's egress proxy, to ${sandbox.egress?.hosts.join(', ') ?? '?'}`;
  return sandbox.network;
}
