import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { instructionsHash, lockedTool, standingAnswerOf, type LockFile } from '../approvals/lock-file.js';
import type { StandingAnswer } from '../policy/standing-answer.js';
import type { AuditLog } from '../audit/audit-record.js';
import type { PinState } from '../policy/approval-decision.js';
import type { PlannedTool } from '../policy/plan-sandboxes.js';
import { diffPins, formatPinChanges, onlyNarrows, pinTool, type PinnedDefinition } from '../policy/tool-pin.js';
import { matchesTagFilter, toolTags } from '../policy/tool-tags.js';
import type { Profile } from '../profile/load-profile.js';
import type { GuardedTool } from '../gateway/call-guard.js';
import type { Logger } from '../util/logger.js';

/**
 * What the call guard needs per tool: pins compared with the approved ones (the lock file),
 * tags, the plan's hints and enforcement.
 *
 * - A tool whose definition is the locked one is approved.
 * - A tool that differs from its locked definition only in stricter hints (`onlyNarrows`) is
 *   approved too, without a person: its sandbox is planned from the new hints, and the change
 *   is recorded in the audit log (`pin.narrowed`), not written to the lock file.
 * - Any other difference: changed (hidden and refused until `hintbox approve`).
 * - Not in the lock: unpinned (an untrusted server's are hidden and refused). A trusted server
 *   without a lock file is trusted on first use for the run: what this run first listed
 *   (`firstSeen`) stands in for the lock, so that a change during the run is still caught.
 * - A lock file that cannot be read (malformed, unreadable; at a re-listing during a run, as
 *   `hintbox run` checks it before it starts): nothing is known to be approved, so every tool is
 *   blocked (hidden and refused, saying why), logged and audited (`approvals.unreadable`). Fail
 *   closed: the old approvals are not kept. A tool is served again at the next re-listing that
 *   reads the lock, or when it is called and its current definition is the locked one.
 */
