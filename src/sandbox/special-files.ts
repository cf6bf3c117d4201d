import type { Dirent } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { type Profile } from '../profile/load-profile.js';
import { ProfileError, type ProfileProblem } from '../profile/profile-problems.js';

/**
 * Sockets, FIFOs and device nodes inside a mount source. Neither a read-only bind mount nor
 * `NetworkMode: none` stops `connect()` on a Unix socket, or a write to a FIFO, that lies in the
 * mount: a host service listening there then acts for the server, outside its sandbox (a
 * read-only, network-less tool can have it write host files). hintbox refuses such sources
 * unless the profile allows them for that mount (`allowSpecialFiles: true`).
 */

export interface SpecialFileLimits {
  /** Most entries walked per mount; beyond, the source is refused (it cannot be checked). */
  maxEntries: number;
  /** Deepest folder walked; beyond, the source is refused. */
  maxDepth: number;
}

export const DEFAULT_SPECIAL_FILE_LIMITS: SpecialFileLimits = { maxEntries: 100_000, maxDepth: 64 };

/** What a walk found: the first special file, or why the source could not be checked. */
export type SpecialFileFinding = { path: string; what: string } | { unchecked: string };

function kindOf(
  entry: Pick<Dirent, 'isSocket' | 'isFIFO' | 'isCharacterDevice' | 'isBlockDevice'>,
): string | undefined {
  if (entry.isSocket()) return 'a Unix socket';
  if (entry.isFIFO()) return 'a FIFO';
  if (entry.isCharacterDevice() || entry.isBlockDevice()) return 'a device node';
  return undefined;
}

/**
 * Walks `root` (never following symlinks: a link is resolved inside the sandbox, where only
 * mounts are) and returns the first special file, or why the walk had to stop, or undefined.
 */
export async function findSpecialFile(
  root: string,
  limits: SpecialFileLimits = DEFAULT_SPECIAL_FILE_LIMITS,
): Promise<SpecialFileFinding | undefined> {
  const top = await fs.lstat(root);
  const rootKind = kindOf(top);
  if (rootKind) return { path: root, what: rootKind };
  if (!top.isDirectory()) return undefined;
  let entries = 0;
  const stack: { dir: string; depth: number }[] = [{ dir: root, depth: 0 }];
  while (stack.length) {
    const { dir, depth } = stack.pop() as { dir: string; depth: number };
    let listing: Dirent[];
    try {
      listing = await fs.readdir(dir, { withFileTypes: true });
    } catch (error) {
      return { unchecked: `cannot read ${dir} to look for sockets (${(error as NodeJS.ErrnoException).code})` };
    }
    for (const entry of listing) {
      if (++entries > limits.maxEntries) {
        return { unchecked: `it holds more than ${limits.maxEntries} entries to look for sockets in` };
      }
      const full = path.join(dir, entry.name);
      const what = kindOf(entry);
      if (what) return { path: full, what };
      if (entry.isDirectory()) {
        if (depth + 1 > limits.maxDepth) {
          return { unchecked: `it has folders deeper than ${limits.maxDepth} levels to look for sockets in` };
        }
        stack.push({ dir: full, depth: depth + 1 });
      }
    }
  }
  return undefined;
}

/**
 * Refuses (ProfileError, one line per mount) mount sources that hold a socket, FIFO or device
 * node, or that cannot be checked within the limits, unless the mount has `allowSpecialFiles`.
 */
export async function assertNoSpecialFiles(
  profile: Pick<Profile, 'file' | 'mounts'>,
  limits: SpecialFileLimits = DEFAULT_SPECIAL_FILE_LIMITS,
): Promise<void> {
  const problems: ProfileProblem[] = [];
  for (const [index, mount] of profile.mounts.entries()) {
    if (mount.allowSpecialFiles) continue;
    const finding = await findSpecialFile(mount.source, limits);
    if (!finding) continue;
    const optOut = `set mounts[${index}].allowSpecialFiles: true if the server may use it`;
    problems.push({
      file: profile.file,
      path: `mounts[${index}].source`,
      message:
        'unchecked' in finding
          ? `${mount.source}: ${finding.unchecked}; mount a smaller folder, or ${optOut}`
          : `${finding.path} is ${finding.what}, which a sandbox can use even through a read-only mount without network (a host service would act for it); remove it, mount another folder, or ${optOut}`,
    });
  }
  if (problems.length) throw new ProfileError(problems);
}
