import { lockFilePath, lockedTool, LockFileError, readLockFile, type LockFile } from '../approvals/lock-file.js';
import type { SandboxEngine } from '../engine/sandbox-engine.js';
import { pinTool } from '../policy/tool-pin.js';
import { loadProfile, profileVariables } from '../profile/load-profile.js';
import { formatProblem, ProfileError } from '../profile/profile-problems.js';
import { HintboxSession } from '../session/hintbox-session.js';
import { renderServerText } from '../util/render-server-text.js';
import { cliLog } from './common.js';

/** An entry `import --rewrite` may rewrite, or why not and what would fix it. */
export type Readiness = { ready: true } | { ready: false; reason: string; fix: string };

/**
 * Whether the profile an entry now gets works as the rewritten entry will run it: it loads with
 * the variables the client passes (the entry's env), its image is prepared (built or present),
 * its tools are listed in the strictest sandbox (as `hintbox plan` and `approve` do; the
 * discovery container is removed before this returns), and each listed tool is approved with
 * that very definition. A rewritten entry that fails any of these would leave the client with a
 * server that does not start, or one whose tools hintbox does not serve.
 */
export async function importReadiness(
  profileFile: string,
  clientEnv: Readonly<Record<string, string>>,
  engine: () => Promise<SandboxEngine>,
): Promise<Readiness> {
  let profile;
  try {
    profile = loadProfile(profileFile, { vars: { ...profileVariables(), ...clientEnv }, unsetEnv: 'leave-out' });
  } catch (error) {
    if (!(error instanceof ProfileError)) throw error;
    const first = error.problems[0];
    return {
      ready: false,
      reason: `its profile does not load: ${first ? formatProblem(first) : error.message}`,
      fix: `fix: ${profileFile}`,
    };
  }
  let tools;
  try {
    await using session = await HintboxSession.open({ profile, engine: await engine(), log: cliLog, startAll: false });
    tools = session.tools;
  } catch (error) {
    return {
      ready: false,
      reason: `its tools cannot be listed: ${firstLine(error)}`,
      fix: `see: hintbox plan ${profileFile}`,
    };
  }
  const approve = `run: hintbox approve ${profileFile} --all`;
  let lock: LockFile | undefined;
  try {
    lock = readLockFile(lockFilePath(profile.file), profile.name);
  } catch (error) {
    // One entry's bad lock leaves that entry, not the others: a run would refuse it the same way.
    if (!(error instanceof LockFileError)) throw error;
    return { ready: false, reason: `its lock file is refused: ${firstLine(error)}`, fix: approve };
  }
  if (lock === undefined) return { ready: false, reason: 'not approved (no lock file)', fix: approve };
  const unapproved = tools.filter((tool) => lockedTool(lock, tool.name)?.sha256 !== pinTool(tool).hash);
  if (unapproved.length > 0) {
    const names = unapproved.map((t) => renderServerText(t.name)).join(', ');
    return { ready: false, reason: `not approved as listed now (new or changed: ${names})`, fix: approve };
  }
  return { ready: true };
}

/** An error's message, one line (an engine's may carry a build log). */
function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return renderServerText(message.split('\n')[0] ?? message);
}
