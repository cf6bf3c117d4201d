import type { ApprovalRequest } from '../../../src/console/console-approvals.js';

/** A confirmation as the console's tests ask it: a write of the filesystem server; `over` changes any field. */
export function approvalRequest(over: Partial<ApprovalRequest> = {}): ApprovalRequest {
  return {
    server: 'filesystem',
    session: 'session-1',
    caller: { subject: 'alice' },
    tool: 'write_file',
    tags: ['writes'],
    sandbox: 'rw-offline',
    sandboxGrant: '/workspace read-write; no network',
    effectiveHints: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    warnings: [],
    reasons: ['it may overwrite files'],
    arguments: { path: '/workspace/a.txt', content: 'hello' },
    pinHash: 'pin-1',
    preview: { available: false, reason: 'no preview' },
    ...over,
  };
}
