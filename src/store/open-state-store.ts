import { createHash } from 'node:crypto';
import path from 'node:path';
import { withAuditJournal, type JournaledAuditLog } from './audit-journal.js';
import { openPgStateStore } from './pg-state-store.js';
import type { Logger } from '../util/logger.js';
import { packagePath } from '../util/package-root.js';
import { stateRoot } from '../util/hintbox-paths.js';

export { stateRoot };
import { connectStateDaemon, spawnStateDaemon } from './state-daemon.js';
import { SqlStateStore, type StateStore, type StateStoreOptions } from './state-store.js';

/**
 * Where hintbox keeps pins and the audit trail, from the environment (read here only):
 *
 * - `HINTBOX_DATABASE_URL`: a Postgres database, shared by every hintbox process.
 * - otherwise an embedded Postgres (PGlite) in `HINTBOX_STATE_DIR`, default
 *   `$XDG_STATE_HOME/hintbox` (`~/.local/state/hintbox`), served to every hintbox process of
 *   the machine by one state daemon (see state-daemon.ts) that the first of them starts.
 */
export interface StateLocation {
  kind: 'postgres' | 'embedded';
  /** For messages: the URL without its password, or the folder. */
  describe: string;
  url?: string;
  dir?: string;
}

export function stateLocation(env: NodeJS.ProcessEnv = process.env): StateLocation {
  const url = env.HINTBOX_DATABASE_URL;
  if (url) return { kind: 'postgres', url, describe: redact(url) };
  const dir = stateRoot(env);
  return { kind: 'embedded', dir, describe: dir };
}

/** Opens the state store: Postgres, or the embedded store through its daemon (started if needed). */
export async function openStateStore(location: StateLocation = stateLocation()): Promise<SqlStateStore> {
  if (location.kind === 'postgres' && location.url) return openPgStateStore({ url: location.url });
  return openDaemonStateStore({ dir: location.dir ?? stateRoot() });
}

/** The embedded store of `dir` through its daemon; starts the daemon (the CLI bundle) if none answers. */
export async function openDaemonStateStore(
  options: StateStoreOptions & { dir: string; startDaemon?: (dir: string) => void },
): Promise<SqlStateStore> {
  const { dir, startDaemon, ...storeOptions } = options;
  const adapter = await connectStateDaemon({
    dir,
    startDaemon: startDaemon ?? ((d) => spawnStateDaemon(packagePath('dist', 'hintbox.mjs'), d)),
  });
  return SqlStateStore.open(adapter, storeOptions);
}

/**
 * Where the audit journals of a store are (see audit-journal.ts): `journal/` in the state
 * folder, one subfolder per store, so that a crashed run's journal is replayed into the store
 * it was meant for — `embedded`, or `postgres-<hash>` of the database's host, port and name.
 */
export function journalFolder(location: StateLocation, env: NodeJS.ProcessEnv = process.env): string {
  if (location.kind === 'embedded') return path.join(location.dir ?? stateRoot(env), 'journal', 'embedded');
  const key = createHash('sha256').update(location.describe).digest('hex').slice(0, 16);
  return path.join(stateRoot(env), 'journal', `postgres-${key}`);
}

/**
 * The store as `hintbox run` uses it: opened, the journals of crashed runs replayed into it,
 * and a write-ahead journal in front of its audit trail (pins go straight to the store).
 */
export async function openJournaledStateStore(
  location: StateLocation,
  log: Logger,
): Promise<StateStore & { readonly audit: JournaledAuditLog }> {
  const store = await openStateStore(location);
  try {
    return await withAuditJournal(store, { dir: journalFolder(location), log });
  } catch (error) {
    await store.close().catch(() => undefined);
    throw error;
  }
}

function redact(url: string): string {
  try {
    // Only where it is: host, port and database. Passwords may also hide in query parameters.
    const u = new URL(url);
    return `${u.protocol}//${u.hostname}${u.port ? `:${u.port}` : ''}${u.pathname}`;
  } catch {
    return '(an unparsable URL)';
  }
}
