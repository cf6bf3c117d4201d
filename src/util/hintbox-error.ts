/**
 * hintbox's errors that reach the command line, each with the exit code it ends a command with:
 * 2 for bad usage (the command line, hintbox's environment variables, a profile, a lock file:
 * what the operator fixes in how hintbox is called), 1 for a failure (Docker unreachable, an
 * image that cannot be built, a server that dies). Errors that never leave their module
 * (`InterpolationError`, `NoPreview`, `TagFilterError` in the pure policy) stay plain `Error`s.
 */
export type ExitCode = 1 | 2;

/** An error whose message is meant for the operator as is, with the exit code it ends a command with. */
export class HintboxError extends Error {
  /** 2: bad usage; 1: a failure. */
  readonly exitCode: ExitCode;

  constructor(message: string, options: ErrorOptions & { exitCode?: ExitCode } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'HintboxError';
    this.exitCode = options.exitCode ?? 1;
  }
}

/** Bad command-line usage or a bad environment variable: printed as is, exit code 2. */
export class UsageError extends HintboxError {
  constructor(message: string) {
    super(message, { exitCode: 2 });
    this.name = 'UsageError';
  }
}

/** The exit code a command that threw `error` ends with: its own, else 1. */
export function exitCodeOf(error: unknown): ExitCode {
  return error instanceof HintboxError ? error.exitCode : 1;
}
