import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, RequestId, Root } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { SplitTransport } from '../mcp/split-transport.js';
import type { Logger } from '../util/logger.js';
import { VERSION } from '../version.js';
import type { ClientChannel, Gatekeeper } from './call-guard.js';
import { CallRelay, type RelayClient } from './call-relay.js';
import { ClientCatalog, type RoutedTool } from '../catalog/client-catalog.js';
import type { PromptsAndResources } from '../catalog/discover-prompts-and-resources.js';
import { FORWARDED_ID_PREFIX } from './forwarded-call.js';
import { RequestRelay, type RequestAuditEvent } from './request-relay.js';
import type { Upstream, UpstreamFactory } from './sandbox-pool.js';
import type { ServerRequestPolicy } from './server-requests.js';
import { listenerTag, SharedSandboxes, type UpstreamListener } from './shared-sandboxes.js';

export { MAX_RETRIES, traceIdOf } from './call-relay.js';
export type { Upstream, UpstreamFactory } from './sandbox-pool.js';
export type { RequestAuditEvent } from './request-relay.js';
export { SharedSandboxes } from './shared-sandboxes.js';
export type { ServerRequestPolicy } from './server-requests.js';

/**
 * The MCP server hintbox shows a client: it lists the server's tools as routed and hands each
 * `tools/call` to the call relay (`call-relay.ts`), which forwards it to the sandbox the plan
 * gave the tool, in the sandbox pool (`sandbox-pool.ts`). It lists the approved prompts,
 * resources and templates, and hands everything else of MCP (reads, completions, logging, the
 * server's requests of the client) to the request relay (`request-relay.ts`). `initialize`,
 * the lists and `ping` go through the SDK's `Server`, on a transport of its own over the
 * client's connection (`SplitTransport`): the relays take their messages first.
 *
 * Its sandboxes are a `SharedSandboxes`: its own (`hintbox run`), or one that the gateways of
 * several clients share (`hintbox serve`); it leaves it when it closes.
 */

export type { RoutedTool } from '../catalog/client-catalog.js';

export interface GatewayOptions {
  serverName: string;
  tools: ReadonlyMap<string, RoutedTool>;
  /**
   * The sandboxes it shares with other gateways (their list changes go to the hooks given
   * there). Without, it makes its own from `upstreams` and the hooks below, and closes them
   * when it closes.
   */
  shared?: SharedSandboxes;
  upstreams?: UpstreamFactory;
  /** Upstreams already running (the discovery sandbox, sandboxes started eagerly). */
  started?: ReadonlyMap<string, Upstream>;
  log: Logger;
  /** Per-call ceiling in ms (`timeouts.call`); progress does not extend it. */
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
  /** The prompts, resources and templates the client may see (approved). Default none. */
  promptsAndResources?: PromptsAndResources;
  /** The strictest sandbox: where reads of resources, prompts and completions run. */
  readSandbox: string;
  /** What the server may ask of the client now. Default: nothing. */
  serverRequests?: () => ServerRequestPolicy;
  /** The roots a server is told (its sandboxes' mount targets). */
  roots?: () => Root[];
  /** A server said its prompts or resources changed: the session lists them and calls `updatePromptsAndResources`. */
  onOffersChanged?: (from: Upstream) => Promise<void>;
  /** Reads and the server's requests, for the audit trail. */
  recordRequest?: (event: RequestAuditEvent) => void;
  /** Items per page of every list served. Default: `DEFAULT_PAGE_SIZE` (`catalog/list-pages.ts`). */
  pageSize?: number;
}

export class Gateway {
  readonly server: Server;
  private readonly shared: SharedSandboxes;
  private readonly ownsShared: boolean;
  private readonly leaveShared: () => void;
  private readonly relay: CallRelay;
  private readonly requests: RequestRelay;
  /** What the client is shown (tools, prompts, resources, templates) and the routes; replaced on a re-listing. */
  private readonly catalog: ClientCatalog;
  private client?: SplitTransport;
  private closing = false;

