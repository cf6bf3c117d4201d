import { processVariables, type Variables } from '../config/environment.js';
import { ProfileError } from '../profile/profile-problems.js';
import type { DatabaseSection } from '../profile/database-profile-schema.js';

/**
 * The one place hintbox reads the admin connection URL from the environment. The profile names
 * the variable (`database.adminUrlEnv`); the URL itself is never written in a profile, never
 * logged, never echoed in an error.
 */
export function databaseAdminUrl(
  profile: { file: string; database: Pick<DatabaseSection, 'adminUrlEnv'> },
  env: Variables = processVariables(),
): string {
  const section = profile.database;
  const value = env[section.adminUrlEnv];
  if (value === undefined || value.trim() === '') {
    throw new ProfileError([
      {
        file: profile.file,
        path: 'database.adminUrlEnv',
        message: `environment variable ${section.adminUrlEnv} is not set`,
      },
    ]);
  }
  return value;
}
