import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { PinState } from '../policy/approval-decision.js';
import type { PlannedTool } from '../policy/plan-sandboxes.js';
import { INSTRUCTIONS_PIN, pinInstructions, pinTool } from '../policy/tool-pin.js';
import { matchesTagFilter, toolTags } from '../policy/tool-tags.js';
import type { Profile } from '../profile/load-profile.js';
import type { PinStore } from '../store/state-store.js';
import type { GuardedTool } from '../gateway/call-guard.js';
import type { Logger } from '../util/logger.js';

/**
 * What the call guard needs per tool: pins compared with the approved ones, tags, the plan's
 * hints and enforcement. A trusted server's first run pins what it finds (trust on first use);
 * an untrusted server's tools are pinned only by `hintbox approve`.
 */
export async function guardTools(options: {
  profile: Profile;
  tools: readonly Tool[];
  plan: readonly PlannedTool[];
  pins: PinStore;
  log: Logger;
  /** `--tags`: only tools with one of these tags are served. */
  tagFilter?: readonly string[];
}): Promise<Map<string, GuardedTool>> {
  const { profile, pins, log } = options;
  const approved = new Map((await pins.list(profile.name)).map((p) => [p.tool, p]));
  const firstTrustedRun = profile.trust === 'trusted' && approved.size === 0;
  const byName = new Map(options.tools.map((t) => [t.name, t]));
  const guarded = new Map<string, GuardedTool>();
  const changed: string[] = [];
  const unapproved: string[] = [];

  for (const planned of options.plan) {
    const definition = byName.get(planned.name);
    if (!definition) continue;
    const rule = profile.tools[planned.name];
    const tags = toolTags({ serverTags: profile.tags, toolTags: rule?.tags ?? [], meta: definition._meta });
    if (
      options.tagFilter &&
      !matchesTagFilter(tags, options.tagFilter, { countServerClaims: profile.trust === 'trusted' })
    ) {
      continue;
    }
    const pin = pinTool(definition);
    let previous = approved.get(planned.name);
    if (!previous && firstTrustedRun) {
      previous = await pins.approve({
        server: profile.name,
        tool: planned.name,
        pin,
        approvedBy: 'first run (trusted server)',
      });
    }
    const pinState: PinState = !previous ? 'unpinned' : previous.hash === pin.hash ? 'approved' : 'changed';
    if (pinState === 'changed') changed.push(planned.name);
    else if (pinState === 'unpinned' && profile.trust === 'untrusted') unapproved.push(planned.name);
    guarded.set(planned.name, {
      name: planned.name,
      sandbox: planned.sandbox,
      claimed: planned.claimed,
      effective: planned.effective,
      annotationsMissing: Object.keys(planned.claimed).length === 0 && !planned.overridden,
      enforced: planned.enforced,
      tags,
      pin,
      pinState,
      ...(pinState === 'changed' && previous ? { approvedDefinition: previous.definition } : {}),
      ...(rule?.approval ? { rule: rule.approval } : {}),
    });
  }
  if (changed.length) {
    log.warn(
      `changed since approved, hidden and refused: ${changed.join(', ')}; see "hintbox approve ${profile.file} <tool>"`,
    );
  }
  if (unapproved.length) {
    log.warn(
      `not approved yet (untrusted server), hidden and refused: ${unapproved.join(', ')}; see "hintbox approve ${profile.file} --all"`,
    );
  }
  return guarded;
}

/**
 * The server's `initialize` instructions as the client may get them: only when approved, as a
 * tool's definition is. They are pinned ({@link pinInstructions}) by `hintbox approve` or, for a
 * trusted server, at its first run with them (trust on first use); instructions that differ from
 * their pin are withheld, whatever the trust, and so are an untrusted server's unapproved ones.
 * Withheld instructions are logged (never their text) and the tools are served as usual.
 */
export async function approvedInstructions(options: {
  profile: Profile;
  instructions: string | undefined;
  pins: PinStore;
  log: Logger;
}): Promise<string | undefined> {
  const { profile, instructions, pins, log } = options;
  if (instructions === undefined) return undefined;
  const pin = pinInstructions(instructions);
  const approved = await pins.get(profile.name, INSTRUCTIONS_PIN);
  if (approved?.hash === pin.hash) return instructions;
  if (approved) {
    log.warn(
      `the server's instructions changed since approved: withheld from the client; see "hintbox approve ${profile.file} --instructions"`,
    );
    return undefined;
  }
  if (profile.trust === 'trusted') {
    await pins.approve({ server: profile.name, tool: INSTRUCTIONS_PIN, pin, approvedBy: 'first run (trusted server)' });
    return instructions;
  }
  log.warn(
    `the server's instructions are not approved yet (untrusted server): withheld from the client; see "hintbox approve ${profile.file} --instructions"`,
  );
  return undefined;
}
