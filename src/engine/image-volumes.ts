import path from 'node:path';

/**
 * An image's `VOLUME` paths (its config's `Volumes`, inherited ones included): Docker gives a
 * container an anonymous volume at each one no mount covers — a writable, disk-backed folder of
 * unbounded size in the engine's volume store, in every class, read-only ones included. hintbox
 * never lets that happen: each such path gets a size-bounded tmpfs of its own (the image's
 * content there is not seen), or, where that would make a mount point inside a host folder, the
 * sandbox is refused. Pure.
 */

/** The image config's `Volumes` (`{ "/data": {} }`) as a list of paths. */
export function imageVolumePaths(volumes: Record<string, unknown> | null | undefined): string[] {
  return Object.keys(volumes ?? {});
}

export interface VolumeMaskInput {
  /** The image's `VOLUME` paths. */
  imageVolumes: readonly string[];
  /** Targets of the container's bind mounts (the profile's and hintbox's own). */
  binds: readonly string[];
  /** Targets that are already tmpfs (`/tmp`, HOME). */
  tmpfs: readonly string[];
  /** The tmpfs options of a mask (its size bound included). */
  options: string;
  /** Names the container in errors: `sandbox ro-offline`. */
  what: string;
}

/**
 * The tmpfs entries (`HostConfig.Tmpfs`) that mask the image's volumes. A volume path that is a
 * mount's own target is covered by that mount (Docker makes no volume there); one inside a bind
 * mount is refused: its mask's mount point would be made in the host folder.
 */
export function volumeMasks(input: VolumeMaskInput): Record<string, string> {
  const covered = new Set([...input.binds, ...input.tmpfs].map(normal));
  const masks: Record<string, string> = {};
  for (const raw of input.imageVolumes) {
    const target = normal(raw);
    if (!path.posix.isAbsolute(target) || target === '/') {
      throw new Error(
        `${input.what}: the image declares VOLUME ${JSON.stringify(raw)}, which is not a folder hintbox can mask`,
      );
    }
    if (covered.has(target)) continue;
    const host = input.binds.map(normal).find((bind) => target.startsWith(`${bind}/`));
    if (host) {
      throw new Error(
        `${input.what}: the image declares VOLUME ${target} inside the mount at ${host}: hintbox masks image volumes with a tmpfs and will not make its mount point in a host folder; mount something at ${target} itself, or use an image without that VOLUME`,
      );
    }
    masks[target] = input.options;
  }
  return masks;
}

/** A mount as the engine reports it in a container's inspect. */
export interface InspectedMount {
  Type?: string;
  Name?: string;
  Destination: string;
}

/**
 * Fails when the engine gave the container a volume anyway (an engine that makes volumes where
 * Docker would not, or a path hintbox did not know of): the caller removes the container.
 */
export function assertNoVolumes(mounts: readonly InspectedMount[] | undefined, what: string): void {
  const volumes = (mounts ?? []).filter((m) => m.Type === 'volume');
  if (volumes.length > 0) {
    throw new Error(
      `${what}: the engine gave it a volume at ${volumes.map((m) => m.Destination).join(', ')}: refused (every writable path must be a profile mount or a bounded tmpfs)`,
    );
  }
}

function normal(p: string): string {
  const n = path.posix.normalize(p);
  return n.length > 1 ? n.replace(/\/+$/, '') : n;
}