  constructor(private readonly options: GatewayOptions) {
    this.server = new Server(
      { name: 'hintbox', version: VERSION, title: `hintbox: ${options.serverName}` },
      {
        // Declared whatever the server offers (a cold start answers before it is known): lists
        // of a server without them are empty.
        capabilities: {
          tools: { listChanged: true },
          prompts: { listChanged: true },
          resources: { subscribe: true, listChanged: true },
          completions: {},
          logging: {},
        },
        ...(options.instructions ? { instructions: options.instructions } : {}),
      },
    );
    this.ownsShared = options.shared === undefined;
    this.shared = options.shared ?? ownSandboxes(options);
    const pool = this.shared.pool;
    const tag = listenerTag();
    /** How the shared sandboxes see this gateway (its relays are made below). */
    const listener: UpstreamListener = {
      owns: (key) => this.relay.owns(key) || this.requests.owns(key),
      take: (id, upstream, m) => this.relay.fromUpstream(upstream, m) || this.requests.fromUpstream(id, upstream, m),
      busyIn: (upstream, callsOnly) =>
        this.relay.hasCallsIn(upstream) || (!callsOnly && this.requests.hasReadsIn(upstream)),
      upstreamClosed: (upstream) => {
        this.relay.upstreamClosed(upstream);
        this.requests.upstreamClosed(upstream);
      },
    };
    /** The client both relays serve: sends as part of a request, asks the person for a call's confirmation. */
    const client: RelayClient = {
      send: (message, relatedRequestId) => this.sendToClient(message, relatedRequestId),
      channelFor: (requestId) => this.channelFor(requestId),
    };
    this.relay = new CallRelay({
      serverName: options.serverName,
      pool,
      idPrefix: `${FORWARDED_ID_PREFIX}${tag}:`,
      log: options.log,
      callTimeoutMs: options.callTimeoutMs,
      routeOf: (tool) => this.catalog.route(tool),
      client,
      onCallSettled: (clientId) => this.requests.callEnded(clientId),
      ...(options.gatekeeper ? { gatekeeper: options.gatekeeper } : {}),
      ...(options.onDeadline ? { onDeadline: options.onDeadline } : {}),
      ...(options.verified ? { verified: options.verified } : {}),
    });
    this.requests = new RequestRelay({
      serverName: options.serverName,
      pool,
      tag,
      setLevel: (level) => this.shared.setLevel(listener, level),
      subscriptions: (uri, now) => this.shared.subscribed(listener, uri, now),
      othersSubscribed: (uri) => this.shared.othersSubscribed(listener, uri),
      client,
      peer: {
        capabilities: () => this.server.getClientCapabilities(),
        request: (method, params, { relatedRequestId, timeoutMs, signal }) =>
          this.server.request({ method, ...(params ? { params } : {}) }, z.looseObject({}), {
            relatedRequestId,
            timeout: timeoutMs,
            signal,
          }),
      },
      log: options.log,
      timeoutMs: options.callTimeoutMs,
      readSandbox: options.readSandbox,
      shown: {
        prompt: (name) => this.catalog.showsPrompt(name),
        resourceRef: (uri) => this.catalog.showsResourceRef(uri),
      },
      callsIn: (upstream) => this.relay.callsIn(upstream),
      policy:
        options.serverRequests ??
        (() => ({ sampling: false, elicitation: false, urlElicitation: false, roots: false })),
      roots: options.roots ?? (() => []),
      ...(options.recordRequest ? { record: options.recordRequest } : {}),
      ...(options.verified ? { verified: options.verified } : {}),
    });
    this.leaveShared = this.shared.join(listener);
    for (const [id, upstream] of options.started ?? []) this.shared.adopt(id, upstream);
    this.catalog = new ClientCatalog({
      tools: options.tools,
      ...(options.promptsAndResources ? { promptsAndResources: options.promptsAndResources } : {}),
      ...(options.gatekeeper ? { visible: (name: string) => options.gatekeeper?.visible(name) ?? true } : {}),
      ...(options.pageSize ? { pageSize: options.pageSize } : {}),
    });
    this.catalog.serveOn(this.server);
  }

  /** Serves the client on `transport`. */
  async connect(transport: Transport): Promise<void> {
    const client = new SplitTransport(transport);
    client.take = (message) => this.relay.fromClient(message) || this.requests.fromClient(message);
    // Nobody is left to answer: stop the work upstream.
    client.onClose(() => {
      this.relay.cancelAll('the client disconnected', true);
      this.requests.cancelAll('the client disconnected');
    });
    this.client = client;
    await this.server.connect(client.sdk);
  }

  /** Serves a sandbox that the session started (e.g. the discovery sandbox, after a cold start). */
  adopt(sandboxId: string, upstream: Upstream): void {
    this.shared.adopt(sandboxId, upstream);
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
    // What is visible also depends on the gatekeeper's pins: updated before the comparison.
    if (this.catalog.replaceTools(tools, updateGatekeeper).tools) await this.announceToolListChanged();
  }

