import path from 'node:path';

/** Is `child` strictly below `parent`? (`/a/..b` is below `/a`; `/a/../b` is not.) Pure. */
export function isStrictlyInside(child: string, parent: string): boolean {
  const rel = path.relative(path.resolve(parent), path.resolve(child));
  return rel !== '' && rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel);
}
