import type { PassThrough } from 'node:stream';
import type { Logger } from '../util/logger.js';
import { renderServerText } from '../util/render-server-text.js';

/** How many of a sandbox's last stderr lines are kept, to be quoted when it dies. */
export const STDERR_TAIL_LINES = 20;
const STDERR_LINE_MAX = 8192;
/**
 * The most of one sandbox's stderr that goes into hintbox's log (which an MCP client may keep
 * in a file): a server that floods stderr must not fill the host's disk through it. Beyond it,
 * lines are only kept for the tail quoted when the sandbox dies.
 */
export const STDERR_LOG_MAX_BYTES = 4 * 1024 * 1024;

/** Logs a sandbox's stderr line by line (within `budget` bytes) and keeps its last lines in `tail`; any engine's. */
export function collectStderr(stderr: PassThrough, tail: string[], log: Logger, budget: { left: number }): void {
  let partial = '';
  stderr.setEncoding('utf8');
  stderr.on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) push(line);
    // A server that never ends its line must not grow hintbox's memory: cut it.
    if (partial.length > STDERR_LINE_MAX) {
      push(`${partial.slice(0, STDERR_LINE_MAX)} …(cut)`);
      partial = '';
    }
  });
  stderr.on('end', () => {
    if (partial) push(partial);
    partial = '';
  });
  function push(raw: string): void {
    // The server's text, not terminal control: no escape sequences or fake log lines.
    const line = renderServerText(raw);
    tail.push(line);
    if (tail.length > STDERR_TAIL_LINES) tail.shift();
    if (budget.left <= 0) return;
    budget.left -= Buffer.byteLength(line) + 1;
    log.info(line);
    if (budget.left <= 0) {
      log.warn(`the server wrote more than ${STDERR_LOG_MAX_BYTES} bytes to stderr: the rest is not logged`);
    }
  }
}
