import { HINT_DEFAULTS, type ToolHints } from './hints.js';

/**
 * The approval decision for one `tools/call`: pure, no I/O, no clock. The gateway gathers the
 * inputs (effective hints, trust, pin state, enforcement, the operator's rules), asks this
 * function, then acts: runs the call, asks a person, or refuses it.
 *
 * Order of precedence, strongest first:
 * 1. pin: a definition that differs from its approved pin (or an untrusted server's tool
 *    that was never approved) is `blocked`, whatever else holds. Rules were written for the
 *    approved definition, so none of them applies to a different one.
 * 2. a `deny` rule: `deny`.
 * 3. friction floors that nothing removes: an untrusted server (DESIGN rule 2), a trusted
 *    server's tool that is not pinned yet, a `confirm` rule: at least `confirm`.
 * 4. `allow` or a matching pre-approval, for a trusted server only: `run`.
 * 5. the built-in policy (`decidedBy: 'auto'`): `run` only for a trusted server's read-only
 *    tool whose sandbox enforces its hints; otherwise `confirm`.
 */

/** Server trust, from the operator's profile; never from the server. Default `untrusted`. */
export type ServerTrust = 'trusted' | 'untrusted';

/**
 * How the tool's current definition compares with the pin approved for it:
 * - `approved`: same hash as the approved pin.
 * - `changed`: an approved pin exists and differs.
 * - `unpinned`: no pin was ever approved for this tool.
 */
export type PinState = 'approved' | 'changed' | 'unpinned';

/**
 * The operator's per-tool rule from the profile. `confirm` and `deny` add friction for any
 * server; `allow` removes it, for a trusted server only (for an untrusted one it is ignored).
 */
export type OperatorRule = 'confirm' | 'deny' | 'allow';

/**
 * - `run`: forward the call without asking (it is still recorded, with its arguments).
 * - `confirm`: ask a person; no answer in time is a denial.
 * - `deny`: refuse; the operator's rule says so.
 * - `blocked`: refuse until the tool's definition is approved (`hintbox approve`).
 */
export type ApprovalAction = 'run' | 'confirm' | 'deny' | 'blocked';

/**
 * What settled the action:
 * - `auto`: the built-in policy (the hints, the trust, the sandbox).
 * - `rule`: an operator rule changed what the policy alone would have done.
 * - `pre-approval`: a pre-approval rule (tool name + argument patterns) matched and removed
 *   the confirmation the policy would have asked for.
 * - `pin`: the pin state blocked the call, or (a trusted server's tool not pinned yet) made a
 *   call the policy would have run need confirmation.
 */
export type ApprovalDecider = 'auto' | 'rule' | 'pre-approval' | 'pin';

/**
 * Warnings a confirmation must show, as codes (text in {@link APPROVAL_WARNING_TEXT}):
 * - `irreversible`: the call may destroy or overwrite data (destructive, or no annotations, or
 *   an untrusted claim that the sandbox does not make true).
 * - `data-may-leave`: the tool's sandbox has a network, so its calls may talk to the outside
 *   world. Shown for the sandbox, not the hint: a network-less sandbox keeps data in whatever
 *   the tool claims (a missing or open-world hint included), and a networked one lets it out
 *   whatever the tool claims (a closed-world claim there is not enforced).
 * - `hints-not-enforced`: the tool's sandbox does not make all of its hints true.
 */
export type ApprovalWarning = 'irreversible' | 'data-may-leave' | 'hints-not-enforced';

/** One-line texts for the warning codes, for confirmations and logs. */
export const APPROVAL_WARNING_TEXT: Readonly<Record<ApprovalWarning, string>> = Object.freeze({
  irreversible: 'This operation may be irreversible: it may overwrite or delete data.',
  'data-may-leave': 'Data may leave the machine: the tool may talk to outside services.',
  'hints-not-enforced': "The tool's sandbox does not enforce all of its annotations.",
});

/** Everything the decision looks at. */
export interface ApprovalInput {
  /** Effective hints: operator override, else the server's claim, else the spec default. */
  hints: ToolHints;
  /**
   * True when the server sent no annotation hints at all for this tool *and* the operator
   * overrode none: the worst case is assumed. When the operator overrode a hint, pass false:
   * the hints are then the operator's, not missing.
   */
  annotationsMissing: boolean;
  trust: ServerTrust;
  pin: PinState;
  /** The plan's `enforced`: every narrowing hint of the tool is made true by its sandbox. */
  enforced: boolean;
  /** The tool's sandbox has a network (its grant's network is not `none`). */
  networked: boolean;
  /** The operator's rule for this tool, if any. */
  rule?: OperatorRule | undefined;
  /** True when a pre-approval rule (tool + argument patterns) matched this call's arguments. */
  preApproved?: boolean | undefined;
}

/** The decision and everything a confirmation or the audit trail needs to say about it. */
export interface ApprovalDecision {
  action: ApprovalAction;
  /** Why, in plain sentences, most decisive first. Never empty. */
  reasons: string[];
  /**
   * The confirmation must show the arguments untruncated. True exactly when `irreversible`
   * is among the warnings. (The audit trail always stores the full arguments.)
   */
  showFullArguments: boolean;
  /** In a fixed order: irreversible, data-may-leave, hints-not-enforced. */
  warnings: ApprovalWarning[];
  /**
   * Retry a call that timed out (bounded, with backoff, logged). Only for a trusted server's
   * tool that says `idempotentHint: true` and is not read-only (the spec gives idempotence
   * meaning only when `readOnlyHint` is false), with annotations present, and only when the
   * call may go ahead at all (`run` or `confirm`). Idempotence says a repeat is safe, not that
   * the first call is: it never lowers the friction.
   */
  retryOnTimeout: boolean;
  decidedBy: ApprovalDecider;
}

