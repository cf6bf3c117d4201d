import { PassThrough } from 'node:stream';
import type { z } from 'zod';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  type JSONRPCMessage,
  type ServerCapabilities,
} from '@modelcontextprotocol/sdk/types.js';
import type { Upstream } from '../../../src/gateway/gateway.js';
import { NdjsonTransport } from '../../../src/mcp/ndjson-transport.js';
import { SplitTransport } from '../../../src/mcp/split-transport.js';

/**
 * The "sandboxed" MCP server of the gateway's unit tests: an SDK low-level Server behind an SDK
 * Client, as an Upstream, over linked in-memory transports (default) or over NDJSON byte streams
 * as a sandbox's socket is (`wire: 'ndjson'`: every message is written and parsed as JSON).
 */

type CallHandler = Parameters<Server['setRequestHandler']>[1];
export type HandlerExtra = Parameters<CallHandler>[1];
export type CallRequest = z.infer<typeof CallToolRequestSchema>;

export interface FakeUpstream extends Upstream {
  readonly id: string;
  /** The server itself (e.g. to answer more than tools: its `fallbackRequestHandler`). */
  readonly server: Server;
  readonly calls: CallRequest['params'][];
  /** The upstream server's end of the connection: closing it is the sandbox dying; sending on it is the server speaking. */
  readonly serverTransport: Transport;
  /** Every message the server received from hintbox, in order. */
  readonly received: JSONRPCMessage[];
  /** Writes bytes as the server, unframed (only over `wire: 'ndjson'`). */
  readonly writeRaw?: (bytes: string | Buffer) => void;
  closedByGateway: boolean;
}

export type Behaviour = (
  request: CallRequest,
  extra: HandlerExtra,
  upstream: FakeUpstream,
) => Promise<CallToolResult> | CallToolResult;

export const echo: Behaviour = (request, _extra, upstream) => ({
  content: [
    { type: 'text', text: `${upstream.id}:${request.params.name}:${JSON.stringify(request.params.arguments ?? {})}` },
  ],
});

export interface FakeUpstreamOptions {
  wire?: 'memory' | 'ndjson';
  /** Default `{ tools: {} }`. */
  capabilities?: ServerCapabilities;
}

export async function fakeUpstream(
  id: string,
  behaviour: Behaviour = echo,
  options: FakeUpstreamOptions = {},
): Promise<FakeUpstream> {
  const server = new Server(
    { name: `upstream-${id}`, version: '1.0.0' },
    { capabilities: options.capabilities ?? { tools: {} } },
  );
  const client = new Client({ name: 'hintbox-upstream-client', version: '1.0.0' });
  const { clientSide, serverSide, writeRaw } = options.wire === 'ndjson' ? ndjsonPair() : memoryPair();
  const received: JSONRPCMessage[] = [];
  const forwarded = new SplitTransport(clientSide);
  let resolveClosed!: () => void;
  const closed = new Promise<void>((resolve) => {
    resolveClosed = resolve;
  });
  const upstream: FakeUpstream = {
    id,
    server,
    calls: [],
    serverTransport: serverSide,
    received,
    ...(writeRaw ? { writeRaw } : {}),
    closedByGateway: false,
    client,
    forwarded,
    closed,
    diagnostics: () => `last stderr of ${id}: out of memory`,
    close: async () => {
      upstream.closedByGateway = true;
      await client.close();
    },
  };
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    upstream.calls.push(request.params);
    return behaviour(request, extra, upstream);
  });
  client.onclose = () => resolveClosed();
  await server.connect(tapped(serverSide, received));
  await client.connect(forwarded.sdk);
  return upstream;
}

/** A factory that records what it started. */
export function factory(
  behaviours: Record<string, Behaviour> = {},
  options: FakeUpstreamOptions = {},
): ((sandboxId: string) => Promise<FakeUpstream>) & { started: FakeUpstream[] } {
  const started: FakeUpstream[] = [];
  const start = async (sandboxId: string): Promise<FakeUpstream> => {
    const upstream = await fakeUpstream(sandboxId, behaviours[sandboxId] ?? echo, options);
    started.push(upstream);
    return upstream;
  };
  return Object.assign(start, { started });
}

function memoryPair(): { clientSide: Transport; serverSide: Transport; writeRaw?: undefined } {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  return { clientSide, serverSide };
}

function ndjsonPair(): { clientSide: Transport; serverSide: Transport; writeRaw: (bytes: string | Buffer) => void } {
  const toServer = new PassThrough();
  const toHintbox = new PassThrough();
  return {
    clientSide: new NdjsonTransport(toHintbox, toServer),
    serverSide: new NdjsonTransport(toServer, toHintbox),
    writeRaw: (bytes) => void toHintbox.write(bytes),
  };
}

/** `base`, with every message it receives recorded first. */
function tapped(base: Transport, seen: JSONRPCMessage[]): Transport {
  const transport: Transport = {
    start: () => base.start(),
    send: (message, options) => base.send(message, options),
    close: () => base.close(),
  };
  base.onmessage = (message, extra) => {
    seen.push(message);
    transport.onmessage?.(message, extra);
  };
  base.onclose = () => transport.onclose?.();
  base.onerror = (error) => transport.onerror?.(error);
  return transport;
}
