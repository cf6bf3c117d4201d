import { lstatSync, readdirSync, statSync, type Stats } from 'node:fs';
import path from 'node:path';

/**
 * The operator's files must have one name each. The check that keeps them out of writable
 * mounts works on paths (load-profile.ts: realpath, every symlink on the way); a hard link is
 * another path to the same bytes that no path check can see, and a server writing that name in
 * its workspace in place (open with O_TRUNC, append) rewrites the profile or the lock file of
 * approved definitions for the next run.
 *
 * Why refusing a second link (st_nlink > 1) holds, and comparing inodes is not needed:
 * - A server cannot make such a link itself. link(2) works only within one mount (else EXDEV,
 *   even between two binds of the same host file system, even as root in the container), and
 *   no writable mount holds an operator file (the path check refuses it), so there is nothing
 *   of the operator's to link from inside a writable mount.
 * - A link made before the run is seen here, at every load (run, plan, approve, serve's start):
 *   the run is refused before anything starts. One made during the run needs a process on the
 *   host; with fs.protected_hardlinks (on by default) only one that may write the file anyway.
 *   Checking again later would not help: the server may write through it and remove it.
 * - Comparing device and inode against every file of every writable mount would cost a walk
 *   of each workspace at every start and find nothing more.
 * What this cannot see: a link of another profile's files in this profile's workspace (that
 * profile refuses it when it is loaded, if the link is still there then).
 */

/** A file, or a folder whose every file, is the operator's (or hintbox's own). */
export interface OperatorFile {
  path: string;
  /** For messages: "the profile file". */
  what: string;
  /** A folder: every regular file below it is checked (symlinks are not followed). */
  folder?: boolean;
}

/**
 * One line per operator file that has more than one name (hard links), naming it and saying
 * what to do. Files that do not exist (no lock file yet) pass.
 */
export function operatorFileLinkProblems(files: readonly OperatorFile[]): string[] {
  return files.flatMap((file) => {
    // The file itself, where a symlink given for it leads (its links are the file's).
    let stat: Stats | undefined;
    try {
      stat = statSync(file.path, { throwIfNoEntry: false });
    } catch (error) {
      return [
        `${file.what} ${file.path}: cannot check it for hard links (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
      ];
    }
    if (!stat) return [];
    if (!file.folder || !stat.isDirectory()) return stat.isFile() ? linkProblem(file.path, file.what, stat) : [];
    const below = filesBelow(file.path, file.what);
    return [
      ...below.problems,
      ...below.files.flatMap(({ at, stat: s }) => linkProblem(at, `a file of ${file.what}`, s)),
    ];
  });
}

function linkProblem(file: string, what: string, stat: Stats): string[] {
  if (stat.nlink <= 1) return [];
  return [
    `${what} ${file} has ${stat.nlink} names (hard links): another name may lie in a folder a sandbox can write, ` +
      `and writing there would change it; give it one name (cp -p ${file} ${file}.new && mv ${file}.new ${file})`,
  ];
}

/**
 * Every regular file below `folder` with its lstat (symlinks are not followed), and a line for
 * each folder that cannot be read: what cannot be checked is refused, not passed.
 */
function filesBelow(folder: string, what: string): { files: { at: string; stat: Stats }[]; problems: string[] } {
  const files: { at: string; stat: Stats }[] = [];
  const problems: string[] = [];
  const stack = [folder];
  while (stack.length > 0) {
    const dir = stack.pop()!;
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch (error) {
      problems.push(
        `${what}: cannot read ${dir} to check its files for hard links (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
      );
      continue;
    }
    for (const name of names) {
      const at = path.join(dir, name);
      const stat = lstatSync(at, { throwIfNoEntry: false });
      if (stat?.isDirectory()) stack.push(at);
      else if (stat?.isFile()) files.push({ at, stat });
    }
  }
  return { files, problems };
}
