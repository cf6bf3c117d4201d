import type { ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import type { RoundTrip } from '../protocol/protocol-era.js';

/** How a confirmation reaches the person at the client (MCP elicitation, through the client's session). */
export interface ClientChannel {
  /** The client shows forms (form-mode elicitation). */
  canElicit(): boolean;
  elicit(params: ElicitRequestFormParams, timeoutMs: number, signal?: AbortSignal): Promise<ElicitResult>;
  /** The client can give the person a link to open (URL-mode elicitation). Default no. */
  canElicitUrl?(): boolean;
  elicitUrl?(params: ElicitRequestURLParams, timeoutMs: number, signal?: AbortSignal): Promise<ElicitResult>;
  /** Tells the client that the interaction behind a URL-mode elicitation is done. Never throws. */
  elicitationComplete?(elicitationId: string): void;
  /**
   * The request is a 2026-era client's (MCP 2026-07-28): it is asked by answering
   * `input_required`, never by a request of hintbox's, and this is what its retry carried.
   */
  roundTrip?: RoundTrip;
}
