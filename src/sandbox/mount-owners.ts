import { statSync } from 'node:fs';
import { ProfileError, type Profile, type ProfileProblem } from '../profile/load-profile.js';

/**
 * Whether the sandbox user can write the folders a profile mounts read-write. Sandboxes never run
 * as root (10001 when hintbox runs as root, else hintbox's own user, or the profile's
 * `server.user`), so a root-owned workspace — the usual case when hintbox runs as root — would
 * fail every write of the server with EACCES, far from the cause. hintbox refuses it before
 * anything starts, saying what to do.
 */

export interface UserIds {
  uid: number;
  gid: number;
}

/** Whether `user` may create files in a folder of this owner and mode, by its permission bits (no ACLs). Pure. */
export function mayWriteFolder(folder: { uid: number; gid: number; mode: number }, user: UserIds): boolean {
  const bits = folder.uid === user.uid ? 0o300 : folder.gid === user.gid ? 0o030 : 0o003;
  return (folder.mode & bits) === bits;
}

/** One line per read-write mount whose source the sandbox user cannot write. */
export function unwritableMounts(profile: Pick<Profile, 'file' | 'mounts'>, user: UserIds): ProfileProblem[] {
  return profile.mounts.flatMap((mount, index): ProfileProblem[] => {
    if (mount.mode !== 'rw') return [];
    const stat = statSync(mount.source, { throwIfNoEntry: false });
    if (!stat?.isDirectory() || mayWriteFolder(stat, user)) return [];
    const owner = `${stat.uid}:${stat.gid}`;
    const who = `${user.uid}:${user.gid}`;
    return [
      {
        file: profile.file,
        path: `mounts[${index}].source`,
        message:
          `${mount.source} (owner ${owner}, mode ${(stat.mode & 0o777).toString(8)}) cannot be written by the sandbox user ${who} ` +
          `(sandboxes never run as root): chown -R ${who} ${mount.source}, set server.user to a non-root owner that may write it, or make the mount mode: ro`,
      },
    ];
  });
}

/** Throws a ProfileError (exit 2) naming each read-write mount the sandbox user cannot write. */
export function assertWritableMounts(profile: Pick<Profile, 'file' | 'mounts'>, user: UserIds): void {
  const problems = unwritableMounts(profile, user);
  if (problems.length > 0) throw new ProfileError(problems);
}
