import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The scratch folders this test process made: removed when it exits, whatever failed. */
const made: string[] = [];
process.on('exit', () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/**
 * A fresh folder in the system's temporary folder, by its real path (profile checks and lock
 * files compare real paths), removed when this test process exits.
 */
export function scratchFolder(prefix = 'hintbox-test-'): string {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), prefix)));
  made.push(dir);
  return dir;
}
