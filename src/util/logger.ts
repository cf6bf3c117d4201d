import { escapeInvisibleInJson, renderServerText } from './render-server-text.js';
import { isoTime } from './iso-time.js';

/**
 * hintbox's log. Always stderr: stdout is the MCP transport under `hintbox run`. Messages quote
 * server text (names, errors, stderr), so no form of the log lets it pass for another line or
 * act on the terminal:
 * - `text` (the default): each line of a message is prefixed and rendered (`renderServerText`);
 * - `json` (`HINTBOX_LOG_FORMAT=json`, for a log collector): one JSON object per message and
 *   line, `{"time","level","component","msg"}`; `JSON.stringify` escapes control characters and
 *   line feeds, and the bidi and invisible characters it leaves are written as escapes too
 *   (`escapeInvisibleInJson`), so the line parses back to the very message; a message's
 *   {@link LogFields} follow as keys of their own.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** How each message is written. */
export type LogFormat = 'text' | 'json';

export const LOG_FORMATS: readonly LogFormat[] = ['text', 'json'];

/**
 * Facts of a message for a machine (`server`, `status`, `remoteAddress`, …): keys of a JSON line
 * after `msg` (never in place of the four above); the text form leaves them out, as the message
 * says them already.
 */
export type LogFields = Readonly<Record<string, string | number | boolean | null>>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
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
  const emit = (at: LogLevel, message: string, fields?: LogFields): void => {
    if (ORDER[at] < ORDER[level]) return;
    if (json) {
      const time = isoTime((options.now ?? (() => new Date()))());
      const entry: Record<string, unknown> = { time, level: at, component, msg: message };
      for (const [key, value] of Object.entries(fields ?? {})) if (!(key in entry)) entry[key] = value;
      write(escapeInvisibleInJson(JSON.stringify(entry)));
      return;
    }
    for (const line of message.split('\n')) {
      write(`${prefix}${at === 'info' ? '' : ` ${at}`}: ${renderServerText(line)}`);
    }
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
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
