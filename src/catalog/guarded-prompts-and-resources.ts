import type { LockFile } from '../approvals/lock-file.js';
import { lockedPromptOrResource } from '../approvals/lock-file.js';
import type { PromptsAndResources } from './discover-prompts-and-resources.js';
import {
  LIST_FIELD,
  PROMPT_RESOURCE_KINDS,
  KIND_LABEL,
  keyOf,
  pinPromptOrResource,
  type PromptOrResourceKind,
} from '../policy/prompt-resource-pin.js';
import type { Profile } from '../profile/load-profile.js';
import type { Logger } from '../util/logger.js';
import { renderServerText } from '../util/render-server-text.js';

/**
 * The prompts, resources and resource templates a client may see, by their pins against the
 * approved ones (the lock file), as for tools (`guarded-tools.ts`):
 * - the locked definition: shown;
 * - any difference from it (a prompt's text, a resource's description): hidden until
 *   `hintbox approve`, and a hidden prompt cannot be fetched;
 * - not in the lock: an untrusted server's are hidden; a trusted server's are shown, and without
 *   a lock file what this run first listed (`firstSeen`) stands in for it, so a change during
 *   the run is still caught;
 * - a lock file that cannot be read: every one is hidden (fail closed).
 * Returns what is shown; what is hidden is logged by key (never its text).
 */
export function guardPromptsAndResources(options: {
  profile: Profile;
  /** Whether the server is trusted now (the profile's trust, until it breaks a hint). Default: the profile's. */
  trusted?: boolean;
  listed: PromptsAndResources;
  /** Reads the lock file now: undefined when there is none; throws when it cannot be read. */
  readLock: () => LockFile | undefined;
  /** A trusted server's prompts, resources and templates as first listed in this run, by kind and key: their hashes. */
  firstSeen: Map<string, string>;
  log: Logger;
}): PromptsAndResources {
  const { profile, listed, firstSeen, log } = options;
  let lock: LockFile | undefined;
  try {
    lock = options.readLock();
  } catch (error) {
    const count = PROMPT_RESOURCE_KINDS.reduce((n, kind) => n + listed[LIST_FIELD[kind]].length, 0);
    if (count) log.error(`cannot read the lock file: ${(error as Error).message}; every prompt and resource is hidden`);
    return { prompts: [], resources: [], resourceTemplates: [] };
  }
  // A server that broke a hint is untrusted: only what a person approved is shown.
  const trusted = options.trusted ?? profile.trust === 'trusted';
  const trustOnFirstUse = trusted && lock === undefined;
  const hidden: string[] = [];
  const shown = (kind: PromptOrResourceKind, item: object): boolean => {
    const key = keyOf(kind, item);
    const { hash } = pinPromptOrResource(item);
    const seenKey = `${kind}\u0000${key}`;
    if (trustOnFirstUse && !firstSeen.has(seenKey)) firstSeen.set(seenKey, hash);
    const approved = trustOnFirstUse
      ? firstSeen.get(seenKey)
      : lock
        ? lockedPromptOrResource(lock, kind, key)?.sha256
        : undefined;
    const visible = approved === undefined ? trusted : approved === hash;
    if (!visible) {
      hidden.push(
        `${KIND_LABEL[kind]} ${renderServerText(key)} (${approved === undefined ? 'not approved' : 'changed since approved'})`,
      );
    }
    return visible;
  };
  const visible: PromptsAndResources = {
    prompts: listed.prompts.filter((p) => shown('prompt', p)),
    resources: listed.resources.filter((r) => shown('resource', r)),
    resourceTemplates: listed.resourceTemplates.filter((t) => shown('resourceTemplate', t)),
  };
  if (hidden.length) {
    const shownHidden = hidden.length > 10 ? [...hidden.slice(0, 10), `and ${hidden.length - 10} more`] : hidden;
    log.warn(`hidden from the client: ${shownHidden.join(', ')}; see "hintbox approve ${profile.file} --all"`);
  }
  return visible;
}
