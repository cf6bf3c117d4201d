import type { SessionIdentity } from './sandbox-engine.js';

/**
 * The labels every engine puts on what it creates for a session (containers, Pods, networks,
 * NetworkPolicies), so that a sweep finds what a dead run left, and the name of a sandbox.
 */

export const LABEL_SESSION = 'hintbox.session';
export const LABEL_SERVER = 'hintbox.server';
export const LABEL_CLASS = 'hintbox.class';
/** Host name and pid of the hintbox process that owns the container: the sweep checks them. */
export const LABEL_OWNER_HOST = 'hintbox.owner-host';
export const LABEL_OWNER_PID = 'hintbox.owner-pid';

/** A preview's sandbox is labelled so (its class label is `preview-<class>`). */
export const LABEL_PREVIEW = 'hintbox.preview';

export function containerName(session: SessionIdentity, server: string, sandboxId: string): string {
  return `hintbox-${session.sessionId}-${server}-${sandboxId}`;
}
