import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The scratch folders this test process made: removed when it exits, whatever failed. */
const made: string[] = [];
const removeAll = (): void => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
};
process.on('exit', removeAll);
// Stopped by a signal (the test runner cancelling a file that hangs, ^C), a process runs no exit
// handler: remove them then too, and end as the signal would have.
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
  ['SIGHUP', 129],
] as const) {
  process.once(signal, () => {
    removeAll();
    process.exit(code);
  });
}

/**
 * A fresh folder in the system's temporary folder, by its real path (profile checks and lock
 * files compare real paths), removed when this test process exits.
 */
export function scratchFolder(prefix = 'hintbox-test-'): string {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), prefix)));
  made.push(dir);
  return dir;
}
