import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';

/**
 * A client's session (a gateway over its sandboxes), and how to remove everything it started:
 * what McpHttpServer opens per MCP session of a client, one server's or, at `/mcp`, the
 * combined endpoint's over several (combined-endpoint.ts).
 */
export interface ClientSession {
  /** Serves the client on its transport; `onClosed` once that connection closes. */
  connect(transport: Transport, onClosed: () => void): Promise<void>;
  close(): Promise<void>;
  /** What closing it does, for the log line of its end. Default: "closing its gateways". */
  ending?: string;
}
