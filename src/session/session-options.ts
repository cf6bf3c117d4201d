import type { CallGuardOptions } from '../gateway/call-guard.js';
import type { LockFile } from '../approvals/lock-file.js';
import type { AuditLog } from '../audit/audit-record.js';
import type { SandboxEngine } from '../engine/sandbox-engine.js';
import type { Profile } from '../profile/load-profile.js';
import type { Logger } from '../util/logger.js';
import type { KnownTools } from '../catalog/known-tools.js';
import type { Caller } from '../util/caller-identity.js';

/** What a session is opened with, and what its gateway is made with. */

export interface SessionOptions {
  profile: Profile;
  /** The tools each image listed last time: their sandboxes start in parallel with discovery. */
  knownTools?: KnownTools;
  /** What runs the sandboxes. */
  engine: SandboxEngine;
  log: Logger;
  sessionId?: string;
  /** Rebuild images even when they look current. */
  rebuildImages?: boolean;
  /** The admin URL of the profile's database; default: read from the variable the profile names. */
  databaseAdminUrl?: string;
  /** Where sandbox starts and stops and hint violations are recorded (the run's audit log). */
  audit?: Pick<AuditLog, 'recordEvent'>;
  /** Stops the start: what it made is removed, and the open rejects (`hintbox run` on a signal). */
  signal?: AbortSignal;
}

export interface GatewaySettings {
  /**
   * The lock file of approved definitions, read again when a hidden tool is called (an approval
   * during the run); returns undefined when there is none. Without it and an audit log no call
   * is approved or recorded (tests of routing).
   */
  approvals?: () => LockFile | undefined;
  /** Where every call is recorded before it is forwarded. */
  audit?: AuditLog;
  /** `--tags`: serve only tools with one of these tags. */
  tagFilter?: readonly string[];
  /** The client's identity (subject and client), recorded with every call; default null (stdio). */
  caller?: Caller | null;
  /** hintbox's console (`--console`): confirmations get a page there too (see CallGuardOptions.console). */
  console?: CallGuardOptions['console'];
}
