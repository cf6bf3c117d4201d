/**
 * One held sandbox's freeze and thaw through the engine port, timed: the freezer HINTBOX_FREEZER
 * picks (`auto`: the cgroup freezer where hintbox can write it; `gate`), on a real sandbox of the
 * Docker engine (DOCKER_HOST) running the liar fixture. Each cycle: freeze() to its promise, thaw()
 * to its promise, then 2 ms of the server running (a call). Prints the freezer used (from the
 * debug log) and p50/p99 of each step. Run it under `strace -c -f` to count system calls per
 * cycle (against `--cycles 0`).
 *
 *   HINTBOX_FREEZER=gate node --import tsx bench/freezer-cycles.ts [--cycles N]
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DockerEngine } from '../src/engine/docker/docker-engine.js';
import { loadProfile } from '../src/profile/load-profile.js';
import { createLogger } from '../src/util/logger.js';
import { newSessionId, sessionIdentity } from '../src/util/session-identity.js';
import { writeProfile } from '../test/integration/support/hintbox-process.js';
import { LIAR_IMAGE } from '../test/integration/support/docker.js';
import { percentile } from './stats.js';
import { toolArgs } from './tool-args.js';

const { values } = toolArgs(
  'freezer-cycles',
  "One held sandbox's freeze and thaw through the engine port, timed (the freezer HINTBOX_FREEZER picks).",
  { options: { cycles: { type: 'string', default: '500' } } },
);
const cycles = Number(values.cycles);
const lines: string[] = [];
const log = createLogger('debug', (line) => void lines.push(line));
const engine = await DockerEngine.connect({ log: createLogger('warn') });
const profile = loadProfile(writeProfile({ name: `freezer-cycles-${process.pid}`, server: { image: LIAR_IMAGE } }));
const image = await engine.prepareImage(profile);
const identity = sessionIdentity(newSessionId());
const { name, server, env, limits } = profile;
try {
  const held = await engine.hold(
    {
      session: identity,
      profile: { name, server, env, limits },
      sandboxId: 'rw-offline',
      grant: { network: 'none', mounts: [] },
      command: image.command,
      imageId: image.id,
    },
    { log, startTimeoutMs: 60_000 },
  );
  const sandbox = await held.release();
  const freeze: number[] = [];
  const thaw: number[] = [];
  for (let i = 0; i < cycles; i++) {
    let t = performance.now();
    await sandbox.freeze();
    freeze.push(performance.now() - t);
    t = performance.now();
    await sandbox.thaw();
    thaw.push(performance.now() - t);
    await sleep(2);
  }
  const chosen = lines.find((l) => l.includes('frozen between calls by')) ?? '(not logged)';
  const ms = (xs: number[], p: number) => (xs.length ? percentile(xs, p).toFixed(3) : '-');
  console.log(chosen.trim());
  console.log(
    `${cycles} cycles: freeze p50 ${ms(freeze, 50)} ms p99 ${ms(freeze, 99)} ms; thaw p50 ${ms(thaw, 50)} ms p99 ${ms(thaw, 99)} ms`,
  );
  await sandbox.remove();
} finally {
  await engine.removeSession(identity.sessionId);
  await engine.close();
}
