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

  /** Waits until verified; undefined then, else the result to answer a call with. */
  async wait(server: string, log: Logger): Promise<CallToolResult | undefined> {
    if (!this.pending) return undefined;
    try {
      await this.pending;
      return undefined;
    } catch (error) {
      log.debug(`a call waited for a verification that failed: ${(error as Error).message}`);
      return errorResult(`hintbox could not verify ${server} against its lock file (see hintbox's log): the run ends`);
    }
  }
}
