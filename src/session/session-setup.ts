import path from 'node:path';
import { lockFilePath, readLockFile, type LockFile } from '../approvals/lock-file.js';
import { AuditLogWriter } from '../audit/audit-log-writer.js';
import type { PostgresAuditSink } from '../audit/postgres-sink.js';
import { openAuditKey } from '../audit/audit-key.js';
import type { AuditEvent, AuditLog } from '../audit/audit-record.js';
import { loadOtlpCallSpans, TracedAuditLog } from '../audit/call-tracing.js';
import { hintboxEnvironment } from '../config/environment.js';
import type { Profile } from '../profile/load-profile.js';
import type { Logger } from '../util/logger.js';
import { redactUrl } from '../util/redact-url.js';
import { HintboxSession } from './hintbox-session.js';
import { knownToolsIn } from '../catalog/known-tools.js';
import type { SessionOptions } from './session-options.js';

/**
 * What `hintbox run` (one session on stdio) and `hintbox serve` (a session per HTTP client) set
 * up the same way: the audit trail, the approvals of a profile, and a session opened cold from
 * the lock file or warm by discovery.
 */

/** The process's audit log and, with HINTBOX_DATABASE_URL, its copy into Postgres. */
export interface AuditTrail {
  /** The log, and each call a span beside it when tracing is on (`call-tracing.ts`). */
  audit: AuditLog & { recordEvent(event: AuditEvent): void };
  /** Outcomes of ended calls the log could not write yet. */
  unwrittenOutcomes(): number;
  /** Seconds the Postgres sink may be behind the log (since it last caught up); undefined without one. */
  sinkLagSeconds(): number | undefined;
  /** Closes the log, then stops the sink (after it shipped what it could). */
  close(): Promise<void>;
}

/** Opens the audit trail; a process that cannot record its calls does not start. */
export function openAuditTrail(log: Logger): AuditTrail {
  const { auditDir: dir, auditKeyFile } = hintboxEnvironment();
  let audit: AuditLogWriter;
  try {
    const { privateKey } = openAuditKey(auditKeyFile, { auditDir: dir, create: true });
    audit = AuditLogWriter.open({ dir, log, checkpoints: { key: privateKey } });
  } catch (error) {
    throw new Error(`cannot open the audit log in ${dir}: ${(error as Error).message}`);
  }
  // The sink reads the files, never the calls, so a database that is slow or down slows nothing.
  const sinkUrl = hintboxEnvironment().databaseUrl;
  // Its code (and pg's) is loaded only when there is a sink: a run without one never reads it.
  let sink: PostgresAuditSink | undefined;
  const sinkStarted = sinkUrl
    ? import('../audit/postgres-sink.js').then(({ PostgresAuditSink }) => {
        sink = new PostgresAuditSink({ url: sinkUrl, dir, log, chain: audit.chain });
        log.info(`audit log shipped to ${redactUrl(sinkUrl)}`);
        sink.start();
        return sink;
      })
    : undefined;
  // Never a rejection left unheard: the log stays the record without its copy.
  sinkStarted?.catch((error: Error) => log.warn(`audit sink: could not start: ${error.message}`));
  const { tracing } = hintboxEnvironment();
  const traced = tracing ? new TracedAuditLog(audit, loadOtlpCallSpans(), log) : undefined;
  if (traced) log.info('each call is traced (OTEL_EXPORTER_OTLP_*)');
  let closed: Promise<void> | undefined;
  return {
    audit: traced ?? audit,
    unwrittenOutcomes: () => audit.unwrittenOutcomes,
    // A sink still loading has shipped nothing yet and is not behind (as one just started).
    sinkLagSeconds: () => (sinkUrl ? (sink?.lagSeconds() ?? 0) : undefined),
    close: () =>
      (closed ??= (async () => {
        audit.close();
        await Promise.all([sinkStarted?.then((started) => started.stop()).catch(() => undefined), traced?.shutdown()]);
      })()),
  };
}

/** A profile's approvals: the lock file beside it, read (never written) at start and again on demand. */
export interface Approvals {
  file: string;
  /** As read at start; a malformed lock file throws there, before anything starts. */
  locked: LockFile | undefined;
  read: () => LockFile | undefined;
}

export function approvalsOf(profile: Profile, log: Logger): Approvals {
  const file = lockFilePath(profile.file);
  const read = (): LockFile | undefined => readLockFile(file, profile.name);
  const locked = read();
  if (!locked) log.info(`no lock file ${file}: nothing approved yet (see hintbox approve)`);
  return { file, locked, read };
}

/** The tools each image listed last time, kept in the state folder. */
export function knownTools(): NonNullable<SessionOptions['knownTools']> {
  return knownToolsIn(path.join(hintboxEnvironment().stateDir, 'known-tools'));
}

/**
 * With approved tools in the lock file the client is served at once from it (a cold start),
 * while the server is built, discovered and verified in the background (at once, or with
 * `deferVerification` when the session's `verify` is called); calls wait for that. Without,
 * the session is up (every planned sandbox started) before it resolves.
 */
export function openSession(
  options: SessionOptions & { locked: LockFile | undefined; deferVerification?: boolean },
): Promise<HintboxSession> {
  const { locked, deferVerification, ...sessionOptions } = options;
  return opensCold(options)
    ? Promise.resolve(
        HintboxSession.openFromLock({
          ...sessionOptions,
          lock: locked as LockFile,
          deferVerification: !!deferVerification,
        }),
      )
    : HintboxSession.open({ ...sessionOptions, startAll: true });
}

/** Whether a session of these options starts cold from its lock file (approved tools, no rebuild asked for). */
export function opensCold(options: { locked: LockFile | undefined; rebuildImages?: boolean }): boolean {
  return !!options.locked && Object.keys(options.locked.tools).length > 0 && options.rebuildImages !== true;
}
