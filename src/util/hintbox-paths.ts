import os from 'node:os';
import path from 'node:path';
import { PACKAGE_ROOT } from './package-root.js';

/**
 * hintbox's state folder (the audit log unless HINTBOX_AUDIT_DIR says otherwise, known tools):
 * `HINTBOX_STATE_DIR`, else `$XDG_STATE_HOME/hintbox`, else `~/.local/state/hintbox`.
 */
export function stateRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HINTBOX_STATE_DIR) return path.resolve(env.HINTBOX_STATE_DIR);
  const base = env.XDG_STATE_HOME ? path.resolve(env.XDG_STATE_HOME) : path.join(os.homedir(), '.local', 'state');
  return path.join(base, 'hintbox');
}

/** The audit log's folder: `HINTBOX_AUDIT_DIR`, else `audit/` in the state folder. */
export function auditDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.HINTBOX_AUDIT_DIR ? path.resolve(env.HINTBOX_AUDIT_DIR) : path.join(stateRoot(env), 'audit');
}

/** `HINTBOX_DATABASE_URL`: the Postgres the audit log is shipped to (a sink; the log stays the record). */
export function auditSinkUrl(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return env.HINTBOX_DATABASE_URL || undefined;
}

/** A URL without its password, for messages: host, port and database. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.hostname}${u.port ? `:${u.port}` : ''}${u.pathname}`;
  } catch {
    return '(an unparsable URL)';
  }
}

/** A folder of hintbox's own that no sandbox may see: what the operator decides lives there. */
export interface OwnPath {
  path: string;
  /** For messages: "hintbox's state folder". */
  what: string;
}

/** hintbox's state folder, its audit log and its installation (the package it runs from). */
export function hintboxOwnPaths(env: NodeJS.ProcessEnv = process.env): OwnPath[] {
  return [
    { path: stateRoot(env), what: "hintbox's state folder (audit log, known tools)" },
    ...(env.HINTBOX_AUDIT_DIR ? [{ path: auditDir(env), what: "hintbox's audit log" }] : []),
    { path: PACKAGE_ROOT, what: "hintbox's installation" },
  ];
}
