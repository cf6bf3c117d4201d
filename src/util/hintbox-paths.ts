import os from 'node:os';
import path from 'node:path';
import { PACKAGE_ROOT } from './package-root.js';

/**
 * hintbox's state folder (pins, the audit trail and its journals, known tools):
 * `HINTBOX_STATE_DIR`, else `$XDG_STATE_HOME/hintbox`, else `~/.local/state/hintbox`.
 */
export function stateRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HINTBOX_STATE_DIR) return path.resolve(env.HINTBOX_STATE_DIR);
  const base = env.XDG_STATE_HOME ? path.resolve(env.XDG_STATE_HOME) : path.join(os.homedir(), '.local', 'state');
  return path.join(base, 'hintbox');
}

/** A folder of hintbox's own that no sandbox may see: what the operator decides lives there. */
export interface OwnPath {
  path: string;
  /** For messages: "hintbox's state folder". */
  what: string;
}

/** hintbox's state folder and its installation (the package it runs from). */
export function hintboxOwnPaths(env: NodeJS.ProcessEnv = process.env): OwnPath[] {
  return [
    { path: stateRoot(env), what: "hintbox's state folder (pins, audit trail)" },
    { path: PACKAGE_ROOT, what: "hintbox's installation" },
  ];
}
