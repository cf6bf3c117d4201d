import os from 'node:os';
import path from 'node:path';
import { openPgStateStore } from './pg-state-store.js';
import type { StateStore } from './state-store.js';

/**
 * Where hintbox keeps pins and the audit trail, from the environment (read here only):
 *
 * - `HINTBOX_DATABASE_URL`: a Postgres database, shared by every hintbox process.
 * - otherwise an embedded Postgres (PGlite) in `HINTBOX_STATE_DIR`, default
 *   `$XDG_STATE_HOME/hintbox` (`~/.local/state/hintbox`), one folder per server. PGlite is
 *   single-process: while `hintbox run` has a server's folder open, a second run of the same
 *   server (or `hintbox approve`/`audit` on it) is refused with a message saying so.
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

export function stateLocation(server: string, env: NodeJS.ProcessEnv = process.env): StateLocation {
  const url = env.HINTBOX_DATABASE_URL;
  if (url) return { kind: 'postgres', url, describe: redact(url) };
  const dir = path.join(stateRoot(env), server);
  return { kind: 'embedded', dir, describe: dir };
}

/** Opens the state store for a server. PGlite (WebAssembly) is loaded only when used. */
export async function openStateStore(location: StateLocation): Promise<StateStore> {
  if (location.kind === 'postgres' && location.url) return openPgStateStore({ url: location.url });
  const { openPgliteStateStore } = await import('./pglite-state-store.js');
  return openPgliteStateStore({ dir: location.dir ?? '.' });
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(an unparsable URL)';
  }
}
