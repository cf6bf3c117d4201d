import type { DatabasePrivilege } from '../profile/database-profile-schema.js';
import type { PrivilegeViolation } from '../database/socket-relay.js';
import type { SessionDatabase } from '../database/session-database.js';
import type { Logger } from '../util/logger.js';
import { reportHintViolation, type HintViolationReport } from './hint-violation.js';

/**
 * What the gateway does to a sandbox's database sessions as its calls end: a call past its
 * deadline may hold a lock or run a query on, so its sandbox's sessions are cut; and a call's
 * sessions end with it, so that no lock, transaction or LISTEN outlives the sandbox's last call
 * in flight (a held sandbox is frozen first, so it cannot reconnect). The database is looked up
 * at each call: a cold start opens it after the gateway is made.
 */
export function databaseCallHooks(
  database: () => SessionDatabase | undefined,
  log: Logger,
): {
  onDeadline: (sandbox: string, tool: string) => void;
  onSandboxIdle: (sandbox: string) => Promise<void> | undefined;
} {
  return {
    onDeadline: (sandbox, tool) => {
      void database()
        ?.endCallSessions(sandbox)
        .then(
          (n) => n > 0 && log.warn(`${tool}: deadline passed, cut ${n} database session(s) of sandbox ${sandbox}`),
          (error: Error) => log.warn(`could not cut the database sessions of ${sandbox}: ${error.message}`),
        );
    },
    onSandboxIdle: (sandbox) =>
      database()
        ?.endCallSessions(sandbox)
        .then(
          (n) => void (n > 0 && log.debug(`ended ${n} database session(s) of sandbox ${sandbox}`)),
          (error: Error) =>
            log.warn(`could not end the database sessions of sandbox ${sandbox} after its call: ${error.message}`),
        ),
  };
}

/**
 * Postgres refused a sandbox's session (42501, 25006): a tool did what its hints said it would
 * not. Reported as a hint violation (see `reportHintViolation`); returns the reason the server is
 * untrusted for the rest of the session.
 */
export function reportDatabaseViolation(
  options: Omit<HintViolationReport, 'text'> & {
    role: string;
    violation: PrivilegeViolation;
    /** The privilege of the sandbox's role. */
    privilege: DatabasePrivilege | undefined;
  },
): string {
  const { role, violation, privilege } = options;
  const hint =
    privilege === 'read' ? 'readOnlyHint' : privilege === 'append' ? 'destructiveHint' : "the profile's database grant";
  const text = `${hint}: Postgres refused the ${privilege ?? ''} role ${role} (SQLSTATE ${violation.sqlstate}: ${violation.message})`;
  return reportHintViolation({ ...options, text });
}
