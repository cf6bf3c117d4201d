import { randomBytes } from 'node:crypto';
import os from 'node:os';

/** Who owns a session's sandboxes and database roles; each carries it, so that a sweep finds a dead run's. */
export interface SessionIdentity {
  sessionId: string;
  ownerHost: string;
  ownerPid: number;
}

/** A short random id for a session; it names and labels everything the session creates. */
export function newSessionId(): string {
  return randomBytes(4).toString('hex');
}

/** This process's identity for a session. */
export function sessionIdentity(sessionId: string): SessionIdentity {
  return { sessionId, ownerHost: os.hostname(), ownerPid: process.pid };
}
