import { hintsThatHold, type AnnotationsMode } from '../policy/advertised-annotations.js';
import { HINT_NAMES } from '../policy/hints.js';
import type { SandboxPlan } from '../policy/plan-sandboxes.js';
import { renderServerText } from '../util/render-server-text.js';

/**
 * What `hintbox plan` warns of, beside its table (pure): an open-world tool that will have no
 * network (its calls that need the outside fail, and the plan advertises it closed-world), and,
 * per tool, why each hint a client is told differs from what the server claimed.
 */
export function planWarnings(plan: SandboxPlan, annotations: AnnotationsMode = 'enforced'): string[] {
  const sandboxes = new Map(plan.sandboxes.map((s) => [s.id, s]));
  const lines: string[] = [];
  for (const tool of plan.tools) {
    const sandbox = sandboxes.get(tool.sandbox);
    if (!sandbox) continue;
    const name = renderServerText(tool.name);
    // Said only of a tool that says (or is told by the operator) it talks to the outside: a
    // missing hint defaults to open world, which would flag nearly every unannotated tool.
    const saysOpen = tool.claimed.openWorldHint === true || (tool.overridden && tool.effective.openWorldHint);
    if (saysOpen && sandbox.network === 'none') {
      lines.push(
        `warning: ${name} says it talks to the outside world (openWorldHint), but its sandbox ${sandbox.id} has no network (the profile's network is none): its calls that need the outside will fail. ` +
          'Give the profile network: { allow: [host:port, …] } for the hosts it needs, if it should reach them.',
      );
    }
    // With `annotations: claimed` clients are told the claims: nothing differs.
    if (annotations === 'claimed') continue;
    const hints = hintsThatHold(tool, sandbox);
    const differ = HINT_NAMES.filter((hint) => hints[hint].claimed !== hints[hint].holds).map((hint) => {
      const account = hints[hint];
      const why =
        account.reason ??
        (hint === 'openWorldHint'
          ? account.holds
            ? 'its sandbox has a network'
            : 'its sandbox has no network: nothing in it reaches the outside'
          : 'the operator overrode it in the profile');
      return `${hint} claimed ${account.claimed}, advertised ${account.holds} (${why})`;
    });
    if (differ.length > 0) lines.push(`advertised: ${name}: ${differ.join('; ')}`);
  }
  return lines;
}
