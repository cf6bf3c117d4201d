import { lockFilePath, lockTool, updateLockFile } from '../approvals/lock-file.js';
import type { DefinitionToApprove } from '../console/console-pages.js';
import type { DefinitionSource } from '../console/console-server.js';
import type { CallGuard } from '../gateway/call-guard.js';
import { diffPins, formatPinChanges } from '../policy/tool-pin.js';
import type { Profile } from '../profile/load-profile.js';

/**
 * The console's view of a session's tools that wait for approval (never approved, or changed
 * since), and the approval of one: written into the lock file beside the profile as
 * `hintbox approve` does, then served by every gateway of the session from then on.
 */
export function definitionSourceOf(profile: Profile, guards: () => CallGuard[]): DefinitionSource {
  const lockFile = lockFilePath(profile.file);
  const waiting = () => {
    const tools = guards()[0]?.guardedTools;
    return tools ? [...tools.values()].filter((t) => t.pinState !== 'approved' && !t.approvalsUnreadable) : [];
  };
  return {
    pending: (): DefinitionToApprove[] =>
      waiting().map((t) => ({
        server: profile.name,
        tool: t.name,
        hash: t.pin.hash,
        ...(t.approvedDefinition
          ? { changes: formatPinChanges(diffPins(t.approvedDefinition, t.pin.definition)) }
          : {}),
        definition: JSON.stringify(t.pin.definition, null, 2),
        lockFile,
      })),
    approve: async (hash) => {
      const tool = waiting().find((t) => t.pin.hash === hash);
      if (!tool) return false;
      await updateLockFile(lockFile, profile.name, (lock) => lockTool(lock, tool.pin));
      for (const guard of guards()) guard.recheckApproval(tool.name);
      return true;
    },
  };
}
