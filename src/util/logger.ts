import { escapeInvisibleInJson, renderServerText } from './render-server-text.js';

/**
 * hintbox's log. Always stderr: stdout is the MCP transport under `hintbox run`. Messages quote
 * server text (names, errors, stderr), so no form of the log lets it pass for another line or
 * act on the terminal:
 * - `text` (the default): each line of a message is prefixed and rendered (`renderServerText`);
 * - `json` (`HINTBOX_LOG_FORMAT=json`, for a log collector): one JSON object per message and
 *   line, `{"time","level","component","msg"}`; `JSON.stringify` escapes control characters and
 *   line feeds, and the bidi and invisible characters it leaves are written as escapes too
 *   (`escapeInvisibleInJson`), so the line parses back to the very message.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** How each message is written. */
export type LogFormat = 'text' | 'json';

export const LOG_FORMATS: readonly LogFormat[] = ['text', 'json'];

export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
  /** A logger whose lines carry an extra prefix (text) or component (json). */
  child(prefix: string): Logger;
}

export interface LoggerOptions {
  /** What every text line starts with, and the component of a JSON line without a child's. Default `hintbox`. */
  prefix?: string;
  /** Default `text`. */
  format?: LogFormat;
  /** The time of a JSON line. Default: now. */
  now?: () => Date;
}

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export function createLogger(
  level: LogLevel = 'info',
  write: (line: string) => void = (line) => process.stderr.write(line + '\n'),
  options: LoggerOptions = {},
): Logger {
  return make(level, write, options, []);
}

function make(level: LogLevel, write: (line: string) => void, options: LoggerOptions, path: string[]): Logger {
  const json = options.format === 'json';
  const root = options.prefix ?? 'hintbox';
  const prefix = [root, ...path.map((p) => `[${p}]`)].join(' ');
  const component = path.length === 0 ? root : path.join(' ');
  const emit = (at: LogLevel, message: string): void => {
    if (ORDER[at] < ORDER[level]) return;
    if (json) {
      const time = (options.now ?? (() => new Date()))().toISOString();
      write(escapeInvisibleInJson(JSON.stringify({ time, level: at, component, msg: message })));
      return;
    }
    for (const line of message.split('\n')) {
      write(`${prefix}${at === 'info' ? '' : ` ${at}`}: ${renderServerText(line)}`);
    }
  };
  return {
    debug: (m) => emit('debug', m),
    info: (m) => emit('info', m),
    warn: (m) => emit('warn', m),
    error: (m) => emit('error', m),
    child: (p) => make(level, write, options, [...path, p]),
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
