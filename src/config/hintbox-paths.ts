import path from 'node:path';
import { PACKAGE_ROOT } from '../util/package-root.js';
import { hintboxEnvironment, type HintboxEnvironment } from './environment.js';

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
