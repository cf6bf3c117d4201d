/**
 * What the benchmark reads of a process from /proc: its state, its CPU time, its resident
 * memory. Linux only, as the benchmark is.
 */
import { readdirSync, readFileSync } from 'node:fs';

/**
 * `/proc/<pid>/stat` read: the command name and the fields after it (`fields[0]` is field 3,
 * the state). Throws when the process is gone.
 */
export function procStat(pid: number | string): { comm: string; fields: string[] } {
  const match = /^\d+ \((.*)\) (.*)$/s.exec(readFileSync(`/proc/${pid}/stat`, 'utf8').trim());
  return { comm: match?.[1] ?? '', fields: (match?.[2] ?? '').split(' ') };
}

/** CPU time (user + system, in clock ticks) of every process now, with what it is. */
export function processTicks(): Map<number, { comm: string; ticks: number; inContainer: boolean }> {
  const out = new Map<number, { comm: string; ticks: number; inContainer: boolean }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const { comm, fields } = procStat(entry);
      // Fields 14 and 15 of stat (utime, stime).
      const ticks = Number(fields[11]) + Number(fields[12]);
      const cgroup = readFileSync(`/proc/${entry}/cgroup`, 'utf8');
      out.set(Number(entry), {
        comm,
        ticks,
        inContainer: /\/docker[/-]/.test(cgroup),
      });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** USER_HZ: the unit of /proc's CPU times (100 on Linux everywhere that matters). */
export const CLOCK_TICKS_PER_SECOND = 100;

/** The resident memory (VmRSS) of a process in MB; 0 when it is gone. */
export function rssMb(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
}

/** Until the process is gone (or only a zombie, which its parent reaps in its own time). */
export async function waitForExit(pid: number): Promise<void> {
  for (let i = 0; i < 300; i++) {
    let state: string;
    try {
      state = procStat(pid).fields[0] || 'Z';
    } catch {
      return;
    }
    if (state === 'Z' || state === 'X') return;
    await new Promise((r) => setTimeout(r, 50));
  }
}
