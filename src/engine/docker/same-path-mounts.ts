import path from 'node:path';
import type { BindSource } from '../sandbox-engine.js';

/**
 * hintbox in a container drives the host's engine through the mounted socket, so the sources
 * of the bind mounts it asks for are read on the host, not in its container. A path it binds
 * into a sandbox therefore works only when the host has the same thing at the same path: when
 * the path lies in a bind mount of hintbox's container whose host source is that very path.
 * Pure: the container's mounts (from the engine's inspect) and the paths in, problems out.
 */

/** One mount of hintbox's own container, as the engine's inspect lists it. */
export interface ContainerMount {
  /** `bind`, `volume`, `tmpfs`, … */
  type: string;
  /** On the host (for a volume: the volume's folder in the engine's data). */
  source: string;
  /** Inside hintbox's container. */
  destination: string;
}

const contains = (folder: string, p: string): boolean => folder === '/' || p === folder || p.startsWith(`${folder}/`);

/**
 * One line per path that the host does not have at the same place, naming the path and the
 * `-v PATH:PATH` that fixes it; empty when every path is served by a same-path bind mount.
 * The innermost mount holding a path is the one that serves it; a path inside one already
 * named (the gate's copy in the state folder) is not named again.
 */
export function samePathProblems(mounts: readonly ContainerMount[], sources: readonly BindSource[]): string[] {
  const problems: string[] = [];
  const named: string[] = [];
  for (const { path: p, what } of sources) {
    if (named.some((folder) => contains(folder, p))) continue;
    const fix = `mount the host's ${p} at the same path (docker run -v ${p}:${p})`;
    const mount = mounts
      .filter((m) => contains(m.destination, p))
      .sort((a, b) => b.destination.length - a.destination.length)[0];
    const onHost = mount && path.posix.join(mount.source, path.posix.relative(mount.destination, p));
    const problem = !mount
      ? `${what} ${p} is in hintbox's container, not on the host`
      : mount.type !== 'bind'
        ? `${what} ${p} is in a Docker ${mount.type} mounted at ${mount.destination}, not a host folder`
        : onHost !== p
          ? `${what} ${p} is the host's ${onHost} (mounted at another path)`
          : undefined;
    if (problem) {
      problems.push(`${problem}: ${fix}`);
      named.push(p);
    }
  }
  return problems;
}

/**
 * The id of the container this process runs in, from its /proc/self/mountinfo: the engine
 * bind-mounts the container's hostname, hosts and resolv.conf files from its folder
 * `…/containers/<id>/`. Undefined when no line names one.
 */
export function containerIdFromMountinfo(mountinfo: string): string | undefined {
  for (const line of mountinfo.split('\n')) {
    const id = /\/containers\/([0-9a-f]{64})\/(?:hostname|hosts|resolv\.conf)\s/.exec(line)?.[1];
    if (id) return id;
  }
  return undefined;
}
