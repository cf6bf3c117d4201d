import { HINT_DEFAULTS, HINT_NAMES } from '../policy/hints.js';
import type { SandboxPlan } from '../policy/plan-sandboxes.js';
import { renderServerText } from '../util/render-server-text.js';

/**
 * The few lines `hintbox approve` shows above a tool's definition, so that approving is a
 * review (pure): what the server claims (and which hints it did not send, which the lock's
 * definition holds as hintbox's defaults), where the tool will run, and what its sandbox does
 * not enforce.
 */
export function approvalSummary(plan: SandboxPlan, tool: string): string[] {
  const planned = plan.tools.find((t) => t.name === tool);
  if (!planned) return [];
  const sandbox = plan.sandboxes.find((s) => s.id === planned.sandbox);
  const claims = HINT_NAMES.filter((h) => planned.claimed[h] !== undefined).map((h) => `${h}=${planned.claimed[h]}`);
  const defaults = HINT_NAMES.filter((h) => planned.claimed[h] === undefined).map((h) => `${h}=${HINT_DEFAULTS[h]}`);
  const mounts = sandbox?.mounts.map((m) => `${m.target} ${m.readOnly ? 'read-only' : 'read-write'}`).join(', ');
  return [
    `claims: ${claims.length ? claims.join(', ') : 'no hints at all (the worst case is assumed)'}`,
    ...(defaults.length
      ? [`hintbox's defaults for what it did not claim (written in the lock as such): ${defaults.join(', ')}`]
      : []),
    `runs in: sandbox ${planned.sandbox} (${mounts || 'no mounts'}; network ${planned.network}${sandbox?.database ? `; database role ${sandbox.database}` : ''})`,
    planned.enforced
      ? 'enforced: every hint it narrows is made true by its sandbox'
      : `NOT enforced: ${planned.unenforced.map((u) => `${u.hint} (${renderServerText(u.reason)})`).join('; ')}`,
  ].map(renderServerText);
}
