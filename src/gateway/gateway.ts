import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ListToolsRequestSchema, type RequestId, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { SplitTransport } from '../mcp/split-transport.js';
import { pinTool } from '../policy/tool-pin.js';
import type { Logger } from '../util/logger.js';
import { VERSION } from '../version.js';
import type { ClientChannel, Gatekeeper } from './call-guard.js';
import { CallRelay } from './call-relay.js';
import { SandboxPool, type Upstream, type UpstreamFactory } from './sandbox-pool.js';

export { MAX_RETRIES, traceIdOf } from './call-relay.js';
export type { Upstream, UpstreamFactory } from './sandbox-pool.js';

/**
 * The MCP server hintbox shows a client: it lists the server's tools as routed and hands each
 * `tools/call` to the call relay (`call-relay.ts`), which forwards it to the sandbox the plan
 * gave the tool, in the sandbox pool (`sandbox-pool.ts`). `initialize`, `tools/list`, `ping`
 * and the rest go through the SDK's `Server`, on a transport of its own over the client's
 * connection (`SplitTransport`): the relay takes the calls and their cancellations first.
 */

export interface RoutedTool {
  /** The definition the client is given (`tools/list`); pins and approvals are of the server's own. */
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
  /** Approval and audit per call; without one every routed call is forwarded (tests of routing). */
  gatekeeper?: Gatekeeper;
  /** A call's deadline passed (before a retry, or for good): e.g. cut the sandbox's database sessions. */
  onDeadline?: (sandbox: string, tool: string) => void;
  /**
   * The last call in flight in a sandbox ended (and a held sandbox is frozen again): e.g. end
   * its database sessions. The sandbox's next call waits until it is done.
   */
  onSandboxIdle?: (sandbox: string) => Promise<void> | void;
  /**
   * A server said its tools changed (`notifications/tools/list_changed`): the session lists
   * them again, re-pins and re-plans, and hands the gateway the new routes (`updateTools`).
   */
  onToolsListChanged?: (from: Upstream) => Promise<void>;
  /**
   * Served before the server is verified (a cold start from the lock file): calls wait for it
   * before anything else happens to them, and are answered with its error when it rejects.
   * It resolves once the routes of the verified server are in place (`updateTools`).
   */
  verified?: Promise<void>;
}

export class Gateway {
  readonly server: Server;
  private readonly pool: SandboxPool;
  private readonly relay: CallRelay;
  /** The routes served now; replaced when the server's tools change. */
  private tools: Map<string, RoutedTool>;
  /** One re-listing at a time; a change announced during one is handled after it. */
  private relisting?: Promise<void>;
  private relistAgain = false;
  private client?: SplitTransport;
  private closing = false;

