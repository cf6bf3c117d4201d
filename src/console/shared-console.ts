import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { writeFileAtomic } from '../util/atomic-write.js';
import { SharedApprovals } from './shared-approvals.js';

/**
 * Where a console that outlives the runs (`hintbox console`) says it is: `console.json` in
 * `<state>/console/` (hintbox's own folder, owner-only), with its address, its pid and its secret
 * (a run makes the links of its confirmations with it). A run started with `--console` uses that
 * console while its process lives, instead of a console of its own that would end with the run.
 */

export interface SharedConsole {
  origin: string;
  pid: number;
  secret: Buffer;
}

/** The folder of the shared console's files. */
export function sharedConsoleDir(stateDir: string): string {
  return path.join(stateDir, 'console');
}

/** The console `hintbox console` runs now, or undefined (none, or its process is gone). */
export function readSharedConsole(stateDir: string): SharedConsole | undefined {
  let text: string;
  try {
    text = readFileSync(path.join(sharedConsoleDir(stateDir), 'console.json'), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  let read: { origin?: unknown; pid?: unknown; secret?: unknown };
  try {
    read = JSON.parse(text) as typeof read;
  } catch (error) {
    if (error instanceof SyntaxError) return undefined; // torn by a crash: as if none ran
    throw error;
  }
  const { origin, pid, secret } = read ?? {};
  if (typeof origin !== 'string' || typeof pid !== 'number' || typeof secret !== 'string') return undefined;
  return processLives(pid) ? { origin, pid, secret: Buffer.from(secret, 'base64url') } : undefined;
}

/** Says where this console is, for the runs; returns how to take it back (at its end). */
export function announceSharedConsole(stateDir: string, console: SharedConsole): () => void {
  const file = path.join(sharedConsoleDir(stateDir), 'console.json');
  const { origin, pid } = console;
  writeFileAtomic(file, JSON.stringify({ origin, pid, secret: console.secret.toString('base64url') }), 0o600);
  return () => rmSync(file, { force: true });
}

/** The confirmations of the shared console, as a run or the console itself keeps them. */
export function sharedApprovalsOf(stateDir: string, origin: string, secret: Buffer): SharedApprovals {
  return new SharedApprovals({ dir: sharedConsoleDir(stateDir), origin, secret });
}

function processLives(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
