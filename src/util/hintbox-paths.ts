import path from 'node:path';
import { hintboxEnvironment, type HintboxEnvironment } from '../config/environment.js';
import { PACKAGE_ROOT } from './package-root.js';

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
export function hintboxOwnPaths(
  env: Pick<HintboxEnvironment, 'stateDir' | 'auditDir'> = hintboxEnvironment(),
): OwnPath[] {
  return [
    { path: env.stateDir, what: "hintbox's state folder (audit log, known tools)" },
    ...(env.auditDir !== path.join(env.stateDir, 'audit') ? [{ path: env.auditDir, what: "hintbox's audit log" }] : []),
    { path: PACKAGE_ROOT, what: "hintbox's installation" },
  ];
}
