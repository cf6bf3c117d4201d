import path from 'node:path';
import { isStrictlyInside } from '../util/paths.js';

/**
 * Host paths a sandbox must never see, because they hand over the host (the Docker socket,
 * /proc, /sys, /dev), its configuration (/etc) or someone's credentials (~/.ssh, ~/.aws, …).
 * A mount is refused when its (real) source is one of these, lies inside one, or contains one.
 */
export function deniedHostPaths(home: string): string[] {
  const system = [
    '/var/run/docker.sock',
    '/run/docker.sock',
    '/var/run/containerd',
    '/run/containerd',
    '/proc',
    '/sys',
    '/dev',
    '/etc',
    '/boot',
    '/var/lib/docker',
    '/var/lib/containerd',
    '/root/.ssh',
    '/root/.aws',
    '/root/.docker',
  ];
  const secrets = ['.ssh', '.aws', '.docker', '.gnupg', '.kube', '.azure', '.config/gcloud', '.netrc', '.pgpass'];
  return [...new Set([...system, ...secrets.map((s) => path.join(home, s))])];
}

/**
 * Why `realSource` may not be mounted because of a folder of which only some is hintbox's (its
 * temporary folder): the folder itself, a folder containing it, or one inside a sub-folder whose
 * name begins with one of `prefixes` (a sandbox could reach another's gate socket there, or
 * another server's preview copy). Undefined when it may. Pure.
 */
export function sharedFolderReason(
  realSource: string,
  folder: string,
  prefixes: readonly string[],
  what: string,
): string | undefined {
  const source = path.resolve(realSource);
  if (source === folder || isStrictlyInside(folder, source)) return `${source} contains ${folder}, ${what}`;
  if (!isStrictlyInside(source, folder)) return undefined;
  const first = path.relative(folder, source).split(path.sep)[0] ?? '';
  return prefixes.some((prefix) => first.startsWith(prefix))
    ? `${source} is inside ${path.join(folder, first)}, a folder of hintbox's (sandbox sockets or preview copies)`
    : undefined;
}

/**
 * Why `realSource` may not be mounted, or undefined when it may. `extra`: more denied paths
 * (hintbox's own state folder and installation). Pure.
 */
export function denyReason(realSource: string, home: string, extra: readonly string[] = []): string | undefined {
  const source = path.resolve(realSource);
  for (const denied of [...deniedHostPaths(home), ...extra]) {
    if (source === denied) return `${source} is on the denylist`;
    if (isStrictlyInside(source, denied)) return `${source} is inside ${denied}, which is on the denylist`;
    if (isStrictlyInside(denied, source)) return `${source} contains ${denied}, which is on the denylist`;
  }
  return undefined;
}
