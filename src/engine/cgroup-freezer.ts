import { accessSync, constants, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * A sandbox frozen by the kernel's cgroup freezer, written by hintbox itself. A task of a frozen
 * cgroup does not run at all: no signal wakes it (a POSIX timer's SIGCONT included: the task
 * stays frozen with the signal pending), and a child it forks is frozen with it. So nothing of
 * the sandbox runs between calls, where the gate's stop (gate-control.ts) can only catch a task
 * that ran and kill the sandbox after the fact. A freeze is one write and reading the state back,
 * with no round trip through the engine (Docker's pause goes through dockerd and containerd).
 *
 * Chosen per sandbox when it starts, from the host: the container's first process (the gate) as
 * the engine reports it, its cgroup read from `/proc/<pid>/cgroup`, that cgroup checked to name
 * the container's id (a pid reused by another process, or a pid of another PID namespace when
 * hintbox runs in a container, names something else), and its freezer file checked writable by
 * hintbox. Where any of that fails, the gate freezes as before (see {@link openCgroupFreezer}).
 *
 * cgroup v1: `<freezer mount>/<path>/freezer.state`, FROZEN / THAWED (FREEZING until every task
 * is frozen). cgroup v2: `<cgroup2 mount>/<path>/cgroup.freeze` (1 / 0), frozen once
 * `cgroup.events` says `frozen 1`.
 */

/** How long a freeze may take before it counts as failed: the gate's own bound (FREEZE_LIMIT_MS in native/hintbox-gate.c). */
export const CGROUP_FREEZE_LIMIT_MS = 2000;

/** Where a sandbox's freezer is on the host, and which version of cgroups it is. */
export interface FreezerCgroup {
  version: 1 | 2;
  /** The container's cgroup folder (absolute, on the host). */
  dir: string;
  /** Where the hierarchy is mounted (absolute, on the host). */
  mount?: string;
}

/**
 * The container's freezer cgroup, from its first process's `/proc/<pid>/cgroup` and hintbox's
 * own `/proc/self/mountinfo`; or why there is none. Pure. A v1 `freezer` line wins over the v2
 * line (a hybrid host freezes through v1). The cgroup is cut at the segment that names the
 * container's id (engines may nest one more level below it: Podman's `container`), so all of the
 * container is frozen; a path with no segment naming the id is refused.
 */
export function findFreezerCgroup(
  procCgroup: string,
  mountinfo: string,
  containerId: string,
): FreezerCgroup | { problem: string } {
  if (!/^[0-9a-f]{64}$/.test(containerId)) return { problem: `not a full container id: ${containerId}` };
  const lines = procCgroup.split('\n').filter(Boolean);
  const v1 = lines.find((l) => l.split(':')[1]?.split(',').includes('freezer'));
  const v2 = lines.find((l) => l.startsWith('0::'));
  const version = v1 ? 1 : v2 ? 2 : undefined;
  const line = v1 ?? v2;
  if (!version || !line) return { problem: 'its process is in no freezer cgroup' };
  const cgroup = line.slice(line.indexOf(':', line.indexOf(':') + 1) + 1);
  const segments = cgroup.split('/');
  const at = segments.findIndex((s) => s.includes(containerId));
  if (at < 0) return { problem: `its cgroup ${cgroup} does not name the container (another process has its pid)` };
  const own = segments.slice(0, at + 1).join('/');
  const mount = mountPoint(mountinfo, version);
  if (!mount) return { problem: `no cgroup ${version === 1 ? 'v1 freezer' : 'v2'} hierarchy is mounted here` };
  const { root, point } = mount;
  // A mount of a part of the hierarchy (a cgroup namespace): the path must lie below its root.
  const relative = root === '/' ? own : own.startsWith(`${root}/`) ? own.slice(root.length) : undefined;
  if (relative === undefined) return { problem: `its cgroup ${own} is outside the mounted hierarchy ${root}` };
  return { version, dir: path.join(point, relative), mount: point };
}

/** Where the v1 freezer hierarchy (or the v2 one) is mounted here, and which part of it. Pure. */
function mountPoint(mountinfo: string, version: 1 | 2): { root: string; point: string } | undefined {
  const fields = mountinfo
    .split('\n')
    .map((l) => l.split(' '))
    .find((f) => {
      const dash = f.indexOf('-');
      const fsType = f[dash + 1];
      return version === 1
        ? fsType === 'cgroup' && (f[dash + 3] ?? '').split(',').includes('freezer')
        : fsType === 'cgroup2';
    });
  const [root, point] = [fields?.[3], fields?.[4]];
  return root && point ? { root, point: unescapeMount(point) } : undefined;
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
function unescapeMount(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** The file a freeze writes, and what is read back to know it holds. */
function files(cgroup: FreezerCgroup): { control: string; state: string } {
  return cgroup.version === 1
    ? { control: path.join(cgroup.dir, 'freezer.state'), state: path.join(cgroup.dir, 'freezer.state') }
    : { control: path.join(cgroup.dir, 'cgroup.freeze'), state: path.join(cgroup.dir, 'cgroup.events') };
}

export class CgroupFreezeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CgroupFreezeError';
  }
}

/**
 * An empty cgroup v1 freezer group, beside the engine's, that hintbox keeps frozen: the kernel
 * switches its freezer's static key on when the first cgroup freezes and off when the last thaws,
 * and that switch patches the kernel's text on every CPU (milliseconds under load). With one
 * group always frozen the key stays on, and a sandbox's freeze or thaw is a plain write (measured:
 * THAWED p50 7.4 -> 0.01 ms). Empty, it holds no task. One per hintbox process (the name ends
 * with its pid), made at its first cgroup freeze, removed when it exits; those of a hintbox
 * that was killed are removed by the next sweep ({@link sweepKeepFrozenGroups}).
 */
export const KEEP_FROZEN_PREFIX = 'hintbox-keep-frozen-';

let keptBy: string | undefined;

/** Keeps this process's keep-frozen group frozen at the root of the v1 freezer mount; a failure only costs speed. */
function keepFreezerOn(cgroup: FreezerCgroup, mountPoint: string): void {
  if (cgroup.version !== 1 || keptBy) return;
  const keep = path.join(mountPoint, `${KEEP_FROZEN_PREFIX}${process.pid}`);
  try {
    mkdirSync(keep, { recursive: true });
    keptBy = keep;
    process.once('exit', () => removeGroup(keep));
    writeFileSync(path.join(keep, 'freezer.state'), 'FROZEN');
  } catch {
    // Not needed for a freeze to hold: only for it to be fast.
  }
}

/** An empty cgroup goes with rmdir, frozen or not; one already gone is fine. */
function removeGroup(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch {
    return false;
  }
}

/**
 * Removes the keep-frozen groups of hintbox processes that are gone (killed before their exit
 * handler ran); returns the folders removed. Those of live processes are left alone.
 */
export function sweepKeepFrozenGroups(
  isAlive: (pid: number) => boolean,
  mountinfo: string = readFileSync('/proc/self/mountinfo', 'utf8'),
): string[] {
  const mount = mountPoint(mountinfo, 1);
  if (!mount) return [];
  let names: string[];
  try {
    names = readdirSync(mount.point);
  } catch {
    return [];
  }
  return names
    .filter((name) => name.startsWith(KEEP_FROZEN_PREFIX))
    .filter((name) => !isAlive(Number(name.slice(KEEP_FROZEN_PREFIX.length))))
    .map((name) => path.join(mount.point, name))
    .filter(removeGroup);
}

/** A sandbox's cgroup freezer (see the top). */
export class CgroupFreezer {
  private readonly control: string;
  private readonly state: string;

  constructor(
    readonly cgroup: FreezerCgroup,
    private readonly limitMs = CGROUP_FREEZE_LIMIT_MS,
  ) {
    ({ control: this.control, state: this.state } = files(cgroup));
  }

  /**
   * Freezes every task of the cgroup; resolves once the kernel says all are frozen, rejects when
   * that is not so within the limit (the caller removes the sandbox). The writes and reads are
   * synchronous: a cgroup file answers at once (the kernel only marks the tasks), and a thaw
   * written right after a freeze can then never overtake it.
   *
   * `cancel`: a call came in while the tasks were still on their way into the freezer. The
   * freeze is then undone (THAWED written, so no task is left half frozen) and the promise
   * resolves to `'cancelled'`. Between the call that left and the one that came, the tasks ran
   * no longer than they would have until the freeze held.
   */
  async freeze(cancel?: AbortSignal): Promise<void | 'cancelled'> {
    const started = Date.now();
    const deadline = started + this.limitMs;
    this.write(this.cgroup.version === 1 ? 'FROZEN' : '1');
    for (;;) {
      // A task on its way into the freezer (leaving a system call): let it. Looked at again each
      // turn of the event loop for the first 2 ms (a busy server's threads take about that), then
      // every 1 ms. The first look is a turn later, so that the answer of the call that ended
      // (passed on in this turn) does not wait for it.
      if (Date.now() - started < 2) await new Promise<void>((resolve) => setImmediate(resolve));
      else await delay(1, undefined, { signal: cancel }).catch(() => undefined);
      if (cancel?.aborted) {
        this.write(this.cgroup.version === 1 ? 'THAWED' : '0');
        return 'cancelled';
      }
      if (this.frozen()) return;
      if (Date.now() > deadline) {
        throw new CgroupFreezeError(`its cgroup ${this.cgroup.dir} was not frozen within ${this.limitMs} ms`);
      }
      // v1: a FREEZING cgroup is asked again (as runc does), so a task forked meanwhile is caught too.
      if (this.cgroup.version === 1) this.write('FROZEN');
    }
  }

  /** Lets the cgroup run again; done when it returns (the kernel thaws at the write). */
  // eslint-disable-next-line @typescript-eslint/require-await -- a rejection, never a throw, for the caller's chain
  async thaw(): Promise<void> {
    this.write(this.cgroup.version === 1 ? 'THAWED' : '0');
  }

  private frozen(): boolean {
    const text = this.read();
    return this.cgroup.version === 1 ? text.trim() === 'FROZEN' : /^frozen 1$/m.test(text);
  }

  private write(value: string): void {
    try {
      writeFileSync(this.control, value);
    } catch (error) {
      throw new CgroupFreezeError(`cannot write ${this.control}: ${(error as Error).message}`);
    }
  }

  private read(): string {
    try {
      return readFileSync(this.state, 'latin1');
    } catch (error) {
      throw new CgroupFreezeError(`cannot read ${this.state}: ${(error as Error).message}`);
    }
  }
}

/**
 * The cgroup freezer of the container whose first process is `pid` on this host, or why it
 * cannot be used (then the gate freezes). The cgroup is read once: a container does not move.
 */
export function openCgroupFreezer(
  pid: number,
  containerId: string,
  read: (file: string) => string = (file) => readFileSync(file, 'utf8'),
): CgroupFreezer | { problem: string } {
  if (!Number.isInteger(pid) || pid <= 0) return { problem: 'the engine gave no process id for it' };
  let procCgroup: string;
  let mountinfo: string;
  try {
    procCgroup = read(`/proc/${pid}/cgroup`);
    mountinfo = read('/proc/self/mountinfo');
  } catch (error) {
    return { problem: `cannot read its process's cgroup (${(error as Error).message})` };
  }
  const found = findFreezerCgroup(procCgroup, mountinfo, containerId);
  if ('problem' in found) return found;
  const { control } = files(found);
  try {
    // Read-write here, as hintbox's user: a read-only cgroup mount (hintbox in a container) or another owner is refused.
    accessSync(control, constants.R_OK | constants.W_OK);
  } catch (error) {
    return {
      problem: `cannot write ${control} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    };
  }
  if (found.mount) keepFreezerOn(found, found.mount);
  return new CgroupFreezer(found);
}