export function guardTools(options: {
  profile: Profile;
  session: string;
  tools: readonly Tool[];
  plan: readonly PlannedTool[];
  /** Reads the lock file now: undefined when there is none; throws when it cannot be read. */
  readLock: () => LockFile | undefined;
  /** A trusted server's tools as first listed in this run (filled here when there is no lock file). */
  firstSeen: Map<string, PinnedDefinition>;
  audit?: Pick<AuditLog, 'recordEvent'>;
  log: Logger;
  /** `--tags`: only tools with one of these tags are served. */
  tagFilter?: readonly string[];
}): Map<string, GuardedTool> {
  const { profile, firstSeen, log } = options;
  let lock: LockFile | undefined;
  let unreadable: string | undefined;
  try {
    lock = options.readLock();
  } catch (error) {
    unreadable = (error as Error).message;
    log.error(`cannot read the lock file: ${unreadable}; every tool is hidden and refused until it reads again`);
    options.audit?.recordEvent?.({
      type: 'approvals.unreadable',
      session: options.session,
      server: profile.name,
      error: unreadable,
    });
  }
  const trustOnFirstUse = profile.trust === 'trusted' && lock === undefined;
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
    if (unreadable !== undefined) {
      guarded.set(planned.name, {
        ...guardedTool(planned, tags, pin, rule?.approval),
        pinState: 'changed',
        approvalsUnreadable: unreadable,
      });
      continue;
    }
    if (trustOnFirstUse && !firstSeen.has(planned.name)) firstSeen.set(planned.name, pin.definition);
    const approved = trustOnFirstUse
      ? firstSeen.get(planned.name)
      : lock
        ? lockedTool(lock, planned.name)?.definition
        : undefined;
    let pinState: PinState = 'unpinned';
    if (approved) {
      const changes = diffPins(approved, pin.definition);
      if (changes.length === 0) pinState = 'approved';
      else if (onlyNarrows(changes)) {
        pinState = 'approved';
        const lines = formatPinChanges(changes);
        log.info(`${planned.name}: its hints only narrowed since approved (${lines.join('; ')}): served, recorded`);
        options.audit?.recordEvent?.({
          type: 'pin.narrowed',
          session: options.session,
          server: profile.name,
          tool: planned.name,
          pin: pin.hash,
          changes: lines,
        });
      } else pinState = 'changed';
    }
    if (pinState === 'changed') changed.push(planned.name);
    else if (pinState === 'unpinned' && profile.trust === 'untrusted') unapproved.push(planned.name);
    guarded.set(planned.name, {
      ...guardedTool(planned, tags, pin, rule?.approval),
      pinState,
      ...(pinState === 'changed' && approved ? { approvedDefinition: approved } : {}),
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

/** How a running server's tools differ from its lock file's, by tool name (each list empty: none). */
export interface LockDifferences {
  /** Listed otherwise than approved, in more than stricter hints: hidden and refused (`guardTools`). */
  changed: string[];
  /** Listed, but not in the lock file (added, or a tool renamed): decided as on any start. */
  unlocked: string[];
  /** In the lock file, but not listed (removed or renamed, or listed malformed and left out). */
  missing: string[];
}

/**
 * What a verification found: the tools that differ from their locked definition in more than
 * stricter hints, those the lock file does not have, and the approved ones not listed. How a
 * call to each is decided does not depend on it (`guardTools`). No lock file: nothing differs.
 */
export function differencesFromLock(tools: readonly Tool[], lock: LockFile | undefined): LockDifferences {
  const found: LockDifferences = { changed: [], unlocked: [], missing: [] };
  if (!lock) return found;
  const listed = new Set(tools.map((tool) => tool.name));
  for (const tool of tools) {
    const approved = lockedTool(lock, tool.name)?.definition;
    if (!approved) found.unlocked.push(tool.name);
    else {
      const changes = diffPins(approved, pinTool(tool).definition);
      if (changes.length > 0 && !onlyNarrows(changes)) found.changed.push(tool.name);
    }
  }
  found.missing.push(...Object.keys(lock.tools).filter((name) => !listed.has(name)));
  return found;
}

/** The differences said in one line (`changed: a; not in the lock: b; approved, not listed: c`); empty: none. */
export function describeDifferences(differences: LockDifferences): string {
  const parts: [string, string[]][] = [
    ['changed', differences.changed],
    ['not in the lock', differences.unlocked],
    ['approved, not listed', differences.missing],
  ];
  return parts
    .filter(([, names]) => names.length > 0)
    .map(([what, names]) => `${what}: ${names.join(', ')}`)
    .join('; ');
}

/** What the guard knows of a planned tool, but its pin state. */
function guardedTool(
  planned: PlannedTool,
  tags: GuardedTool['tags'],
  pin: GuardedTool['pin'],
  rule: GuardedTool['rule'],
): Omit<GuardedTool, 'pinState'> {
  return {
    name: planned.name,
    sandbox: planned.sandbox,
    claimed: planned.claimed,
    effective: planned.effective,
    annotationsMissing: Object.keys(planned.claimed).length === 0 && !planned.overridden,
    enforced: planned.enforced,
    networked: planned.network !== 'none',
    tags,
    pin,
    ...(rule ? { rule } : {}),
  };
}

/**
 * The server's `initialize` instructions as the client may get them: only when approved, as a
 * tool's definition is — in the lock file, by `hintbox approve --instructions` (or `--all`).
 * Instructions that differ from the locked ones are withheld, whatever the trust, and so are an
 * untrusted server's unapproved ones; a trusted server whose lock has none approved is trusted
 * on first use for the run (a run never writes the lock file). Withheld instructions are logged
 * (never their text) and the tools are served as usual. A lock file that cannot be read
 * withholds them.
 */
export function approvedInstructions(options: {
  profile: Profile;
  instructions: string | undefined;
  lock: () => LockFile | undefined;
  log: Logger;
}): string | undefined {
  const { profile, instructions, log } = options;
  if (instructions === undefined) return undefined;
  let approved: string | null;
  try {
    approved = options.lock()?.instructions.sha256 ?? null;
  } catch (error) {
    log.warn(`the server's instructions are withheld from the client: ${(error as Error).message}`);
    return undefined;
  }
  if (approved === instructionsHash(instructions)) return instructions;
  if (approved !== null) {
    log.warn(
      `the server's instructions changed since approved: withheld from the client; see "hintbox approve ${profile.file} --instructions"`,
    );
    return undefined;
  }
  if (profile.trust === 'trusted') return instructions;
  log.warn(
    `the server's instructions are not approved yet (untrusted server): withheld from the client; see "hintbox approve ${profile.file} --instructions"`,
  );
  return undefined;
}

/** The approved hash of a tool in the lock file as it is now (a reader that fails counts as none). */
export function approvedHashIn(approvals: () => LockFile | undefined): (tool: string) => string | undefined {
  return (tool) => {
    const lock = approvals();
    return lock ? lockedTool(lock, tool)?.sha256 : undefined;
  };
}

/** The standing answer of a tool in the lock file as it is now (`hintbox approve --always`). */
export function standingAnswerIn(approvals: () => LockFile | undefined): (tool: string) => StandingAnswer | undefined {
  return (tool) => {
    const lock = approvals();
    return lock ? standingAnswerOf(lock, tool) : undefined;
  };
}

/**
 * A cold start gave the client the approved instructions at `initialize`; once the running
 * server is verified, a difference from them is said in the log (never the text).
 */
export function warnIfInstructionsDiffer(options: {
  profile: Profile;
  instructions: string | undefined;
  lock: (() => LockFile | undefined) | undefined;
  log: Logger;
}): void {
  let approved: string | null | undefined;
  try {
    approved = options.lock?.()?.instructions.sha256;
  } catch {
    approved = undefined;
  }
  if (approved !== undefined && approved !== instructionsHash(options.instructions)) {
    options.log.warn(
      `the server's instructions differ from the approved ones in the lock file: the client was given the approved ones at initialize; see "hintbox approve ${options.profile.file} --instructions"`,
    );
  }
}
