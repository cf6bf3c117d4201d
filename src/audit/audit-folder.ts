import { chmodSync, mkdirSync, statSync } from 'node:fs';
import os from 'node:os';

/**
 * Creates `dir` (and its parents) owner-only, or checks an existing one: it must be a folder of
 * this user's; group and others lose any access they had.
 */
export function ensureOwnerOnlyFolder(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = statSync(dir);
  if (!stat.isDirectory()) throw new Error(`${dir} is not a folder`);
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid)
    throw new Error(`${dir} belongs to uid ${stat.uid}, not to this user (${uid})`);
  if ((stat.mode & 0o077) !== 0) chmodSync(dir, 0o700);
}

export function currentUser(): string {
  try {
    const info = os.userInfo();
    return `${info.username} (uid ${info.uid})`;
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`;
  }
}
