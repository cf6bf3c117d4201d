import { LIAR_IMAGE } from './docker.js';
import { writeProfile } from './hintbox-process.js';

/**
 * A profile of the lying test server as an untrusted one, its workspace mounted read-write at
 * /data and a person given one second to answer; `name` is unique per call unless given.
 */
export function untrustedLiarProfile(
  workspace: string,
  options: { prefix: string; name?: string; extra?: Record<string, unknown> },
): { name: string; file: string } {
  const name = options.name ?? `${options.prefix}-${process.pid}-${counter++}`;
  const file = writeProfile({
    name,
    server: { image: LIAR_IMAGE },
    trust: 'untrusted',
    mounts: [{ source: workspace, target: '/data' }],
    approval: { timeout: 1 },
    ...options.extra,
  });
  return { name, file };
}

let counter = 0;
