import { readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PG_SOCKET_FILE } from './socket-relay.js';

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

/**
 * Removes relay directories (`hintbox-pg-*` under `baseDir`) whose socket nobody listens on:
 * what a run killed with SIGKILL left. A live relay's socket is listening, so it is kept.
 * Returns the removed directories. Linux only (reads /proc/net/unix); elsewhere it does nothing.
 */
export function sweepRelayDirs(baseDir = os.tmpdir(), procNetUnix = '/proc/net/unix'): string[] {
  let listening: Set<string>;
  try {
    listening = listeningSocketPaths(readFileSync(procNetUnix, 'utf8'));
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of readdirSync(baseDir)) {
    if (!name.startsWith('hintbox-pg-')) continue;
    const dir = path.join(baseDir, name);
    if (listening.has(path.join(dir, PG_SOCKET_FILE))) continue;
    rmSync(dir, { recursive: true, force: true });
    removed.push(dir);
  }
  return removed;
}
