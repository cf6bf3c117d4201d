import { describeGrant } from '../console/console-pages.js';
import { CallGuard, compilePreApprovals, type GuardedTool } from '../gateway/call-guard.js';
import type { ServerTrustState } from '../policy/server-trust.js';
import type { Profile } from '../profile/load-profile.js';
import type { Logger } from '../util/logger.js';
import { approvedHashIn, standingAnswerIn } from './guarded-tools.js';
import type { GatewaySettings } from './session-options.js';
import type { SessionSandboxes } from './session-sandboxes.js';

/**
 * The call guard of one gateway of a session (approval and audit per call, with the person
 * asked on its client or console), when it has an audit log and pinned tools; else none (tests
 * of routing forward every routed call).
 */
export function sessionGuardOf(options: {
  profile: Profile;
  session: string;
  trust: ServerTrustState;
  sandboxes: SessionSandboxes;
  /** Holds the sandboxes frozen while `work` runs (a preview's copy of their folders). */
  holdFrozenDuring: <T>(ids: readonly string[], work: () => Promise<T>) => Promise<T>;
  settings: GatewaySettings;
  guarded: Map<string, GuardedTool> | undefined;
  /** A tool was approved: what the client may see changed. */
  onApproved: () => void;
  log: Logger;
}): CallGuard | undefined {
  const { profile, settings, guarded, sandboxes } = options;
  if (!settings.audit || !guarded) return undefined;
  return new CallGuard({
    server: profile.name,
    session: options.session,
    caller: settings.caller ?? null,
    trust: options.trust,
    tools: guarded,
    preApprovals: compilePreApprovals(profile.preApprove),
    audit: settings.audit,
    approvalTimeoutMs: profile.approval.timeout * 1000,
    profileFile: profile.file,
    log: options.log,
    // Writers of a copied folder are frozen while it is copied, through their calls' line.
    previewer: sandboxes.previewer(options.holdFrozenDuring),
    ...(settings.approvals
      ? { approvedHash: approvedHashIn(settings.approvals), standingAnswer: standingAnswerIn(settings.approvals) }
      : {}),
    onApproved: options.onApproved,
    ...(settings.console
      ? {
          console: settings.console,
          describeSandbox: (id: string) => {
            const grant = sandboxes.grants.get(id);
            return grant ? describeGrant(grant) : '';
          },
        }
      : {}),
  });
}
