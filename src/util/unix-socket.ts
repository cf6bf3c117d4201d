import { chmod, chown } from 'node:fs/promises';
import type net from 'node:net';

/** Unix socket paths are limited (108 bytes on Linux, 104 on macOS, both with the NUL). */
export const MAX_SOCKET_PATH_BYTES = 103;

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
  if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH_BYTES) {
    throw new Error(`socket path ${socketPath} is too long for a Unix socket; ${tooLong}`);
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
