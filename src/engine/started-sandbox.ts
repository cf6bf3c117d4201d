import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { SplitTransport } from '../mcp/split-transport.js';
import { ModernUpstreamTransport } from '../protocol/modern-upstream-transport.js';
import { delay } from '../util/delay.js';
import { VERSION } from '../version.js';
import { SandboxStartError, type StartedSandbox } from './sandbox-engine.js';

/** What an engine knows of a sandbox whose gate it has just released. */
export interface ReleasedSandbox {
  id: string;
  containerId: string;
  /** The server's stdio, not started yet (it is probed, then shared by the SDK client and the gateway's relay). */
  stdio: Transport;
  /** Resolves when the server's stdio has closed (and its last stderr lines are in). */
  closed: Promise<void>;
  startTimeoutMs: number;
  capabilities: ClientCapabilities;
  /** `; its stderr ends with: …`, for an error message. */
  stderrSays(): string;
  stderrTail(): string;
  /** Removes the sandbox (idempotent). */
  remove(): Promise<void>;
  /** See StartedSandbox.freeze. */
  freeze(cancel?: AbortSignal): Promise<void | 'cancelled'>;
  thaw(): Promise<void>;
  /** See StartedSandbox.woken. */
  woken?: Promise<string>;
}

/**
 * Engine-neutral: makes the MCP handshake with a released server and returns it as a
 * `StartedSandbox`. The server is probed with `server/discover` first (a 2026 server), then
 * spoken to in its era (`ModernUpstreamTransport`); the SDK client makes the handshake and the
 * listings; the gateway's relay shares the connection for forwarded calls. On failure it
 * throws, quoting the server's stderr; removing the sandbox is the caller's.
 */
export async function connectReleased(released: ReleasedSandbox): Promise<StartedSandbox> {
  const { closed } = released;
  const clientInfo = { name: 'hintbox', version: VERSION };
  const probing = Date.now();
  const { transport, era } = await ModernUpstreamTransport.open(
    released.stdio,
    { clientInfo, capabilities: released.capabilities },
    released.startTimeoutMs,
  );
  const forwarded = new SplitTransport(transport);
  const client = new Client(clientInfo, { capabilities: released.capabilities });
  try {
    // The probe and the handshake share the start's bound.
    await client.connect(forwarded.sdk, { timeout: released.startTimeoutMs - (Date.now() - probing) });
  } catch (error) {
    // Let the last stderr lines arrive before quoting them.
    await Promise.race([closed, delay(300)]);
    throw new SandboxStartError(
      `sandbox ${released.id}: the server failed to initialize (${(error as Error).message})${released.stderrSays()}`,
    );
  }
  const remove = async (): Promise<void> => {
    await client.close().catch(() => undefined);
    await released.remove();
  };
  return {
    id: released.id,
    containerId: released.containerId,
    era,
    client,
    forwarded,
    closed,
    stderrTail: () => released.stderrTail(),
    remove,
    freeze: (cancel) => released.freeze(cancel),
    thaw: () => released.thaw(),
    ...(released.woken ? { woken: released.woken } : {}),
    [Symbol.asyncDispose]: remove,
  };
}
