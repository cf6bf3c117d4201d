import os from 'node:os';
import path from 'node:path';
import { openPgStateStore } from './pg-state-store.js';
import { packagePath } from '../util/package-root.js';
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

export function stateRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HINTBOX_STATE_DIR) return path.resolve(env.HINTBOX_STATE_DIR);
  const base = env.XDG_STATE_HOME ? path.resolve(env.XDG_STATE_HOME) : path.join(os.homedir(), '.local', 'state');
  return path.join(base, 'hintbox');
}

export function stateLocation(env: NodeJS.ProcessEnv = process.env): StateLocation {
  const url = env.HINTBOX_DATABASE_URL;
  if (url) return { kind: 'postgres', url, describe: redact(url) };
  const dir = stateRoot(env);
  return { kind: 'embedded', dir, describe: dir };
}

/** Opens the state store: Postgres, or the embedded store through its daemon (started if needed). */
export async function openStateStore(location: StateLocation = stateLocation()): Promise<StateStore> {
  if (location.kind === 'postgres' && location.url) return openPgStateStore({ url: location.url });
  return openDaemonStateStore({ dir: location.dir ?? stateRoot() });
}

/** The embedded store of `dir` through its daemon; starts the daemon (the CLI bundle) if none answers. */
export async function openDaemonStateStore(
  options: StateStoreOptions & { dir: string; startDaemon?: (dir: string) => void },
): Promise<StateStore> {
  const { dir, startDaemon, ...storeOptions } = options;
  const adapter = await connectStateDaemon({
    dir,
    startDaemon: startDaemon ?? ((d) => spawnStateDaemon(packagePath('dist', 'hintbox.mjs'), d)),
  });
  return SqlStateStore.open(adapter, storeOptions);
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
