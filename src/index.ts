/** hintbox's public API: load a profile, plan sandboxes, open a session, serve a gateway. */
export { loadProfile, ProfileError, type Profile, type ProfileProblem } from './profile/load-profile.js';
export { ProfileSchema, type ParsedProfile } from './profile/profile-schema.js';
export { effectiveHints, claimedHints, HINT_DEFAULTS, type ToolHints, type ClaimedHints } from './policy/hints.js';
export {
  planSandboxes,
  type SandboxPlan,
  type PlannedSandbox,
  type PlannedTool,
  type Ceiling,
} from './policy/plan-sandboxes.js';
export { buildContainerSpec, LABEL_SESSION, LABEL_SERVER, LABEL_CLASS } from './engine/docker/container-spec.js';
export { connectDocker, DockerUnavailableError, type DockerConnection } from './engine/docker/docker-connection.js';
export { sweepOrphans, removeSession } from './engine/docker/sweep.js';
export { HintboxSession, ceilingOf } from './session/hintbox-session.js';
export { Gateway, type Upstream, type UpstreamFactory } from './gateway/gateway.js';
export { ImageBuilder } from './engine/docker/image-builder.js';
export { AuditLogWriter } from './audit/audit-log-writer.js';
export { verifyAuditLog, scanAuditLog } from './audit/audit-reader.js';
export { AUDIT_SCHEMA_VERSION, type AuditLine, type AuditIntent, type AuditEvent } from './audit/audit-record.js';
export { PostgresAuditSink } from './audit/postgres-sink.js';
export { lockFilePath, readLockFile, LOCK_FILE_VERSION, type LockFile } from './approvals/lock-file.js';
