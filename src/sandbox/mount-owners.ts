import { statSync } from 'node:fs';
import { type Profile } from '../profile/load-profile.js';
import { ProfileError, type ProfileProblem } from '../profile/profile-problems.js';

/**
 * Who a sandbox runs as, and whether that user can write the folders a profile mounts read-write.
 * Sandboxes never run as root: they run as the profile's `server.user`; else as hintbox's own
 * user; else (hintbox runs as root) as the owner of the read-write mount sources, so that the
 * files a server writes belong to whoever owns the workspace; else as 10001. A root-owned
 * workspace would then fail every write of the server with EACCES, far from the cause: hintbox
 * refuses it before anything starts, saying what to do.
 */

export interface UserIds {
  uid: number;
  gid: number;
}

/**
 * The user a sandbox of this profile runs as when `server.user` names none (looked up now: the
 * session keeps it). hintbox's own user unless that is root; as root, the one owner of the
 * profile's read-write mount sources when they have one and it is not root; else undefined
 * (the fallback, 10001:10001).
 */
export function defaultSandboxUser(
  profile: Pick<Profile, 'mounts'>,
  hintboxUser: UserIds | undefined = hintboxUserIds(),
): UserIds | undefined {
  if (hintboxUser && hintboxUser.uid !== 0) return hintboxUser;
  const owners = new Map<string, UserIds>();
  for (const mount of profile.mounts) {
    if (mount.mode !== 'rw') continue;
    const stat = statSync(mount.source, { throwIfNoEntry: false });
    if (stat) owners.set(`${stat.uid}:${stat.gid}`, { uid: stat.uid, gid: stat.gid });
  }
  const [owner, ...others] = [...owners.values()];
  return owner && others.length === 0 && owner.uid !== 0 && owner.gid !== 0 ? owner : undefined;
}

/** uid/gid of this hintbox process, where the platform has them. */
export function hintboxUserIds(): UserIds | undefined {
  return process.getuid && process.getgid ? { uid: process.getuid(), gid: process.getgid() } : undefined;
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
          `(sandboxes never run as root): chown -R ${who} ${mount.source} or to its non-root user (sandboxes run as the workspace's owner), ` +
          `set server.user to a non-root owner that may write it, or make the mount mode: ro`,
      },
    ];
  });
}

/** Throws a ProfileError (exit 2) naming each read-write mount the sandbox user cannot write. */
export function assertWritableMounts(profile: Pick<Profile, 'file' | 'mounts'>, user: UserIds): void {
  const problems = unwritableMounts(profile, user);
  if (problems.length > 0) throw new ProfileError(problems);
}
