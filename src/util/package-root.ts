import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder of hintbox's package.json, found upward from this module. The same code runs from
 * src/ (tests, tsx), from dist/ (tsc output) and from the one-file bundle, each at another depth.
 */
function findPackageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'hintbox') {
      return dir;
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`hintbox's package.json not found above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

export const PACKAGE_ROOT: string = findPackageRoot();

/** A path inside the hintbox package: `packagePath('images', 'node-server')`. */
export function packagePath(...parts: string[]): string {
  return path.join(PACKAGE_ROOT, ...parts);
}
