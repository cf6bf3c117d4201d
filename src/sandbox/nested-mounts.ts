import type { SandboxEngine } from '../engine/sandbox-engine.js';
import type { Profile } from '../profile/load-profile.js';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { isStrictlyInside } from '../util/paths.js';
import { HintboxError } from '../util/hintbox-error.js';

/**
 * Mount points nested under a host path. Docker below Engine API 1.44 makes a read-only bind
 * mount read-only only at its top: a file system mounted somewhere below it stays writable
 * inside the container. hintbox refuses such sources rather than pretend they are read-only.
 */

/** Mount points listed in a `/proc/<pid>/mountinfo` text (field 5, octal escapes decoded). */
export function parseMountPoints(mountinfo: string): string[] {
  return mountinfo
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((p): p is string => p !== undefined && p !== '')
    .map((p) => p.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8))));
}

/** The mount points strictly inside `source`. Pure. */
export function nestedMountPoints(source: string, mountPoints: readonly string[]): string[] {
  const root = path.resolve(source);
  return [...new Set(mountPoints.filter((m) => isStrictlyInside(m, root)))];
}

/** Reads this host's mount table. Assumes the Docker engine shares the host's mount namespace. */
export function hostMountPoints(): string[] {
  try {
    return parseMountPoints(readFileSync('/proc/self/mountinfo', 'utf8'));
  } catch {
    return [];
  }
}

export class SandboxPolicyError extends HintboxError {
  constructor(message: string) {
    super(message, { exitCode: 2 });
    this.name = 'SandboxPolicyError';
  }
}

/**
 * Refuses read-only sources that have mount points below them on an engine that cannot make
 * bind mounts read-only recursively: those nested mounts would stay writable.
 */
export function assertNoNestedMounts(
  profile: Pick<Profile, 'file' | 'mounts'>,
  engine: Pick<SandboxEngine, 'recursiveReadOnly' | 'description'>,
  mountPoints = hostMountPoints(),
): void {
  if (engine.recursiveReadOnly) return;
  const problems = profile.mounts.flatMap((mount, index) => {
    const nested = nestedMountPoints(mount.source, mountPoints);
    return nested.length
      ? [
          `${profile.file}: mounts[${index}].source: ${mount.source} has nested mount points (${nested.join(', ')}), which the sandbox engine (${engine.description}) cannot make read-only`,
        ]
      : [];
  });
  if (problems.length) throw new SandboxPolicyError(problems.join('\n'));
}
