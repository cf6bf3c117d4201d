import os from 'node:os';
import path from 'node:path';
import { PACKAGE_ROOT } from '../util/package-root.js';
import { socketBaseDirs } from '../util/unix-socket.js';
import { hintboxEnvironment, type HintboxEnvironment } from './environment.js';

/** A folder of hintbox's own that no sandbox may see: what the operator decides lives there. */
export interface OwnPath {
  path: string;
  /** For messages: "hintbox's state folder". */
  what: string;
  /**
   * Only the folder itself, what contains it, and its sub-folders whose names begin so are
   * refused (hintbox's temporary folder: a workspace elsewhere in /tmp is the operator's).
   */
  onlyOwn?: readonly string[];
  /** Every file below it must have one name: a hard link elsewhere could be written (see profile/operator-file-links.ts). */
  oneNameEach?: boolean;
}

/** hintbox's folders in the temporary folder: the gates' and relays' sockets, the previews' copies. */
export const OWN_TEMP_PREFIXES = ['hintbox-io-', 'hintbox-pg-', 'hintbox-preview-'] as const;

/** hintbox's state folder, its audit log and key, and its installation (the package it runs from). */
export function hintboxOwnPaths(
  env: Pick<HintboxEnvironment, 'stateDir' | 'auditDir'> &
    Partial<Pick<HintboxEnvironment, 'auditKeyFile'>> = hintboxEnvironment(),
): OwnPath[] {
  return [
    // The audit signing key, when HINTBOX_AUDIT_KEY puts it outside the state folder.
    ...(env.auditKeyFile && !env.auditKeyFile.startsWith(`${env.stateDir}/`)
      ? [{ path: env.auditKeyFile, what: "hintbox's audit signing key (HINTBOX_AUDIT_KEY)" }]
      : []),
    { path: env.stateDir, what: "hintbox's state folder (audit log, known tools)", oneNameEach: true },
    ...(env.auditDir !== path.join(env.stateDir, 'audit')
      ? [{ path: env.auditDir, what: "hintbox's audit log", oneNameEach: true }]
      : []),
    { path: PACKAGE_ROOT, what: "hintbox's installation" },
    // Its sandboxes' gate and database sockets and other servers' preview copies live there.
    { path: os.tmpdir(), what: "hintbox's temporary folder", onlyOwn: OWN_TEMP_PREFIXES },
    // Where the sockets go instead when $TMPDIR is too long for a socket path.
    ...socketBaseDirs()
      .filter((dir) => dir !== path.resolve(os.tmpdir()))
      .map((dir) => ({ path: dir, what: "hintbox's socket folder", onlyOwn: OWN_TEMP_PREFIXES })),
  ];
}
