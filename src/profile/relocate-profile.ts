import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * A profile's text, ready to be written into another folder: its `server.build` (relative to its
 * own folder) made absolute. For copies of a shipped profile (the demo, tests, the bench), so
 * that what `approve` writes beside the copy — the lock file — never lands beside the original.
 */
export function relocatedProfileText(file: string): string {
  return readFileSync(file, 'utf8').replace(
    /^(\s*build:\s*)(\S+)\s*$/m,
    // A `${…}` path (the gallery's `${HINTBOX_IMAGES}/…`) resolves the same from any folder.
    (whole: string, key: string, build: string) =>
      build.startsWith('$') ? whole : `${key}${JSON.stringify(path.resolve(path.dirname(file), build))}`,
  );
}
