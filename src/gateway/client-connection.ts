import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type {
  ClientCapabilities,
  ElicitRequestFormParams,
  ElicitRequestURLParams,
  ElicitResult,
  JSONRPCMessage,
  MessageExtraInfo,
  RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { SplitTransport } from '../mcp/split-transport.js';
import type { RoundTrip } from '../protocol/protocol-era.js';
import type { Logger } from '../util/logger.js';
import type { ClientChannel } from './call-guard.js';
import type { ClientPeer } from './server-requests.js';

/**
 * The client's connection as the relays use it: the SDK `Server` (initialize, the lists,
 * hintbox's own requests of the client) and, over the same transport, the relays' traffic
 * (`SplitTransport`). Everything sent for a request of the client carries it
 * (`relatedRequestId`: over HTTP, the stream of that request). Each forwarded request holds
 * it, so its answer goes straight back, not up through the gateway.
 */
export class ClientConnection implements ClientPeer {
  private transport?: SplitTransport;

  constructor(
    private readonly server: Server,
    private readonly log: Logger,
  ) {}

  /**
   * Serves the client on `transport`: the relays `take` their messages first, the SDK `Server`
   * gets the rest; `closed` runs once the client is gone (before the SDK hears of it).
   */
  async connect(
    transport: Transport,
    take: (message: JSONRPCMessage, extra?: MessageExtraInfo) => boolean,
    closed: () => void,
  ): Promise<void> {
    const split = new SplitTransport(transport);
    split.take = take;
    split.onClose(closed);
    this.transport = split;
    await this.server.connect(split.sdk);
  }

  /** Sends to the client as part of its request `relatedRequestId`. Rejects when it cannot be written. */
  send(message: JSONRPCMessage, relatedRequestId?: RequestId): Promise<void> {
    // Nobody to tell (not connected yet, or gone): dropped, not a log line per server message.
    if (!this.transport?.connected) return Promise.resolve();
    return this.transport.send(message, relatedRequestId === undefined ? undefined : { relatedRequestId });
  }

  /** {@link send}, a failure logged (there is nobody else to tell). */
  tell(message: JSONRPCMessage, relatedRequestId?: RequestId): void {
    void this.send(message, relatedRequestId).catch((error: Error) =>
      this.log.warn(`could not pass a message to the client: ${error.message}`),
    );
  }

  /** What the client declared at `initialize`. */
  capabilities(): ClientCapabilities | undefined {
    return this.server.getClientCapabilities();
  }

  /** A request of hintbox's to the client (a server's sampling or elicitation, passed on), as part of `relatedRequestId`. */
  request(
    method: string,
    params: Record<string, unknown> | undefined,
    options: { relatedRequestId: RequestId; timeoutMs: number; signal: AbortSignal },
  ): Promise<Record<string, unknown>> {
    const { relatedRequestId, timeoutMs, signal } = options;
    return this.server.request({ method, ...(params ? { params } : {}) }, z.looseObject({}), {
      relatedRequestId,
      timeout: timeoutMs,
      signal,
    });
  }

  /**
   * The person at the client, for the confirmation of one request (sent as part of it);
   * `roundTrip`: a 2026 client's request, asked through its answer (`input_required`). One
   * small object per call, its methods shared: most calls never ask.
   */
  channelFor(requestId: RequestId, roundTrip?: RoundTrip): ClientChannel {
    return new RequestChannel(this.server, requestId, roundTrip);
  }
}

/** {@link ClientConnection.channelFor}: the person at the client, for one request. */
class RequestChannel implements ClientChannel {
  readonly roundTrip?: RoundTrip;

  constructor(
    private readonly server: Server,
    private readonly requestId: RequestId,
    roundTrip: RoundTrip | undefined,
  ) {
    if (roundTrip) this.roundTrip = roundTrip;
  }

  canElicit(): boolean {
    return this.server.getClientCapabilities()?.elicitation?.form !== undefined;
  }

  elicit(params: ElicitRequestFormParams, timeoutMs: number, signal?: AbortSignal): Promise<ElicitResult> {
    return this.server.elicitInput(params, this.asked(timeoutMs, signal));
  }

  canElicitUrl(): boolean {
    return this.server.getClientCapabilities()?.elicitation?.url !== undefined;
  }

  elicitUrl(params: ElicitRequestURLParams, timeoutMs: number, signal?: AbortSignal): Promise<ElicitResult> {
    return this.server.elicitInput(params, this.asked(timeoutMs, signal));
  }

  elicitationComplete(elicitationId: string): void {
    try {
      void this.server
        .createElicitationCompletionNotifier(elicitationId, { relatedRequestId: this.requestId })()
        .catch(() => undefined);
    } catch {
      // A client without URL elicitation: nothing to tell.
    }
  }

  private asked(timeoutMs: number, signal?: AbortSignal): RequestOptions {
    return { timeout: timeoutMs, relatedRequestId: this.requestId, ...(signal ? { signal } : {}) };
  }
}
