import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { errorResult } from '../mcp/json-rpc.js';
import type { Logger } from '../util/logger.js';

/**
 * A cold start's verification of the server against its lock file: calls wait for it. Once it
 * has succeeded, waiting costs nothing; when it failed, every call is answered with a fixed text
 * (the reason may quote the server: its initialize error, its stderr; it goes to the log).
 */
export class VerificationGate {
  /** Until the verification has succeeded; a failed one stays, and every call meets it. */
  private pending?: Promise<void>;

  constructor(verified: Promise<void>) {
    this.pending = verified;
    verified.then(
      () => (this.pending = undefined),
      () => undefined, // answered to each call that waits
    );
  }

  /**
   * Waits until verified: undefined once it has succeeded (at once, no promise: the hot path
   * of every call), else a promise of undefined or of the result to answer a call with.
   */
  wait(server: string, log: Logger): Promise<CallToolResult | undefined> | undefined {
    const pending = this.pending;
    if (!pending) return undefined;
    return pending.then(
      () => undefined,
      (error: Error) => {
        log.debug(`a call waited for a verification that failed: ${error.message}`);
        return errorResult(
          `hintbox could not verify ${server} against its lock file (see hintbox's log): the run ends`,
        );
      },
    );
  }
}
