import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Root } from '@modelcontextprotocol/sdk/types.js';
import { ClientCatalog, type RoutedTool } from '../catalog/client-catalog.js';
import type { PromptsAndResources } from '../catalog/discover-prompts-and-resources.js';
import type { JsonRpcObject } from '../mcp/json-rpc.js';
import { NOTIFICATION } from '../mcp/methods.js';
import { EraTransport } from '../protocol/era-transport.js';
import type { DiscoverAnswer } from '../protocol/protocol-era.js';
import type { Logger } from '../util/logger.js';
import { VERSION } from '../version.js';
import { CallRelay, type RelayGuard } from './call-relay.js';
import { ClientConnection } from './client-connection.js';
import { RequestRelay, type RequestAuditEvent } from './request-relay.js';
import { ServerRequestBroker } from './server-request-broker.js';
import type { ServerRequestPolicy } from './server-requests.js';
import { listenerTag, type SharedSandboxes } from './shared-sandboxes.js';
import { callerKey, type Caller } from '../util/caller-identity.js';

export { MAX_RETRIES, traceIdOf, type RelayGuard } from './call-relay.js';
export type { RoutedTool } from '../catalog/client-catalog.js';
export type { Upstream, UpstreamFactory } from './sandbox-pool.js';
export type { RequestAuditEvent } from './request-relay.js';
export { SharedSandboxes } from './shared-sandboxes.js';
export type { ServerRequestPolicy } from './server-requests.js';

/** The id space of forwarded requests; the upstream SDK client's own ids are numbers. */
export const FORWARDED_ID_PREFIX = 'hintbox:';
/** The id space of forwarded reads. */
const READ_ID_PREFIX = 'hintbox-read:';

/**
 * The MCP server hintbox shows one client. It wires, once, the objects a request meets on its
 * way down and back: the client's connection (`client-connection.ts`), the call relay
 * (`call-relay.ts`: `tools/call`, forwarded to the sandbox its route names), the request relay
 * (`request-relay.ts`: reads, prompts, completions, logging, the server's messages) — both
 * lives of a forwarded request (`forwarded-request.ts`) — and the broker of the server's
 * requests of the client (`server-request-broker.ts`). The sandboxes are a `SharedSandboxes`
 * (one for `hintbox run`, shared by the gateways of every client under `hintbox serve`), whose
 * dispatcher hands each upstream message to the request it answers. `initialize`, the lists and
 * `ping` go through the SDK's `Server`, on a transport of its own over the client's connection
 * (`SplitTransport`): the relays take their messages first.
 */

export interface GatewayOptions {
  serverName: string;
  tools: ReadonlyMap<string, RoutedTool>;
  /** The sandboxes it shares with other gateways (their list changes go to the hooks given there). It leaves them when it closes. */
  shared: SharedSandboxes;
  log: Logger;
  /** Per-call ceiling in ms (`timeouts.call`); progress does not extend it. */
  callTimeoutMs: number;
  instructions?: string;
  /** Approval and audit per call (`CallGuard`); without one every routed call is forwarded (tests of routing). */
  guard?: RelayGuard;
  /** A call's deadline passed (before a retry, or for good): e.g. cut the sandbox's database sessions. */
  onDeadline?: (sandbox: string, tool: string) => void;
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
  /** Reads and the server's requests, for the audit trail. */
  recordRequest?: (event: RequestAuditEvent) => void;
  /** Who the client is (`hintbox serve`: its credentials; stdio: nobody identified): its answers to a server's questions are bound to it. */
  caller?: Caller | null;
  /** Items per page of every list served. Default: `DEFAULT_PAGE_SIZE` (`catalog/list-pages.ts`). */
  pageSize?: number;
}

/**
 * What hintbox offers a client: declared whatever the server offers (a cold start answers
 * before it is known): lists of a server without them are empty.
 */
const GATEWAY_CAPABILITIES = {
  tools: { listChanged: true },
  prompts: { listChanged: true },
  resources: { subscribe: true, listChanged: true },
  completions: {},
  logging: {},
};

export class Gateway {
  readonly server: Server;
  private readonly client: ClientConnection;
  private readonly calls: CallRelay;
  private readonly requests: RequestRelay;
  private readonly serverRequests: ServerRequestBroker;
  private readonly leaveShared: () => void;
  /** What the client is shown (tools, prompts, resources, templates) and the routes; replaced on a re-listing. */
  private readonly catalog: ClientCatalog;

  private readonly serverInfo: { name: string; version: string; title: string };

