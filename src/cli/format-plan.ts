import type { ClaimedHints, ToolHints } from '../policy/hints.js';
import { grantCanChange, type PlannedSandbox, type SandboxPlan } from '../policy/plan-sandboxes.js';
import type { RejectedTool } from '../gateway/discover-tools.js';
import { renderServerText } from '../util/render-server-text.js';

/** How a sandbox's server runs: only during calls allowed into it (held, frozen between), or freely. */
export function sandboxRuns(sandbox: PlannedSandbox, hold: boolean): 'during-calls' | 'free' {
  return hold && grantCanChange(sandbox) ? 'during-calls' : 'free';
}

/** The JSON form of `hintbox plan --json`. `hold`: the profile's (default true). */
export function planToJson(
  server: string,
  plan: SandboxPlan,
  rejected: readonly RejectedTool[] = [],
  hold = true,
): unknown {
  return {
    server,
    tools: plan.tools.map((t) => ({
      name: t.name,
      claimed: t.claimed,
      effective: t.effective,
      overridden: t.overridden,
      sandbox: t.sandbox,
      enforced: t.enforced,
      unenforced: t.unenforced,
    })),
    sandboxes: plan.sandboxes.map((s) => ({
      id: s.id,
      tools: s.tools,
      network: s.network,
      mounts: s.mounts,
      ...(s.database ? { database: s.database } : {}),
      runs: sandboxRuns(s, hold),
    })),
    rejected,
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
      `sandbox ${s.id}: network ${s.network}; ${mounts}${database}; ${runs}; tools: ${s.tools.map(renderServerText).join(', ')}`,
    );
  }
  for (const r of rejected) {
    out.push(
      `left out: tool #${r.index}${r.name !== undefined ? ` (${renderServerText(r.name)})` : ''}: ${renderServerText(r.reason)}`,
    );
  }
  return out.join('\n');
}
