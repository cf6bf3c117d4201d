import os from 'node:os';
import path from 'node:path';
import type { HintboxEnvironment } from '../config/environment.js';
import type { BindSource } from '../engine/sandbox-engine.js';
import type { Profile } from '../profile/load-profile.js';
import { socketBaseDirs } from '../util/unix-socket.js';

/**
 * Every host path serve binds into sandboxes, or keeps for the operator on the host, for the
 * engine's check before anything starts (hintbox in a container: each must be mounted at the
 * same path). A path left out here is a sandbox that fails, or a file that vanishes, later:
 *
 * - each profile's mounts (`mounts[].source`), bound as the server's files;
 * - the temporary folder (`$TMPDIR`): the gates' socket folders (`hintbox-io-*`, bound at
 *   /run/hintbox/io), the database relays' (`hintbox-pg-*`, at /run/hintbox/pg) and the copies
 *   a preview of a write runs on;
 * - the state folder: the gate's copy (bound at /run/hintbox/gate), known tools, and the audit
 *   log the operator reads with `hintbox audit`; the audit folder where it is elsewhere.
 *
 * Pure apart from the default temporary folder.
 */
export function sandboxBindSources(
  profiles: Iterable<Pick<Profile, 'name' | 'mounts'>>,
  env: Pick<HintboxEnvironment, 'stateDir' | 'auditDir'>,
  tmpDir: string = os.tmpdir(),
): BindSource[] {
  const sources: BindSource[] = [];
  for (const profile of profiles) {
    for (const mount of profile.mounts) {
      sources.push({ path: mount.source, what: `${profile.name}'s mount ${mount.target}` });
    }
  }
  sources.push(
    { path: path.resolve(tmpDir), what: 'the temporary folder ($TMPDIR: gate and relay sockets, previews)' },
    // $TMPDIR too long for a socket path: the sockets' folders are in the short one instead.
    ...socketBaseDirs(tmpDir)
      .filter((dir) => dir !== path.resolve(tmpDir))
      .map((dir) => ({ path: dir, what: 'the socket folder (gate and relay sockets; $TMPDIR is too long for them)' })),
    { path: env.stateDir, what: "hintbox's state folder (HINTBOX_STATE_DIR)" },
  );
  if (!env.auditDir.startsWith(`${env.stateDir}/`)) {
    sources.push({ path: env.auditDir, what: "hintbox's audit folder (HINTBOX_AUDIT_DIR)" });
  }
  return sources;
}