  constructor(private readonly options: GatewayOptions) {
    this.server = new Server(
      { name: 'hintbox', version: VERSION, title: `hintbox: ${options.serverName}` },
      {
        capabilities: { tools: { listChanged: true } },
        ...(options.instructions ? { instructions: options.instructions } : {}),
      },
    );
    this.pool = new SandboxPool({
      upstreams: options.upstreams,
      log: options.log,
      onUpstream: (id, upstream) => this.relay.attach(id, upstream),
      ...(options.onSandboxIdle ? { onSandboxIdle: options.onSandboxIdle } : {}),
    });
    this.relay = new CallRelay({
      serverName: options.serverName,
      pool: this.pool,
      log: options.log,
      callTimeoutMs: options.callTimeoutMs,
      routeOf: (tool) => this.tools.get(tool),
      client: {
        send: (message, relatedRequestId) =>
          this.client
            ? this.client.send(message, relatedRequestId === undefined ? undefined : { relatedRequestId })
            : Promise.reject(new Error('no client is connected')),
        channelFor: (requestId) => this.channelFor(requestId),
      },
      onToolsListChanged: (from) => this.toolsListChanged(from),
      ...(options.gatekeeper ? { gatekeeper: options.gatekeeper } : {}),
      ...(options.onDeadline ? { onDeadline: options.onDeadline } : {}),
      ...(options.verified ? { verified: options.verified } : {}),
    });
    for (const [id, upstream] of options.started ?? []) this.pool.adopt(id, upstream);
    this.tools = new Map(options.tools);
    this.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: this.visibleDefinitions() }));
  }

  /** Serves the client on `transport`. */
  async connect(transport: Transport): Promise<void> {
    const client = new SplitTransport(transport);
    client.take = (message) => this.relay.fromClient(message);
    // Nobody is left to answer: stop the work upstream.
    client.onClose(() => this.relay.cancelAll('the client disconnected', true));
    this.client = client;
    await this.server.connect(client.sdk);
  }

  /** Serves a sandbox that the session started (e.g. the discovery sandbox, after a cold start). */
  adopt(sandboxId: string, upstream: Upstream): void {
    this.pool.adopt(sandboxId, upstream);
  }

  /** What the client may see changed without new routes (a tool was approved): tell it. */
  async announceToolListChanged(): Promise<void> {
    await this.server
      .sendToolListChanged()
      .catch((error: Error) =>
        this.options.log.warn(`could not tell the client its tool list changed: ${error.message}`),
      );
  }

  /**
   * Serves new routes (after a re-listing). Tells the client when what it sees changed, so
   * it lists again (`notifications/tools/list_changed`).
   */
  async updateTools(tools: ReadonlyMap<string, RoutedTool>, updateGatekeeper?: () => void): Promise<void> {
    const before = this.visiblePins();
    updateGatekeeper?.(); // what is visible also depends on the gatekeeper's pins
    this.tools = new Map(tools);
    if (before !== this.visiblePins()) await this.announceToolListChanged();
  }

  /** See `SandboxPool.holdBetweenCallsFromNow`. */
  holdBetweenCallsFromNow(sandboxIds: readonly string[]): Promise<void> {
    return this.pool.holdBetweenCallsFromNow(sandboxIds);
  }

  /** See `SandboxPool.holdFrozenDuring`. */
  holdFrozenDuring<T>(sandboxIds: readonly string[], work: () => Promise<T>): Promise<T> {
    return this.pool.holdFrozenDuring(sandboxIds, work);
  }

  /** See `CallRelay.noteHintViolation`. */
  noteHintViolation(sandbox: string, violation: string): string[] {
    return this.relay.noteHintViolation(sandbox, violation);
  }

  /** Closes the client connection and every upstream. */
  async close(): Promise<void> {
    this.closing = true;
    this.relay.cancelAll('hintbox stopped', false);
    await this.server.close().catch(() => undefined);
    await this.pool.close();
  }

  /** The person at the client, for the confirmation of one request (sent as part of it). */
  private channelFor(requestId: RequestId): ClientChannel {
    return {
      canElicit: () => this.server.getClientCapabilities()?.elicitation !== undefined,
      elicit: (params, timeoutMs) =>
        this.server.elicitInput(params, { timeout: timeoutMs, relatedRequestId: requestId }),
    };
  }

  private visibleDefinitions(): Tool[] {
    return [...this.tools.entries()]
      .filter(([name]) => this.options.gatekeeper?.visible(name) ?? true)
      .map(([, t]) => t.definition);
  }

  /**
   * What the client sees, as pins (the canonical form), in no order: the same tools sent in
   * another order or form (keys in another order, a hint left at its default) are no change.
   */
  private visiblePins(): string {
    return this.visibleDefinitions()
      .map((definition) => pinTool(definition).hash)
      .sort()
      .join(',');
  }

  private toolsListChanged(from: Upstream): void {
    const handler = this.options.onToolsListChanged;
    if (!handler || this.closing) return;
    if (this.relisting) {
      this.relistAgain = true;
      return;
    }
    this.relisting = (async () => {
      do {
        this.relistAgain = false;
        // Not thawed for it: a held sandbox answers the listing while a call runs in it (the one
        // that announced the change, or the next), or the listing times out.
        try {
          await handler(from);
        } catch (error) {
          this.options.log.error(`listing the tools again failed: ${(error as Error).message}`);
        }
      } while (this.relistAgain && !this.closing);
    })().finally(() => (this.relisting = undefined));
  }
}
