import { lstatSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { isProcessAlive } from './process-alive.js';
import { socketBaseDirs } from './unix-socket.js';

/** Paths of the Unix sockets listening on this host, from a `/proc/net/unix` text. Pure. */
export function listeningSocketPaths(procNetUnix: string): Set<string> {
  const paths = new Set<string>();
  for (const line of procNetUnix.split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    // Num RefCount Protocol Flags Type St Inode Path; flag 00010000 = __SO_ACCEPTCON (listening)
    if (fields.length >= 8 && fields[3] === '00010000' && fields[7]) paths.add(fields[7]);
  }
  return paths;
}

/** Folders of hintbox's Unix sockets: database relays, sandbox gates and egress proxies. */
const SOCKET_DIR_PREFIXES = ['hintbox-pg-', 'hintbox-io-', 'hintbox-eg-'];
/** Younger folders are left alone: their run may be between making the folder and listening. */
const MIN_AGE_MS = 60_000;
/** `hintbox-io-<pid>-…`, `hintbox-pg-<pid>-…`, `hintbox-eg-<pid>-…`: the process that made it (older folders have none). */
const OWNER_PID = /^hintbox-(?:pg|io|eg)-(\d+)-/;

/**
 * Removes socket folders (`hintbox-pg-*`, `hintbox-io-*`, `hintbox-eg-*` under `baseDir`, by default under each of socketBaseDirs()) in which nobody
 * listens and whose process is gone (the pid in the name) or, for a name without one, that are
 * older than a minute: what a run killed with SIGKILL left. A live relay's or a starting
 * sandbox's socket is listening, or its process alive, so its folder is kept (a process alive
 * keeps its folders at any age: an egress proxy listens in its container, unseen from here). Returns the
 * removed folders. Linux only (reads /proc/net/unix); elsewhere it does nothing.
 */
export function sweepSocketDirs(
  baseDir?: string,
  procNetUnix = '/proc/net/unix',
  now = Date.now(),
  isAlive: (pid: number) => boolean = isProcessAlive,
): string[] {
  // By default both places a run may have made them: $TMPDIR, and the short folder when $TMPDIR is too long.
  if (baseDir === undefined) return socketBaseDirs().flatMap((dir) => sweepSocketDirs(dir, procNetUnix, now, isAlive));
  let listening: string[];
  try {
    listening = [...listeningSocketPaths(readFileSync(procNetUnix, 'utf8'))];
  } catch {
    return [];
  }
  let names: string[];
  try {
    names = readdirSync(baseDir);
  } catch {
    return []; // no such folder (yet): nothing was left in it
  }
  const removed: string[] = [];
  const me = process.getuid?.();
  for (const name of names) {
    if (!SOCKET_DIR_PREFIXES.some((prefix) => name.startsWith(prefix))) continue;
    const dir = path.join(baseDir, name);
    if (listening.some((socket) => socket.startsWith(`${dir}/`))) continue;
    try {
      // Only real folders of this user (not a symlink or another user's plant), old enough.
      const stat = lstatSync(dir);
      if (!stat.isDirectory() || (me !== undefined && me !== 0 && stat.uid !== me)) continue;
      const owner = Number(OWNER_PID.exec(name)?.[1] ?? NaN);
      const named = Number.isInteger(owner);
      // A live owner's folder is kept at any age: its socket may be listened on in a container's
      // namespace (the egress proxy's), which this host's /proc/net/unix does not show.
      if (named && (owner === process.pid || isAlive(owner))) continue;
      if (!named && now - stat.mtimeMs < MIN_AGE_MS) continue;
      rmSync(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      continue; // gone meanwhile, or not ours to remove: never a reason to stop a start
    }
  }
  return removed;
}
