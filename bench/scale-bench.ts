import type Docker from 'dockerode';
import type { Logger } from '../src/util/logger.js';
import { rssMb } from './proc-stat.js';
import { sandboxMemory, type Running } from './spawn-server.js';

export interface ScaleBenchOptions {
  docker: Docker;
  /** Server counts to start at once (`--scale`). */
  scale: number[];
  /** The trusted profile with an approved lock file. */
  profile: string;
  /** Starts `hintbox run` on a profile. */
  startHintbox: (profile: string) => Promise<Running>;
  /** Waits until the run's containers are gone and the engine is idle. */
  settle: () => Promise<void>;
  log: Logger;
}

/** N servers under hintbox at once: until every first call is answered, and their memory. */
export interface ScaleResult {
  servers: number;
  startMs: number;
  hintboxRssMb: number;
  sandboxMb: number;
}

export async function measureScale(options: ScaleBenchOptions): Promise<ScaleResult[]> {
  const { docker, profile, startHintbox, settle, log } = options;
  const out: ScaleResult[] = [];
  for (const n of options.scale) {
    log.info(`scale: ${n} server(s) under hintbox at once`);
    const t0 = performance.now();
    const all = await Promise.all(
      Array.from({ length: n }, () =>
        // Up: its first call answered (with the lock file tools/list is answered before the
        // server is up).
        startHintbox(profile).then(
          async (r) => (await r.client.callTool({ name: 'list_allowed_directories', arguments: {} }), r),
        ),
      ),
    );
    const startMs = performance.now() - t0;
    const sandbox = (await Promise.all(all.map((r) => sandboxMemory(docker, r.pid)))).flat();
    out.push({
      servers: n,
      startMs,
      hintboxRssMb: all.reduce((sum, r) => sum + rssMb(r.pid), 0),
      sandboxMb: sandbox.reduce((a, b) => a + b, 0),
    });
    await Promise.all(all.map((r) => r.close()));
    await settle();
  }
  return out;
}
