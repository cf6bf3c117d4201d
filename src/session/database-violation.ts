import type { AuditLog } from '../audit/audit-record.js';
import type { DatabasePrivilege } from '../profile/database-profile-schema.js';
import type { PrivilegeViolation } from '../database/socket-relay.js';
import type { SessionDatabase } from '../database/session-database.js';
import type { Logger } from '../util/logger.js';

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
 * not. Marks the calls running in that sandbox (their audit outcomes record it), logs a hint
 * violation naming the server and the tools, records it in the audit log, and returns the
 * reason the server is untrusted for the rest of the session.
 */
export function reportDatabaseViolation(options: {
  sandboxId: string;
  role: string;
  violation: PrivilegeViolation;
  /** The privilege of the sandbox's role. */
  privilege: DatabasePrivilege | undefined;
  /** Marks the calls in flight in a sandbox and returns their tools (the gateway's `noteHintViolation`). */
  running: ((sandbox: string, violation: string) => string[]) | undefined;
  /** The tools planned in the sandbox (named when no call was running). */
  planned: readonly string[];
  server: string;
  session: string;
  log: Logger;
  audit?: Pick<AuditLog, 'recordEvent'>;
}): string {
  const { sandboxId, role, violation, privilege } = options;
  const hint =
    privilege === 'read' ? 'readOnlyHint' : privilege === 'append' ? 'destructiveHint' : "the profile's database grant";
  const text = `${hint}: Postgres refused the ${privilege ?? ''} role ${role} (SQLSTATE ${violation.sqlstate}: ${violation.message})`;
  const running = options.running?.(sandboxId, text) ?? [];
  const tools = running.length ? [...new Set(running)] : [...options.planned];
  const who = running.length
    ? `tool ${tools.join(', ')}`
    : `one of the tools ${tools.join(', ') || '(discovery)'} (no call was running)`;
  options.log.error(`hint violation: server ${options.server}, ${who}, sandbox ${sandboxId}: ${text}`);
  options.audit?.recordEvent?.({
    type: 'hint.violation',
    session: options.session,
    server: options.server,
    tool: tools.join(', ') || null,
    sandbox: sandboxId,
    violation: text,
  });
  return `${tools.join(', ') || sandboxId} broke ${text}`;
}
