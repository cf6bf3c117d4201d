import { closeSync, openSync, readSync } from 'node:fs';
import { LineSplitter } from './line-splitter.js';

/**
 * The lines of a file that end with a newline, from `offset` (a byte offset of a line start;
 * -1: from the start, skipping the first `skipLines`), each with the offset just past it.
 */
export function* completeLines(
  file: string,
  offset: number,
  skipLines: number,
): Generator<{ text: string; end: number; skip: boolean }> {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  try {
    let position = offset < 0 ? 0 : offset;
    let end = position;
    let skip = offset < 0 ? skipLines : 0;
    const chunk = Buffer.alloc(1 << 20);
    const splitter = new LineSplitter();
    for (;;) {
      const read = readSync(fd, chunk, 0, chunk.length, position);
      if (read === 0) return; // an unterminated tail waits for the next pass
      position += read;
      for (const { line, bytes } of splitter.push(chunk.subarray(0, read))) {
        end += bytes;
        if (skip > 0) {
          skip--;
          yield { text: '', end, skip: true };
        } else yield { text: line.toString('utf8'), end, skip: false };
      }
    }
  } finally {
    closeSync(fd);
  }
}
