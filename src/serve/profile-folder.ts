import { readdirSync } from 'node:fs';
import path from 'node:path';
import { loadProfile, type Profile } from '../profile/load-profile.js';
import { ProfileError } from '../profile/profile-problems.js';
import { approvalsOf, type Approvals } from '../session/session-setup.js';
import { HintboxError, UsageError } from '../util/hintbox-error.js';
import type { Logger } from '../util/logger.js';

/** One profile of the folder `hintbox serve` serves, at `/mcp/<profile.name>`. */
export interface ServedProfile {
  profile: Profile;
  approvals: Approvals;
}

/**
 * Loads every profile (`*.yaml`, `*.yml`) of a folder and its lock file. Any problem in any of
 * them stops serve before anything starts, each problem on its own line as `hintbox run` reports
 * it: serving some servers of a folder but not others would hide a broken one until a client
 * asks for it.
 */
export function loadProfileFolder(folder: string, log: Logger): Map<string, ServedProfile> {
  let files: string[];
  try {
    files = readdirSync(folder)
      .filter((f) => /\.ya?ml$/.test(f))
      .sort();
  } catch (error) {
    throw new UsageError(
      `serve: cannot read the profiles folder ${folder}: ${(error as NodeJS.ErrnoException).code ?? ''}`,
    );
  }
  if (files.length === 0) throw new UsageError(`serve: no profiles (*.yaml) in ${folder}`);
  const problems: string[] = [];
  const served = new Map<string, ServedProfile>();
  for (const file of files.map((f) => path.resolve(folder, f))) {
    try {
      const profile = loadProfile(file);
      const twin = served.get(profile.name);
      if (twin) {
        problems.push(`${file}: name: "${profile.name}" is also the name of ${twin.profile.file}`);
        continue;
      }
      served.set(profile.name, { profile, approvals: approvalsOf(profile, log) });
    } catch (error) {
      if (error instanceof ProfileError || (error instanceof HintboxError && error.exitCode === 2)) {
        problems.push(error.message);
      } else {
        throw error;
      }
    }
  }
  if (problems.length > 0) throw new HintboxError(problems.join('\n'), { exitCode: 2 });
  return served;
}
