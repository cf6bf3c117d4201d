import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Logger } from '../util/logger.js';
import { VERSION } from '../version.js';

/**
 * The MCP server hintbox shows the client. It lists the server's tools as they were received
 * and routes each `tools/call` to the upstream (sandbox) that the plan gave the tool.
 * Progress notifications and cancellation pass through; a sandbox that dies answers its
 * pending calls with an error result and is started again on the next call.
 */

/** A connected upstream: the MCP client of one running sandbox. */
export interface Upstream {
  readonly client: Client;
  /** Resolves when the upstream's connection ends, expectedly or not. */
  readonly closed: Promise<void>;
  /** Text that explains a death, e.g. the server's last stderr lines. */
  diagnostics(): string;
  close(): Promise<void>;
}

/** Starts (or restarts) the upstream of a sandbox. */
export type UpstreamFactory = (sandboxId: string) => Promise<Upstream>;

export interface RoutedTool {
  /** The definition exactly as the server sent it. */
  definition: Tool;
  sandbox: string;
}

export interface GatewayOptions {
  serverName: string;
  tools: ReadonlyMap<string, RoutedTool>;
  upstreams: UpstreamFactory;
  /** Upstreams already running (the discovery sandbox, sandboxes started eagerly). */
  started?: ReadonlyMap<string, Upstream>;
  log: Logger;
  /** Per-call timeout in ms, reset by progress. */
  callTimeoutMs: number;
  instructions?: string;
}

/** Results are passed on as the server sent them; the SDK server validates their shape. */
const PassthroughResult = z.looseObject({});

interface UpstreamSlot {
  current?: Promise<Upstream>;
}

export class Gateway {
  readonly server: Server;
  private readonly slots = new Map<string, UpstreamSlot>();
  private closing = false;

  constructor(private readonly options: GatewayOptions) {
    this.server = new Server(
      { name: 'hintbox', version: VERSION, title: `hintbox: ${options.serverName}` },
      {
        capabilities: { tools: { listChanged: true } },
        ...(options.instructions ? { instructions: options.instructions } : {}),
      },
    );
    for (const [id, upstream] of options.started ?? []) this.adopt(id, upstream);

    this.server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: [...options.tools.values()].map((t) => t.definition),
    }));
    this.server.setRequestHandler(CallToolRequestSchema, (request, extra) => this.callTool(request, extra));
  }

  /** Closes the client connection and every upstream. */
  async close(): Promise<void> {
    this.closing = true;
    await this.server.close().catch(() => undefined);
    const upstreams = [...this.slots.values()].flatMap((s) => (s.current ? [s.current] : []));
    this.slots.clear();
    await Promise.all(upstreams.map((p) => p.then((u) => u.close()).catch(() => undefined)));
  }

  private adopt(sandboxId: string, upstream: Upstream): void {
    const slot = this.slot(sandboxId);
    const current = Promise.resolve(upstream);
    slot.current = current;
    void upstream.closed.then(() => {
      if (slot.current !== current) return;
      slot.current = undefined;
      if (this.closing) return;
      const why = upstream.diagnostics();
      this.options.log.warn(
        `sandbox ${sandboxId} died${why ? `:\n${why}` : ''}; it will be started again on the next call`,
      );
      void upstream.close().catch(() => undefined);
    });
  }

  private slot(sandboxId: string): UpstreamSlot {
    let slot = this.slots.get(sandboxId);
    if (!slot) {
      slot = {};
      this.slots.set(sandboxId, slot);
    }
    return slot;
  }

  private upstreamFor(sandboxId: string): Promise<Upstream> {
    const slot = this.slot(sandboxId);
    if (slot.current) return slot.current;
    this.options.log.info(`starting sandbox ${sandboxId}`);
    const starting = this.options.upstreams(sandboxId).then((upstream) => {
      if (slot.current === starting) this.adopt(sandboxId, upstream);
      return upstream;
    });
    slot.current = starting;
    starting.catch(() => {
      if (slot.current === starting) slot.current = undefined;
    });
    return starting;
  }

  private async callTool(
    request: z.infer<typeof CallToolRequestSchema>,
    extra: Parameters<Parameters<Server['setRequestHandler']>[1]>[1],
  ): Promise<CallToolResult> {
    const { name } = request.params;
    const routed = this.options.tools.get(name);
    if (!routed) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);

    let upstream: Upstream;
    try {
      upstream = await this.upstreamFor(routed.sandbox);
    } catch (error) {
      return errorResult(`hintbox could not start sandbox ${routed.sandbox} for ${name}: ${(error as Error).message}`);
    }

    const progressToken = request.params._meta?.progressToken;
    try {
      const result = await upstream.client.request(
        { method: 'tools/call', params: request.params },
        PassthroughResult,
        {
          signal: extra.signal,
          timeout: this.options.callTimeoutMs,
          resetTimeoutOnProgress: true,
          ...(progressToken !== undefined
            ? {
                onprogress: (progress) =>
                  void extra
                    .sendNotification({ method: 'notifications/progress', params: { ...progress, progressToken } })
                    .catch(() => undefined),
              }
            : {}),
        },
      );
      return result as CallToolResult;
    } catch (error) {
      if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
        const why = upstream.diagnostics();
        return errorResult(
          `sandbox ${routed.sandbox} of ${this.options.serverName} died during the call to ${name}` +
            `${why ? `; its last words:\n${why}` : ''}\nIt will be started again on the next call.`,
        );
      }
      throw error;
    }
  }
}

function errorResult(text: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text }] };
}
