import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ClientSession } from '../../../src/serve/mcp-http-server.js';

/**
 * A client's session of serve's HTTP endpoint that is this SDK server: the stand-in for a
 * gateway over sandboxes in the endpoint's unit tests. `onClose` is told when the endpoint closes it.
 */
export function sdkClientSession(mcp: McpServer, onClose?: () => void): Promise<ClientSession> {
  return Promise.resolve({
    connect: async (transport, onClosed) => {
      await mcp.connect(transport);
      mcp.server.onclose = onClosed;
    },
    close: async () => {
      onClose?.();
      await mcp.close();
    },
  });
}