/**
 * The hints the decision may rely on. A trusted server's hints are taken as effective (the
 * operator vouches for them). An untrusted server's hints are claims: they count only where
 * the sandbox makes them true (`enforced`), otherwise the worst case applies. Missing
 * annotations are the worst case for everyone.
 */
function reliedHints(input: ApprovalInput): { hints: ToolHints; worstCase: string | undefined } {
  if (input.annotationsMissing) {
    return { hints: HINT_DEFAULTS, worstCase: 'the server sent no annotations, so the worst case is assumed' };
  }
  if (input.trust === 'untrusted' && !input.enforced) {
    return {
      hints: HINT_DEFAULTS,
      worstCase: "the untrusted server's annotations are not enforced by its sandbox, so the worst case is assumed",
    };
  }
  return { hints: input.hints, worstCase: undefined };
}

function warningsFor(input: ApprovalInput, relied: ToolHints): ApprovalWarning[] {
  const warnings: ApprovalWarning[] = [];
  if (!relied.readOnlyHint && relied.destructiveHint) warnings.push('irreversible');
  if (input.networked) warnings.push('data-may-leave');
  if (!input.enforced) warnings.push('hints-not-enforced');
  return warnings;
}

/** Decides one call. Pure: the same input always gives the same decision. */
export function decideApproval(input: ApprovalInput): ApprovalDecision {
  const { hints: relied, worstCase } = reliedHints(input);
  const warnings = warningsFor(input, relied);
  const trusted = input.trust === 'trusted';
  const retryOnTimeout =
    trusted && !input.annotationsMissing && !input.hints.readOnlyHint && input.hints.idempotentHint;

  // Not a closure made per call (the bundle's keep-names helper would name it each time).
  const found = { worstCase, warnings, retryOnTimeout };

  // 1. The pin. An untrusted server's unpinned tool counts as changed (the rule).
  if (input.pin === 'changed') {
    return decisionOf(found, 'blocked', 'pin', [
      'the tool definition differs from the approved pin; approve it again with `hintbox approve`',
    ]);
  }
  if (input.pin === 'unpinned' && !trusted) {
    return decisionOf(found, 'blocked', 'pin', [
      "the untrusted server's tool definition has not been approved; approve it with `hintbox approve`",
    ]);
  }

  // 2. The operator's deny.
  if (input.rule === 'deny') return decisionOf(found, 'deny', 'rule', ['the profile denies this tool']);

  // 5 first, so that 3 and 4 can say whether they changed it.
  const policy = policyDecision(input, relied);

  // 3. Friction nothing removes.
  const floors: string[] = [];
  if (!trusted) floors.push('the server is untrusted: every call is confirmed, whatever its annotations say');
  if (input.pin === 'unpinned') {
    floors.push('the tool definition is not pinned yet; calls are confirmed until it is approved');
  }
  if (input.rule === 'confirm') floors.push('the profile requires confirmation for this tool');
  if (floors.length > 0) {
    if (policy.action === 'confirm') return decisionOf(found, 'confirm', 'auto', [...floors, ...policy.reasons]);
    // An auto `run` needs a trusted server, so the floor that overturned it is the missing pin
    // or the rule; the pin is named first because approving it is the first thing to do.
    return decisionOf(found, 'confirm', input.pin === 'unpinned' ? 'pin' : 'rule', [...floors, ...policy.reasons]);
  }

  // 4. Friction removed on the operator's word, for a trusted server only (floors are empty,
  // so the server is trusted and the pin approved here).
  if (policy.action === 'confirm' && input.rule === 'allow') {
    return decisionOf(found, 'run', 'rule', ['the profile allows this tool without confirmation', ...policy.reasons]);
  }
  if (policy.action === 'confirm' && input.preApproved === true) {
    return decisionOf(found, 'run', 'pre-approval', [
      'a pre-approval rule in the profile matched the arguments',
      ...policy.reasons,
    ]);
  }

  return decisionOf(found, policy.action, 'auto', policy.reasons);
}

/** The decision of {@link decideApproval}, from what it found of the call. */
function decisionOf(
  found: { worstCase: string | undefined; warnings: ApprovalWarning[]; retryOnTimeout: boolean },
  action: ApprovalAction,
  decidedBy: ApprovalDecider,
  reasons: string[],
): ApprovalDecision {
  const { worstCase, warnings, retryOnTimeout } = found;
  return {
    action,
    reasons: worstCase ? [...reasons, worstCase] : reasons,
    showFullArguments: warnings.includes('irreversible'),
    warnings,
    retryOnTimeout: retryOnTimeout && (action === 'run' || action === 'confirm'),
    decidedBy,
  };
}

/** The built-in policy alone, on the hints it may rely on: `run` or `confirm`. */
function policyDecision(input: ApprovalInput, relied: ToolHints): { action: 'run' | 'confirm'; reasons: string[] } {
  if (relied.readOnlyHint) {
    if (input.trust === 'trusted' && input.enforced) {
      return { action: 'run', reasons: ['read-only tool of a trusted server, enforced by its sandbox'] };
    }
    if (!input.enforced) {
      return { action: 'confirm', reasons: ['read-only tool, but its sandbox does not enforce its annotations'] };
    }
    return { action: 'confirm', reasons: ['read-only tool (enforced by its sandbox)'] };
  }
  if (relied.destructiveHint) {
    return { action: 'confirm', reasons: ['the tool may modify or delete data (destructive)'] };
  }
  return { action: 'confirm', reasons: ['the tool modifies its environment (it only adds, by its annotations)'] };
}
