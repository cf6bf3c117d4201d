import { chmod, chown, mkdtemp } from 'node:fs/promises';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** Unix socket paths are limited (108 bytes on Linux, 104 on macOS, both with the NUL). */
export const MAX_SOCKET_PATH_BYTES = 103;

/**
 * Where socket folders go when $TMPDIR is too long for them: short on every Unix, and a folder
 * made there by mkdtemp is the caller's alone (mode 0700, a random name nobody could plant).
 */
export const SHORT_SOCKET_BASE = '/tmp';

/** The longest name of a socket file hintbox makes (libpq's `.s.PGSQL.5432`). */
const LONGEST_SOCKET_FILE = 13;
/** The longest prefix of a socket folder (`hintbox-io-`, `hintbox-pg-`). */
const LONGEST_PREFIX = 11;
/** `/<prefix><pid>-XXXXXX/<file>` at its longest: a pid has at most 7 digits on Linux (pid_max 4194304). */
const LONGEST_TAIL = 1 + LONGEST_PREFIX + 7 + 1 + 6 + 1 + LONGEST_SOCKET_FILE;

/**
 * The folder that holds hintbox's socket folders for a temporary folder `tmpDir`: `tmpDir` when
 * the longest socket path hintbox makes under it fits a Unix socket, else {@link SHORT_SOCKET_BASE}.
 * Decided by the length alone, so the sweep, the own-path check and serve's bind check find the
 * same folder as the sockets. Pure.
 */
export function socketBaseDir(tmpDir: string = os.tmpdir()): string {
  const base = path.resolve(tmpDir);
  return Buffer.byteLength(base) + LONGEST_TAIL <= MAX_SOCKET_PATH_BYTES ? base : SHORT_SOCKET_BASE;
}

/** The folders that may hold hintbox's socket folders: the temporary folder, and the short one if that is used. */
export function socketBaseDirs(tmpDir: string = os.tmpdir()): string[] {
  return [...new Set([path.resolve(tmpDir), socketBaseDir(tmpDir)])];
}

/**
 * Makes a fresh socket folder `<base>/<prefix><pid>-XXXXXX` (named with this process's id: the
 * sweep of the next start removes it at once if this run is killed) and returns it with the path
 * of `file` in it. `baseDir` defaults to the temporary folder, or the short one when that is too
 * long (see {@link socketBaseDir}). A path that still does not fit is refused, naming the limit.
 */
export async function makeSocketFolder(
  prefix: string,
  file: string,
  baseDir: string = socketBaseDir(),
): Promise<{ dir: string; socketPath: string }> {
  if (Buffer.byteLength(file) > LONGEST_SOCKET_FILE || prefix.length > LONGEST_PREFIX) {
    throw new Error(
      `a socket folder's prefix or file name is longer than socketBaseDir allows for: ${prefix}, ${file}`,
    );
  }
  const dir = await mkdtemp(path.join(baseDir, `${prefix}${process.pid}-`));
  const socketPath = path.join(dir, file);
  return { dir, socketPath };
}

/** How a socket was opened to the one user that may connect to it (see `listenFor`). */
export type SocketAccess = 'owner' | 'chown' | 'world';

/**
 * Listens on `socketPath` (in the fresh folder `dir`) and lets `user` connect: when this process
 * runs as that user (or no user is given) the socket is private; as root, the folder and socket
 * are given to the user; otherwise others may traverse (not list) the folder and connect, and
 * the caller must check who connected (a password, a token). `tooLong` says what to do when
 * the path does not fit a Unix socket.
 */
export async function listenFor(
  server: net.Server,
  dir: string,
  socketPath: string,
  user: { uid: number; gid: number } | undefined,
  tooLong: string,
): Promise<SocketAccess> {
  const bytes = Buffer.byteLength(socketPath);
  if (bytes > MAX_SOCKET_PATH_BYTES) {
    throw new Error(
      `socket path ${socketPath} is ${bytes} bytes, more than the ${MAX_SOCKET_PATH_BYTES} a Unix socket takes (sun_path: 108 bytes on Linux, 104 on macOS, with the NUL); ${tooLong}`,
    );
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const me = process.getuid?.();
  if (!user || user.uid === me) {
    await chmod(socketPath, 0o600);
    return 'owner';
  }
  if (me === 0) {
    await chown(dir, user.uid, user.gid);
    await chown(socketPath, user.uid, user.gid);
    await chmod(socketPath, 0o600);
    return 'chown';
  }
  await chmod(dir, 0o711);
  await chmod(socketPath, 0o666);
  return 'world';
}
