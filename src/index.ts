/** hintbox's public API: load a profile, plan sandboxes, open a session, serve a gateway. */
export { loadProfile, type Profile } from './profile/load-profile.js';
export { ProfileError, type ProfileProblem } from './profile/profile-problems.js';
export { ProfileSchema, type ParsedProfile } from './profile/profile-schema.js';
export { effectiveHints, claimedHints, HINT_DEFAULTS, type ToolHints, type ClaimedHints } from './policy/hints.js';
export {
  planSandboxes,
  type SandboxPlan,
  type PlannedSandbox,
  type PlannedTool,
  type Ceiling,
} from './policy/plan-sandboxes.js';
export type {
  SandboxEngine,
  SandboxSpec,
  HeldSandbox,
  StartedSandbox,
  PreparedImage,
  SessionIdentity,
} from './engine/sandbox-engine.js';
export { DockerEngine } from './engine/docker/docker-engine.js';
export { buildContainerSpec } from './engine/docker/container-spec.js';
export { LABEL_SESSION, LABEL_SERVER, LABEL_CLASS } from './engine/sandbox-labels.js';
export { DockerUnavailableError } from './engine/docker/docker-connection.js';
export { HintboxSession } from './session/hintbox-session.js';
export { ceilingOf } from './profile/profile-ceiling.js';
export { Gateway, type Upstream, type UpstreamFactory } from './gateway/gateway.js';
export { AuditLogWriter } from './audit/audit-log-writer.js';
export { verifyAuditLog, scanAuditLog } from './audit/audit-reader.js';
export { AUDIT_SCHEMA_VERSION, type AuditLine, type AuditIntent, type AuditEvent } from './audit/audit-record.js';
export { PostgresAuditSink } from './audit/postgres-sink.js';
export { lockFilePath, readLockFile, LOCK_FILE_VERSION, type LockFile } from './approvals/lock-file.js';
