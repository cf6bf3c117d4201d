import { closeSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';

/** Fills the file system that holds `dir` to its last byte (a file `filler` in it); returns the filler to remove. */
export function fillFileSystem(dir: string): string {
  const filler = path.join(dir, 'filler');
  const fd = openSync(filler, 'w');
  const block = Buffer.alloc(4096, 0x41);
  try {
    for (;;) if (writeSync(fd, block) < block.length) break;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    closeSync(fd);
  }
  return filler;
}
