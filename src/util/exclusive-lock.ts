import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import os from 'node:os';
import { isProcessAlive } from './process-alive.js';
import { HintboxError } from './hintbox-error.js';
import { monotonicMs } from './clock.js';
import { isoTime } from './iso-time.js';

/**
 * An exclusive lock between processes on one file: `<file>.lock`, created with O_EXCL and
 * holding who took it (pid, host, a random nonce), removed when the holder is done. Meant for
 * short read-modify-write sections (milliseconds), such as `hintbox approve` writing the lock
 * file of approvals.
 *
 * A lock whose holder is gone is stale and broken: on this host, when its pid no longer runs;
 * of another host, when it is older than `staleMs`; one without a holder written into it (its
 * maker died between creating and writing it), when it is older than 10 s. Breaking is itself serialised by `<file>.lock.break` (O_EXCL): the breaker reads
 * the lock again under it and removes it only if it is still the one judged stale, so that two
 * processes breaking at once cannot remove a lock taken in between.
 */
export interface ExclusiveLockOptions {
  /** How long to wait for a live holder before failing, in ms. Default 30 000. */
  timeoutMs?: number;
  /** Age past which a lock of another host's process counts as stale, in ms. Default 20 000. */
  staleMs?: number;
}

/** Who holds a lock, as written into it. */
interface Holder {
  pid: number;
  host: string;
  nonce: string;
  since: string;
}

/** The lock is held by a live process past the timeout, or cannot be made. */
export class ExclusiveLockError extends HintboxError {
  constructor(message: string) {
    super(message);
    this.name = 'ExclusiveLockError';
  }
}

/**
 * A lock without a holder, or a break section's file, older than this was left by a process
 * that died in a section of microseconds.
 */
const ORPHAN_MS = 10_000;

/** Runs `section` holding `<file>.lock`; waits (polling) while another live process holds it. */
export async function withExclusiveLock<T>(
  file: string,
  section: () => T,
  options: ExclusiveLockOptions = {},
): Promise<T> {
  const lockPath = `${file}.lock`;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const staleMs = options.staleMs ?? 20_000;
  const me: Holder = { pid: process.pid, host: os.hostname(), nonce: randomBytes(8).toString('hex'), since: '' };
  const deadline = monotonicMs() + timeoutMs;
  let pause = 10;
  for (;;) {
    me.since = isoTime(Date.now());
    if (tryCreate(lockPath, JSON.stringify(me))) break;
    const seen = readLock(lockPath);
    if (!seen || (isStale(seen, staleMs) && breakStale(lockPath, seen.text))) continue;
    if (monotonicMs() >= deadline) {
      const who = seen?.holder
        ? `pid ${seen.holder.pid} on ${seen.holder.host} since ${seen.holder.since}`
        : 'a process';
      throw new ExclusiveLockError(
        `${lockPath}: held by ${who} for more than ${Math.round(timeoutMs / 1000)} s (remove it if no such process runs)`,
      );
    }
    // Jittered, so that waiting processes do not retry in step.
    await new Promise((resolve) => setTimeout(resolve, pause * (0.5 + Math.random())));
    pause = Math.min(pause * 2, 200);
  }
  try {
    return section();
  } finally {
    // Only our own lock: one broken as stale (a holder frozen past `staleMs`) may be another's by now.
    if (readLock(lockPath)?.holder?.nonce === me.nonce) unlinkSync(lockPath);
  }
}

function tryCreate(file: string, content: string): boolean {
  let fd: number;
  try {
    fd = openSync(file, 'wx', 0o644);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw new ExclusiveLockError(`${file}: cannot create it: ${(error as Error).message}`);
  }
  try {
    writeSync(fd, content);
  } finally {
    closeSync(fd);
  }
  return true;
}

/** The lock as it is now: its text, its holder (undefined while being written, or unreadable) and its age. */
function readLock(file: string): { text: string; holder: Holder | undefined; ageMs: number } | undefined {
  let text: string;
  let ageMs: number;
  try {
    ageMs = Date.now() - statSync(file).mtimeMs;
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  let holder: Holder | undefined;
  try {
    const value = JSON.parse(text) as Partial<Holder>;
    if (typeof value.pid === 'number' && typeof value.host === 'string' && typeof value.nonce === 'string') {
      holder = { pid: value.pid, host: value.host, nonce: value.nonce, since: String(value.since) };
    }
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
  }
  return { text, holder, ageMs };
}

function isStale(lock: { holder: Holder | undefined; ageMs: number }, staleMs: number): boolean {
  if (!lock.holder) return lock.ageMs > ORPHAN_MS;
  if (lock.holder.host === os.hostname()) return !isProcessAlive(lock.holder.pid);
  return lock.ageMs > staleMs;
}

/**
 * Removes the lock if it still has the text judged stale, under `<lock>.break` (one breaker at
 * a time). False when another process is breaking it: wait, then look again.
 */
function breakStale(lockPath: string, staleText: string): boolean {
  const breakPath = `${lockPath}.break`;
  if (!tryCreate(breakPath, String(process.pid))) {
    try {
      if (Date.now() - statSync(breakPath).mtimeMs > ORPHAN_MS) unlinkSync(breakPath);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    return false;
  }
  try {
    if (readLock(lockPath)?.text === staleText) unlinkSync(lockPath);
  } finally {
    unlinkSync(breakPath);
  }
  return true;
}
