import type { AuditIntent } from '../../src/audit/audit-record.js';
import { effectiveHints } from '../../src/policy/hints.js';

/** The intent of call `i` of an unannotated write tool (`/w/<i>`), for tests that write audit logs. */
export function writeIntent(i: number, partial: Partial<AuditIntent> = {}): AuditIntent {
  return {
    session: 's1',
    server: 'fs',
    tool: 'write_file',
    tags: [],
    claimedHints: {},
    effectiveHints: effectiveHints({}),
    sandbox: 'rw-offline',
    decision: 'allowed',
    decidedBy: 'auto',
    arguments: { path: `/w/${i}` },
    pinHash: 'a'.repeat(64),
    ...partial,
  };
}
