import type { AuditLog } from '../audit/audit-record.js';
import type { Logger } from '../util/logger.js';

/** What is known of a hint a sandbox was seen to break. */
export interface HintViolationReport {
  sandboxId: string;
  /** `<hint>: what happened`, e.g. `readOnlyHint: Postgres refused the read role …`. */
  text: string;
  /** Marks the calls in flight in a sandbox and returns their tools (the gateway's `noteHintViolation`). */
  running: ((sandbox: string, violation: string) => string[]) | undefined;
  /** The tools planned in the sandbox (named when no call was running). */
  planned: readonly string[];
  server: string;
  session: string;
  log: Logger;
  audit?: Pick<AuditLog, 'recordEvent'>;
}

/**
 * A tool did what its hints said it would not (a database role refused, an egress proxy asked
 * for a host outside the server's backend): marks the calls running in that sandbox (their
 * audit outcomes record it), logs a hint violation naming the server and the tools, records it
 * in the audit log, and returns the reason the server is untrusted for the rest of the session.
 */
export function reportHintViolation(options: HintViolationReport): string {
  const { sandboxId, text } = options;
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
