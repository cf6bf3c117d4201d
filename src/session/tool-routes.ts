import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { GuardedTool } from '../gateway/call-guard.js';
import type { RoutedTool } from '../gateway/gateway.js';
import { advertiser } from '../policy/advertised-annotations.js';
import type { SandboxPlan } from '../policy/plan-sandboxes.js';
import type { PinnedDefinition } from '../policy/tool-pin.js';
import type { Profile } from '../profile/load-profile.js';
import type { Logger } from '../util/logger.js';
import { guardTools } from './guarded-tools.js';
import type { GatewaySettings } from './session-options.js';

/** What a gateway serves of a session's tools: the routes, and (with pins and an audit log) the guard's view. */
export interface ToolRoutes {
  routed: Map<string, RoutedTool>;
  guarded?: Map<string, GuardedTool>;
}

/**
 * The routes of a session's current tools and plan for one gateway: each planned tool the
 * gateway may serve (approved, of its tags), with the hints that hold advertised.
 */
export function routesOf(
  session: {
    profile: Profile;
    session: string;
    tools: readonly Tool[];
    plan: SandboxPlan;
    /** A trusted server without a lock file: its tools as first listed (trust on first use). */
    firstSeen: Map<string, PinnedDefinition>;
    log: Logger;
  },
  settings: GatewaySettings,
): ToolRoutes {
  const { profile, tools, plan } = session;
  const byName = new Map(tools.map((t) => [t.name, t]));
  const guarded =
    settings.approvals && settings.audit
      ? guardTools({
          profile,
          session: session.session,
          tools: [...tools],
          plan: plan.tools,
          readLock: settings.approvals,
          firstSeen: session.firstSeen,
          audit: settings.audit,
          log: session.log,
          ...(settings.tagFilter ? { tagFilter: settings.tagFilter } : {}),
        })
      : undefined;
  const routed = new Map<string, RoutedTool>();
  const advertise = advertiser(plan, profile.annotations); // what holds; pins stay the server's
  for (const planned of plan.tools) {
    const definition = byName.get(planned.name);
    if (!definition || (guarded && !guarded.has(planned.name))) continue;
    routed.set(planned.name, { definition: advertise(definition, planned), sandbox: planned.sandbox });
  }
  return guarded ? { routed, guarded } : { routed };
}
