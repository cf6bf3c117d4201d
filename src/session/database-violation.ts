import type { AuditLog } from '../audit/audit-record.js';
import type { DatabasePrivilege } from '../profile/database-profile-schema.js';
import type { PrivilegeViolation } from '../database/socket-relay.js';
import type { Logger } from '../util/logger.js';

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
