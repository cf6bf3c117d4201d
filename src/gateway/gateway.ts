import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  type Root,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { JsonRpcObject } from '../mcp/json-rpc.js';
import { NOTIFICATION } from '../mcp/methods.js';
import { ENFORCED_META_KEY } from '../policy/advertised-annotations.js';
import { pinOffer } from '../policy/offer-pin.js';
import { pinTool } from '../policy/tool-pin.js';
import type { Logger } from '../util/logger.js';
import { VERSION } from '../version.js';
import { CallRelay, type RelayGuard } from './call-relay.js';
import { ClientConnection } from './client-connection.js';
import { NO_OFFERS, type ServerOffers } from './discover-offers.js';
import { DEFAULT_PAGE_SIZE, pageOf } from './list-pages.js';
import { RequestRelay, type RequestAuditEvent } from './request-relay.js';
import { Routes, type RoutedTool } from './routes.js';
import { ServerRequestBroker } from './server-request-broker.js';
import type { ServerRequestPolicy } from './server-requests.js';
import { listenerTag, type SharedSandboxes } from './shared-sandboxes.js';

export { MAX_RETRIES, traceIdOf, type RelayGuard } from './call-relay.js';
export type { RoutedTool } from './routes.js';
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
  offers?: ServerOffers;
  /** The strictest sandbox: where reads of resources, prompts and completions run. */
  readSandbox: string;
  /** What the server may ask of the client now. Default: nothing. */
  serverRequests?: () => ServerRequestPolicy;
  /** The roots a server is told (its sandboxes' mount targets). */
  roots?: () => Root[];
  /** Reads and the server's requests, for the audit trail. */
  recordRequest?: (event: RequestAuditEvent) => void;
  /** Items per page of every list served. Default {@link DEFAULT_PAGE_SIZE}. */
  pageSize?: number;
}

export class Gateway {
  readonly server: Server;
  private readonly client: ClientConnection;
  private readonly calls: CallRelay;
  private readonly requests: RequestRelay;
  private readonly serverRequests: ServerRequestBroker;
  private readonly leaveShared: () => void;
  /** The routes served now; replaced when the server's tools change. */
  private readonly tools: Routes;
  /** The prompts, resources and templates served now. */
  private offers: ServerOffers;

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
    const { serverName, shared, log, callTimeoutMs } = options;
    const { pool } = shared;
    const client = (this.client = new ClientConnection(this.server, log));
    this.tools = new Routes(options.tools);
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
      routes: this.tools,
      serverRequests: this.serverRequests,
      ...(options.guard ? { guard: options.guard } : {}),
      ...(options.onDeadline ? { onDeadline: options.onDeadline } : {}),
      ...(options.verified ? { verified: options.verified } : {}),
    });
    this.requests = new RequestRelay({
      ...lifecycle,
      idPrefix: `${READ_ID_PREFIX}${tag}:`,
      serverName,
      shared,
      calls: this.calls,
      serverRequests: this.serverRequests,
      readSandbox: options.readSandbox,
      shown: {
        prompt: (name) => this.offers.prompts.some((p) => p.name === name),
        resourceRef: (uri) =>
          this.offers.resourceTemplates.some((t) => t.uriTemplate === uri) ||
          this.offers.resources.some((r) => r.uri === uri),
      },
      ...(options.recordRequest ? { record: options.recordRequest } : {}),
      ...(options.verified ? { verified: options.verified } : {}),
    });
    this.leaveShared = shared.join(this.requests);
    this.offers = withoutHintboxMeta(options.offers ?? NO_OFFERS);
    const pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
    const paged = <T>(items: readonly T[], request: { params?: { cursor?: unknown } }) =>
      pageOf(items, request.params?.cursor, pageSize);
    this.server.setRequestHandler(ListToolsRequestSchema, (request) => {
      const { page, nextCursor } = paged(this.visibleDefinitions(), request);
      return { tools: page, ...(nextCursor ? { nextCursor } : {}) };
    });
    this.server.setRequestHandler(ListPromptsRequestSchema, (request) => {
      const { page, nextCursor } = paged(this.offers.prompts, request);
      return { prompts: page, ...(nextCursor ? { nextCursor } : {}) };
    });
    this.server.setRequestHandler(ListResourcesRequestSchema, (request) => {
      const { page, nextCursor } = paged(this.offers.resources, request);
      return { resources: page, ...(nextCursor ? { nextCursor } : {}) };
    });
    this.server.setRequestHandler(ListResourceTemplatesRequestSchema, (request) => {
      const { page, nextCursor } = paged(this.offers.resourceTemplates, request);
      return { resourceTemplates: page, ...(nextCursor ? { nextCursor } : {}) };
    });
  }

  /** Serves the client on `transport`: the relays take their messages first. */
  async connect(transport: Transport): Promise<void> {
    await this.client.connect(
      transport,
      (message) => this.fromClient(message),
      () => {
        // Nobody is left to answer: stop the work upstream.
        this.calls.cancelAll('the client disconnected', true);
        this.requests.cancelAll('the client disconnected', true);
      },
    );
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
    const before = this.visiblePins();
    updateGuard?.(); // what is visible also depends on the guard's pins
    this.tools.replace(tools);
    if (before !== this.visiblePins()) await this.announceToolListChanged();
  }

  /**
   * Serves new prompts, resources and templates (after a re-listing): tells the client of each
   * list whose content (by pins, in no order) changed.
   */
  async updateOffers(offers: ServerOffers): Promise<void> {
    const before = this.offers;
    this.offers = withoutHintboxMeta(offers);
    const changed = (a: readonly object[], b: readonly object[]): boolean => offerPins(a) !== offerPins(b);
    const tell = (what: string, send: () => Promise<void>): Promise<void> =>
      send().catch((error: Error) =>
        this.options.log.warn(`could not tell the client its ${what} changed: ${error.message}`),
      );
    if (changed(before.prompts, offers.prompts)) await tell('prompts', () => this.server.sendPromptListChanged());
    if (changed(before.resources, offers.resources) || changed(before.resourceTemplates, offers.resourceTemplates)) {
      await tell('resources', () => this.server.sendResourceListChanged());
    }
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

  private visibleDefinitions(): Tool[] {
    return [...this.tools.entries()]
      .filter(([name]) => this.options.guard?.visible(name) ?? true)
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
}

/** Offers as pins, in no order: the same offers in another order or key order are no change. */
function offerPins(offers: readonly object[]): string {
  return offers
    .map((offer) => pinOffer(offer).hash)
    .sort()
    .join(',');
}

/**
 * Offers as served: a server's own `_meta["io.hintbox/enforced"]` on a prompt, resource or
 * template is dropped — that key is hintbox's account of a tool, and a server must not forge one.
 */
function withoutHintboxMeta(offers: ServerOffers): ServerOffers {
  const clean = <T extends { _meta?: Record<string, unknown> }>(item: T): T => {
    if (!item._meta || !Object.hasOwn(item._meta, ENFORCED_META_KEY)) return item;
    const meta = { ...item._meta };
    delete meta[ENFORCED_META_KEY];
    return { ...item, _meta: meta };
  };
  return {
    prompts: offers.prompts.map(clean),
    resources: offers.resources.map(clean),
    resourceTemplates: offers.resourceTemplates.map(clean),
  };
}