  constructor(private readonly options: GatewayOptions) {
    this.serverInfo = { name: 'hintbox', version: VERSION, title: `hintbox: ${options.serverName}` };
    this.server = new Server(this.serverInfo, {
      capabilities: GATEWAY_CAPABILITIES,
      ...(options.instructions ? { instructions: options.instructions } : {}),
    });
    const { serverName, shared, log, callTimeoutMs } = options;
    const { pool } = shared;
    const client = (this.client = new ClientConnection(this.server, log));
    this.catalog = new ClientCatalog({
      tools: options.tools,
      ...(options.promptsAndResources ? { promptsAndResources: options.promptsAndResources } : {}),
      ...(options.guard ? { visible: (name: string) => options.guard?.visible(name) ?? true } : {}),
      ...(options.pageSize ? { pageSize: options.pageSize } : {}),
    });
    // Each gateway forwards under ids (and progress tokens) of its own: `hintbox…:<tag>:`.
    const tag = listenerTag();
    const lifecycle = { pool, client, log, ceilingMs: callTimeoutMs };
    this.serverRequests = new ServerRequestBroker({
      serverName,
      peer: client,
      timeoutMs: callTimeoutMs,
      log,
      policy:
        options.serverRequests ??
        (() => ({ sampling: false, elicitation: false, urlElicitation: false, roots: false })),
      roots: options.roots ?? (() => []),
      record: (event) => options.recordRequest?.(event),
    });
    this.calls = new CallRelay({
      ...lifecycle,
      idPrefix: `${FORWARDED_ID_PREFIX}${tag}:`,
      serverName,
      routes: this.catalog,
      serverRequests: this.serverRequests,
      ...(options.guard ? { guard: options.guard } : {}),
      ...(options.onDeadline ? { onDeadline: options.onDeadline } : {}),
      ...(options.verified ? { verified: options.verified } : {}),
      caller: callerKey(options.caller),
      ...(options.recordRequest ? { record: options.recordRequest } : {}),
    });
    this.requests = new RequestRelay({
      ...lifecycle,
      idPrefix: `${READ_ID_PREFIX}${tag}:`,
      serverName,
      shared,
      calls: this.calls,
      serverRequests: this.serverRequests,
      readSandbox: options.readSandbox,
      shown: this.catalog,
      ...(options.recordRequest ? { record: options.recordRequest } : {}),
      ...(options.verified ? { verified: options.verified } : {}),
    });
    this.leaveShared = shared.join(this.requests);
    this.catalog.serveOn(this.server);
  }

  /**
   * Serves the client on `transport`: the relays take their messages first. A 2026 client's
   * `server/discover` and the `resultType` of its answers are the era layer's (`EraTransport`).
   */
  async connect(transport: Transport): Promise<void> {
    await this.client.connect(
      new EraTransport(transport, () => this.discoverAnswer()),
      (message) => this.fromClient(message),
      () => {
        // Nobody is left to answer: stop the work upstream.
        this.calls.cancelAll('the client disconnected', true);
        this.requests.cancelAll('the client disconnected', true);
      },
    );
  }

  /** What a 2026 client's `server/discover` is told: what `initialize` tells a 2025 client. */
  private discoverAnswer(): DiscoverAnswer {
    return {
      capabilities: GATEWAY_CAPABILITIES,
      serverInfo: this.serverInfo,
      ...(this.options.instructions ? { instructions: this.options.instructions } : {}),
    };
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
  async updateTools(tools: ReadonlyMap<string, RoutedTool>, updateGuard?: () => void): Promise<void> {
    // What is visible also depends on the guard's pins: updated before the comparison.
    if (this.catalog.replaceTools(tools, updateGuard).tools) await this.announceToolListChanged();
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
    this.serverRequests.withdrawRefused();
  }

  /** The tools of the calls in a sandbox that ran at some time in `[from, to]` (ms since the epoch). */
  toolsDuring(sandbox: string, from: number, to: number): string[] {
    return this.calls.toolsDuring(sandbox, from, to);
  }

  /** See `CallRelay.noteHintViolation`. */
  noteHintViolation(sandbox: string, violation: string): string[] {
    return this.calls.noteHintViolation(sandbox, violation);
  }

  /** Closes the client connection; its requests still in flight are cancelled upstream (the sandboxes are shared). */
  async close(): Promise<void> {
    this.calls.cancelAll('hintbox stopped', true);
    this.requests.cancelAll('hintbox stopped', true);
    await this.server.close().catch(() => undefined);
    this.leaveShared();
  }

  /** A message of the client: its calls, reads and cancellations go to the relays; false: to the SDK `Server`. */
  private fromClient(m: JsonRpcObject): boolean {
    // A "cancellation" with an id is a request (the SDK answers it: no such method), and cancels nothing.
    if (m.method === NOTIFICATION.cancelled) {
      return m.id === undefined && (this.calls.cancelFromClient(m) || this.requests.cancelFromClient(m));
    }
    return this.calls.fromClient(m) || this.requests.fromClient(m);
  }
}