  /**
   * Serves new prompts, resources and templates (after a re-listing): tells the client of each
   * list whose content (by pins, in no order) changed.
   */
  async updatePromptsAndResources(next: PromptsAndResources): Promise<void> {
    const changed = this.catalog.replacePromptsAndResources(next);
    const tell = (what: string, send: () => Promise<void>): Promise<void> =>
      send().catch((error: Error) =>
        this.options.log.warn(`could not tell the client its ${what} changed: ${error.message}`),
      );
    if (changed.prompts) await tell('prompts', () => this.server.sendPromptListChanged());
    if (changed.resources) await tell('resources', () => this.server.sendResourceListChanged());
  }

  /** The server lost trust: its requests the narrower policy refuses are withdrawn from the client. */
  withdrawRefusedServerRequests(): void {
    this.requests.withdrawRefused();
  }

  /** See `SandboxPool.holdBetweenCallsFromNow`. */
  holdBetweenCallsFromNow(sandboxIds: readonly string[]): Promise<void> {
    return this.shared.pool.holdBetweenCallsFromNow(sandboxIds);
  }

  /** See `SandboxPool.holdFrozenDuring`. */
  holdFrozenDuring<T>(sandboxIds: readonly string[], work: () => Promise<T>): Promise<T> {
    return this.shared.pool.holdFrozenDuring(sandboxIds, work);
  }

  /** The tools of the calls in a sandbox that ran at some time in `[from, to]` (ms since the epoch). */
  toolsDuring(sandbox: string, from: number, to: number): string[] {
    return this.relay.toolsDuring(sandbox, from, to);
  }

  /** See `CallRelay.noteHintViolation`. */
  noteHintViolation(sandbox: string, violation: string): string[] {
    return this.relay.noteHintViolation(sandbox, violation);
  }

  /**
   * Closes the client connection; its calls still in flight are cancelled upstream when the
   * sandboxes are shared (others go on using them), and its own sandboxes are closed.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.relay.cancelAll('hintbox stopped', !this.ownsShared);
    this.requests.cancelAll('hintbox stopped');
    await this.server.close().catch(() => undefined);
    this.leaveShared();
    if (this.ownsShared) await this.shared.close();
  }

  /** Sends to the client as part of its request `relatedRequestId`. */
  private sendToClient(message: JSONRPCMessage, relatedRequestId?: RequestId): Promise<void> {
    // Nobody to tell (not connected yet, or gone): dropped, not a log line per server message.
    if (!this.client?.connected) return Promise.resolve();
    return this.client.send(message, relatedRequestId === undefined ? undefined : { relatedRequestId });
  }

  /** The person at the client, for the confirmation of one request (sent as part of it). */
  private channelFor(requestId: RequestId): ClientChannel {
    const asked = (timeoutMs: number, signal?: AbortSignal) => ({
      timeout: timeoutMs,
      relatedRequestId: requestId,
      ...(signal ? { signal } : {}),
    });
    return {
      canElicit: () => this.server.getClientCapabilities()?.elicitation?.form !== undefined,
      elicit: (params, timeoutMs, signal) => this.server.elicitInput(params, asked(timeoutMs, signal)),
      canElicitUrl: () => this.server.getClientCapabilities()?.elicitation?.url !== undefined,
      elicitUrl: (params, timeoutMs, signal) => this.server.elicitInput(params, asked(timeoutMs, signal)),
      elicitationComplete: (elicitationId) => {
        try {
          void this.server
            .createElicitationCompletionNotifier(elicitationId, { relatedRequestId: requestId })()
            .catch(() => undefined);
        } catch {
          // A client without URL elicitation: nothing to tell.
        }
      },
    };
  }
}

/** A gateway's own sandboxes (`hintbox run`, tests): from its options' factory and hooks. */
function ownSandboxes(options: GatewayOptions): SharedSandboxes {
  if (!options.upstreams) throw new Error('a gateway needs shared sandboxes or an upstream factory');
  return new SharedSandboxes({
    upstreams: options.upstreams,
    log: options.log,
    ...(options.onSandboxIdle ? { onSandboxIdle: options.onSandboxIdle } : {}),
    ...(options.onToolsListChanged ? { onToolsListChanged: options.onToolsListChanged } : {}),
    ...(options.onOffersChanged ? { onOffersChanged: options.onOffersChanged } : {}),
  });
}
