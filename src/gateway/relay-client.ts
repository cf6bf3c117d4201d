import type { CallToolResult, JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../util/logger.js';
import type { ClientChannel } from './call-guard.js';
import { errorResult } from './forwarded-call.js';

/** What the call relay is given: the client it serves, the routes, the wait for verification. */

/** A tool's route: its definition as served and its sandbox. */
export interface Route {
  sandbox: string;
}

/** The client a relay serves. */
export interface RelayClient {
  /** Sends to the client; `relatedRequestId`: the request the message belongs to. Rejects when it cannot. */
  send(message: JSONRPCMessage, relatedRequestId?: RequestId): Promise<void>;
  /** The person at the client, for the confirmation of one request. */
  channelFor(requestId: RequestId): ClientChannel;
}

/** Sends to the client; a failure is logged (there is nobody else to tell). */
export function sendToClient(
  client: RelayClient,
  log: Logger,
  message: JSONRPCMessage,
  relatedRequestId?: RequestId,
): void {
  void client
    .send(message, relatedRequestId)
    .catch((error: Error) => log.warn(`could not pass a message to the client: ${error.message}`));
}

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
