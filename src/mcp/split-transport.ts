import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';

/**
 * One MCP connection shared by two parties: an SDK `Client` or `Server` (connected to `sdk`),
 * and hintbox's own relay, which takes the messages it handles before the SDK sees them
 * (`take` returns true) and sends on the same connection (`send`). The relay's traffic — the
 * hot path of forwarded `tools/call`s — skips the SDK's validation and bookkeeping; everything
 * else (initialize, listings, elicitation) goes through the SDK as usual. Nothing patches the
 * transport: the SDK gets a transport of its own over the shared one.
 */
export class SplitTransport {
  /** The transport the SDK connects to. */
  readonly sdk: Transport;
  /** The relay's handler: true when it took the message (the SDK never sees it). */
  take?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => boolean;
  private closed = false;
  private readonly closeListeners: (() => void)[] = [];

  constructor(private readonly base: Transport) {
    // Set before the SDK starts the transport: every message goes through `take` first.
    base.onmessage = (message, extra) => {
      // A message that makes a handler throw is that message's failure, never the process's.
      try {
        if (this.take?.(message, extra)) return;
        this.sdk.onmessage?.(message, extra);
      } catch (error) {
        this.sdk.onerror?.(error instanceof Error ? error : new Error(String(error)));
      }
    };
    base.onclose = () => {
      this.closed = true;
      for (const listener of this.closeListeners) listener();
      this.sdk.onclose?.();
    };
    base.onerror = (error) => this.sdk.onerror?.(error);
    // The SDK sets its onmessage, onclose and onerror on this object when it connects.
    this.sdk = {
      start: () => base.start(),
      send: (message, options) => base.send(message, options),
      close: () => base.close(),
      setProtocolVersion: (version) => base.setProtocolVersion?.(version),
    };
  }

  /** Sends a message of the relay's on the shared connection. */
  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the connection is closed'));
    return this.base.send(message, options);
  }

  /** Whether the connection is still open. */
  get connected(): boolean {
    return !this.closed;
  }

  /** Called once the connection closes (before the SDK hears of it). */
  onClose(listener: () => void): void {
    this.closeListeners.push(listener);
  }
}
