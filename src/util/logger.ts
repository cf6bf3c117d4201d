import { renderServerText } from './render-server-text.js';

/**
 * hintbox's log. Always stderr: stdout is the MCP transport under `hintbox run`. Messages quote
 * server text (names, errors, stderr): each line is prefixed and rendered (`renderServerText`),
 * so none can pass for another line or act on the terminal.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
  /** A logger whose lines carry an extra prefix. */
  child(prefix: string): Logger;
}

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export function createLogger(
  level: LogLevel = 'info',
  write: (line: string) => void = (line) => process.stderr.write(line + '\n'),
  prefix = 'hintbox',
): Logger {
  const emit = (at: LogLevel, message: string): void => {
    if (ORDER[at] < ORDER[level]) return;
    for (const line of message.split('\n')) {
      write(`${prefix}${at === 'info' ? '' : ` ${at}`}: ${renderServerText(line)}`);
    }
  };
  return {
    debug: (m) => emit('debug', m),
    info: (m) => emit('info', m),
    warn: (m) => emit('warn', m),
    error: (m) => emit('error', m),
    child: (p) => createLogger(level, write, `${prefix} [${p}]`),
  };
}

/** A logger that drops everything (tests, library use). */
export const silentLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => silentLogger,
};
