import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, realpathSync, renameSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { UsageError } from '../../util/hintbox-error.js';
import type { BindSource } from '../sandbox-engine.js';
import { gateBinary } from './gate.js';
import { containerIdFromMountinfo, samePathProblems, type ContainerMount } from './same-path-mounts.js';

/**
 * hintbox running in a container of the engine it drives (hintbox's image, with the host's
 * Docker socket mounted): its sandboxes are siblings, and every path it binds into them is read
 * on the host. This finds hintbox's own container through the engine and refuses, before
 * anything starts, a path the host does not have at the same place (see same-path-mounts.ts).
 */

/** The check found paths the host lacks at the same place: bad usage (exit 2), one line each. */
export class HostPathError extends UsageError {
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
    this.name = 'HostPathError';
  }
}

/** hintbox's own container, as the engine it drives sees it. */
export interface OwnContainer {
  id: string;
  mounts: ContainerMount[];
}

/**
 * The container this process runs in, if the engine knows it. `declared` is HINTBOX_IN_CONTAINER:
 * true (hintbox's image sets it) and the engine must know the container, or this throws; false,
 * and none is looked for; undefined, and one is looked for only where /.dockerenv says this is a
 * container, and an engine that does not know it (one running beside hintbox, in the same
 * container) means hintbox's paths are the engine's own.
 */
export async function findOwnContainer(
  docker: Docker,
  declared: boolean | undefined,
  files = { dockerenv: '/.dockerenv', mountinfo: '/proc/self/mountinfo' },
): Promise<OwnContainer | undefined> {
  if (declared === false || (declared === undefined && !existsSync(files.dockerenv))) return undefined;
  let mountinfo = '';
  try {
    mountinfo = readFileSync(files.mountinfo, 'utf8');
  } catch {
    // Not Linux, or no /proc: only the host name is left to go by.
  }
  // The host name is the id's first 12 characters unless --hostname changed it; only trusted
  // when the image says it is in a container.
  const candidates = [containerIdFromMountinfo(mountinfo), ...(declared ? [os.hostname()] : [])];
  for (const id of candidates) {
    if (!id) continue;
    try {
      const info = await docker.getContainer(id).inspect();
      return {
        id: info.Id,
        mounts: info.Mounts.map((m) => ({ type: String(m.Type), source: m.Source, destination: m.Destination })),
      };
    } catch {
      continue; // not a container of this engine
    }
  }
  if (!declared) return undefined;
  throw new UsageError(
    `HINTBOX_IN_CONTAINER=1, but the Docker engine does not know this container (looked for ${candidates.filter(Boolean).join(', ')}): ` +
      `mount the socket of the engine that runs it (-v /var/run/docker.sock:/var/run/docker.sock), or set HINTBOX_IN_CONTAINER=0 where the engine runs beside hintbox`,
  );
}

/**
 * Copies the gate binary into `stateDir` (a host folder, no sandbox may mount it) under a name
 * of its content, so the host has it for sandboxes to bind. Returns the copy's path.
 */
export function stageGate(stateDir: string, source = gateBinary()): string {
  const bytes = readFileSync(source);
  const dir = path.join(stateDir, 'gate');
  const digest = (data: Buffer): string => createHash('sha256').update(data).digest('hex');
  const file = path.join(dir, `hintbox-gate-${digest(bytes).slice(0, 16)}`);
  // Reused only when its bytes are the gate's: the state folder is the host's, others may write it.
  if (existsSync(file) && digest(readFileSync(file)) === digest(bytes)) return gateBinary(file);
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const partial = `${file}.${process.pid}.partial`;
  copyFileSync(source, partial);
  chmodSync(partial, 0o555);
  renameSync(partial, file);
  return gateBinary(file);
}

/** A path as the host would see it if mounted at the same place: symbolic links resolved where it exists. */
export function resolvedSource(source: BindSource): BindSource {
  return existsSync(source.path) ? { ...source, path: realpathSync(source.path) } : source;
}

/** Throws a HostPathError naming each of `sources` that the host lacks at the same path. */
export function checkSamePaths(own: OwnContainer, sources: readonly BindSource[]): void {
  const problems = samePathProblems(own.mounts, sources.map(resolvedSource));
  if (problems.length) throw new HostPathError(problems.map((p) => `serve: ${p}`));
}
