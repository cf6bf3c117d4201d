import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { LockFile } from '../approvals/lock-file.js';
import { HintboxSession, type SessionOptions } from '../session/hintbox-session.js';
import { describeDifferences, differencesFromLock } from '../session/guarded-tools.js';
import type { Logger } from '../util/logger.js';
import type { ServerState } from './server-readiness.js';

/**
 * What a verification of a served server against its lock file makes its state (`/readyz`):
 * `ready` when the running server lists what its lock file approved (or only narrower hints),
 * else `differs-from-lock`, logged with the tools by name: changed (hidden and refused), not in
 * the lock file (added, or renamed), approved but not listed (removed, or renamed). A lock file
 * that cannot be read differs in every tool. How a call is decided does not depend on it.
 */
export function verifiedState(options: {
  name: string;
  /** The tools the running server listed (malformed ones left out). */
  tools: readonly Tool[];
  /** Reads the lock file now. */
  lock: () => LockFile | undefined;
  /** The profile's file, for the `hintbox approve` the log suggests. */
  profileFile: string;
  log: Logger;
}): ServerState {
  let differences: string;
  try {
    differences = describeDifferences(differencesFromLock(options.tools, options.lock()));
  } catch (error) {
    differences = `every tool: the lock file cannot be read: ${(error as Error).message}`;
  }
  if (differences === '') return 'ready';
  options.log.error(
    `serve: ${options.name}: its server lists other definitions than its lock file approved (${differences}): ` +
      `changed ones are hidden and refused until approved again (see "hintbox approve ${options.profileFile}"); /readyz is not ready`,
  );
  return 'differs-from-lock';
}

/**
 * A server discovered once, as `hintbox approve` lists it (its image built, one sandbox that
 * mounts everything read-only), then removed: what it listed, or why it could not be. Aborting
 * `signal` stops it (nothing it made is left).
 */
export async function discoverOnce(options: SessionOptions): Promise<readonly Tool[] | Error> {
  try {
    await using session = await HintboxSession.open({ ...options, startAll: false });
    return session.tools;
  } catch (error) {
    return error as Error;
  }
}
