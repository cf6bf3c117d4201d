import type { Ceiling } from '../policy/plan-sandboxes.js';
import type { Profile } from './load-profile.js';

/** The operator's ceiling, as the pure planner needs it. */
export function ceilingOf(profile: Profile): Ceiling {
  return {
    mounts: profile.mounts,
    network: profile.network,
    split: profile.split,
    overrides: Object.fromEntries(Object.entries(profile.tools).map(([name, rule]) => [name, rule.annotations])),
    ...(profile.database ? { database: profile.database.privilege } : {}),
  };
}
