import { CLOCK_TICKS_PER_SECOND, processTicks } from './proc-stat.js';

/** The CPU figure runs this many times `--calls`: /proc counts CPU time in 10 ms ticks. */
export const CPU_CALLS_FACTOR = 5;

/** `total` calls with `inFlight` at a time; calls per second. */
export async function callsPerSecond(call: () => Promise<unknown>, inFlight: number, total: number): Promise<number> {
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next++ < total) await call();
    }),
  );
  return (total / (performance.now() - start)) * 1000;
}

/**
 * `total` calls with `inFlight` at a time, and the CPU time every process of the machine spent
 * meanwhile, per call, by component: the client (this process), the launched process (hintbox,
 * the docker CLI, the bare server), the containers' processes, the Docker
 * engine (dockerd, containerd, its shims) and the rest. The machine is otherwise idle, so
 * "the rest" is small; it is reported, not hidden. Processes that ended during the window
 * are not counted (none of the variants starts any per call).
 */
export async function cpuPerCall(
  call: () => Promise<unknown>,
  inFlight: number,
  total: number,
  launchedPid: number,
): Promise<Record<string, number>> {
  const before = processTicks();
  await callsPerSecond(call, inFlight, total);
  const after = processTicks();
  const tickUs = 1e6 / CLOCK_TICKS_PER_SECOND;
  const out: Record<string, number> = {};
  for (const [pid, now] of after) {
    // A process started meanwhile spent all its time in the window; one that ended meanwhile
    // is not counted (its time went to its parent's children, not kept per child).
    const spent = now.ticks - (before.get(pid)?.ticks ?? 0);
    if (spent <= 0) continue;
    const component =
      pid === process.pid
        ? 'client'
        : pid === launchedPid
          ? 'launched'
          : now.inContainer
            ? 'containers'
            : /^(dockerd|containerd|containerd-shim|docker-proxy|runc)/.test(now.comm)
              ? 'docker engine'
              : 'other';
    out[component] = (out[component] ?? 0) + (spent * tickUs) / total;
  }
  out.total = Object.values(out).reduce((a, b) => a + b, 0);
  return out;
}
