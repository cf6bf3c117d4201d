import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  ErrorCode,
  ListToolsRequestSchema,
  type CallToolResult,
  type JSONRPCMessage,
  type RequestId,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { AuditOutcomeReport } from '../audit/audit-record.js';
import type { Logger } from '../util/logger.js';
import type { ClientChannel, Gatekeeper } from './call-guard.js';
import { VERSION } from '../version.js';
import { SandboxActivity, type SandboxFreezer } from './sandbox-activity.js';
import { pinTool } from '../policy/tool-pin.js';

/**
 * The MCP server hintbox shows the client. It lists the server's tools as they were received
 * and routes each `tools/call` to the upstream (sandbox) that the plan gave the tool.
 *
 * `initialize`, `tools/list`, `ping` and the rest go through the SDK's `Server`. `tools/call`
 * does not: it is the hot path, so it is forwarded as JSON-RPC, under an id of hintbox's own,
 * with its params untouched (progress tokens included), and its result is passed back as the
 * server sent it. That saves the SDK's schema validation of every message and result, several
 * times per call. Progress notifications and cancellation pass through; a call's deadline is
 * reset by progress; a sandbox that dies answers its pending calls with an error result and is
 * started again on the next call.
 */

/** A connected upstream: the MCP client of one running sandbox. */
export interface Upstream {
  /** An SDK client, connected: its transport carries the forwarded calls too. */
  readonly client: Client;
  /** Resolves when the upstream's connection ends, expectedly or not. */
  readonly closed: Promise<void>;
  /** Text that explains a death, e.g. the server's last stderr lines. */
  diagnostics(): string;
  close(): Promise<void>;
  /** How to freeze the sandbox (absent: it cannot be; tests of routing). */
  readonly freezer?: SandboxFreezer;
  /**
   * Whether it may run only while a call is in flight in it: the gateway thaws it before a call
   * and freezes it when its last call ends. Default true when it has a freezer.
   */
  readonly holdBetweenCalls?: boolean;
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

/** Timed-out calls of tools whose decision allows retries are sent again this many times. */
export const MAX_RETRIES = 2;

interface UpstreamSlot {
  current?: Promise<Upstream>;
}

/** A `tools/call` forwarded to an upstream and not yet answered. */
interface PendingCall {
  clientId: RequestId;
  upstreamId: string;
  upstream: Upstream;
  /** The sandbox's count of calls in flight; the call leaves it when it is settled. */
  activity: SandboxActivity;
  sandbox: string;
  tool: string;
  progressToken?: string | number;
  timer?: NodeJS.Timeout;
  /** The call's audit record, when a gatekeeper admitted it. */
  auditId?: string;
  params: Record<string, unknown>;
  attempts: number;
  retriesLeft: number;
  /** A hint the call was seen to break while it ran (recorded with its outcome). */
  hintViolation?: string;
}

type JsonRpcObject = Record<string, unknown> & { id?: RequestId; method?: string; params?: Record<string, unknown> };

/** The id space of forwarded calls; the upstream SDK client's own ids are numbers. */
const FORWARDED_ID_PREFIX = 'hintbox:';

export class Gateway {
  readonly server: Server;
  private readonly slots = new Map<string, UpstreamSlot>();
  /** Forwarded calls by hintbox's upstream id. */
  private readonly pending = new Map<string, PendingCall>();
  /** The same calls by the client's request id. */
  private readonly pendingByClientId = new Map<RequestId, PendingCall>();
  /** Upstreams whose transport has been tapped for forwarded traffic. */
  private readonly tapped = new WeakSet<Upstream>();
  /** Calls in flight per upstream (a restarted sandbox is a new upstream with a count of its own). */
  private readonly activities = new WeakMap<Upstream, SandboxActivity>();
  /** Sandboxes frozen between calls from now on, whatever their upstream says (the server lost trust). */
  private readonly heldFromNow = new Set<string>();
  /** Calls waiting for their admission (a person may be asked), by the client's id. */
  private readonly admitting = new Set<RequestId>();
  private readonly cancelledWhileAdmitting = new Set<RequestId>();
  /** The routes served now; replaced when the server's tools change. */
  private tools: Map<string, RoutedTool>;
  /** One re-listing at a time; a change announced during one is handled after it. */
  private relisting?: Promise<void>;
  private relistAgain = false;
  private clientTransport?: Transport;
  /** Until the server is verified (a cold start): calls wait for it; it stays when it fails. */
  private verifying?: Promise<void>;
  private nextId = 1;
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
    this.tools = new Map(options.tools);
    if (options.verified) {
      const verified = (this.verifying = options.verified);
      verified.then(
        () => void (this.verifying === verified && (this.verifying = undefined)),
        () => undefined, // answered to each call that waits
      );
    }
    this.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: this.visibleDefinitions() }));
  }

  /** Serves the client on `transport`. */
  async connect(transport: Transport): Promise<void> {
    await this.server.connect(transport);
    this.clientTransport = transport;
    const sdkOnMessage = transport.onmessage?.bind(transport);
    transport.onmessage = (message, extra) => {
      const m = message as JsonRpcObject;
      if (m.method === 'tools/call' && m.id !== undefined) {
        void this.forwardCall(m).catch((error: Error) =>
          this.options.log.error(`tools/call ${String(m.id)} failed in hintbox: ${error.message}`),
        );
      } else if (m.method === 'notifications/cancelled' && this.cancelFromClient(m)) {
        // handled: the cancelled call was one of ours
      } else {
        sdkOnMessage?.(message, extra);
      }
    };
    const sdkOnClose = transport.onclose?.bind(transport);
    transport.onclose = () => {
      // Nobody is left to answer: stop the work upstream.
      for (const call of [...this.pending.values()]) {
        if (this.settle(call, { outcome: 'cancelled', detail: 'the client disconnected' })) {
          this.cancelUpstream(call, 'the client disconnected');
        }
      }
      sdkOnClose?.();
    };
  }

  /**
   * Serves new routes (after a re-listing). Tells the client when what it sees changed, so
   * it lists again (`notifications/tools/list_changed`).
   */
  /** What the client may see changed without new routes (a tool was approved): tell it. */
  async announceToolListChanged(): Promise<void> {
    await this.server
      .sendToolListChanged()
      .catch((error: Error) =>
        this.options.log.warn(`could not tell the client its tool list changed: ${error.message}`),
      );
  }

  async updateTools(tools: ReadonlyMap<string, RoutedTool>, updateGatekeeper?: () => void): Promise<void> {
    const before = this.visiblePins();
    updateGatekeeper?.(); // what is visible also depends on the gatekeeper's pins
    this.tools = new Map(tools);
    if (before !== this.visiblePins()) await this.announceToolListChanged();
  }

  /**
   * What the client sees, as pins (the canonical form): the same tool sent in another form (keys
   * in another order, a hint left at its default) is no change.
   */
  private visiblePins(): string {
    return this.visibleDefinitions()
      .map((definition) => pinTool(definition).hash)
      .join(',');
  }

  private visibleDefinitions(): Tool[] {
    return [...this.tools.entries()]
      .filter(([name]) => this.options.gatekeeper?.visible(name) ?? true)
      .map(([, t]) => t.definition);
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

  /** Closes the client connection and every upstream. */
  async close(): Promise<void> {
    this.closing = true;
    for (const call of [...this.pending.values()])
      this.settle(call, { outcome: 'cancelled', detail: 'hintbox stopped' });
    await this.server.close().catch(() => undefined);
    const upstreams = [...this.slots.values()].flatMap((s) => (s.current ? [s.current] : []));
    this.slots.clear();
    await Promise.all(upstreams.map((p) => p.then((u) => u.close()).catch(() => undefined)));
  }

  /**
   * A sandbox was seen breaking a hint (e.g. Postgres refused its role a write): marks every call
   * in flight in that sandbox, so their audit outcomes record `violation`, and returns those
   * calls' tool names (empty when none was running).
   */
  noteHintViolation(sandbox: string, violation: string): string[] {
    const tools: string[] = [];
    for (const call of this.pending.values()) {
      if (call.sandbox !== sandbox) continue;
      call.hintViolation = call.hintViolation ? `${call.hintViolation}; ${violation}` : violation;
      tools.push(call.tool);
    }
    return tools;
  }

  private async forwardCall(request: JsonRpcObject): Promise<void> {
    const clientId = request.id as RequestId;
    const params = request.params;
    const name = params?.name;
    if (!params || typeof name !== 'string' || (params.arguments !== undefined && !isObject(params.arguments))) {
      return this.replyError(
        clientId,
        ErrorCode.InvalidParams,
        'Invalid tools/call request: expected params.name (string) and params.arguments (object)',
      );
    }
    // Until the call is pending upstream (the server is verified, a person is asked, a sandbox
    // starts), a cancellation from the client is remembered here; then the call is never forwarded.
    this.admitting.add(clientId);
    let auditId: string | undefined;
    const finish = (report: AuditOutcomeReport): void => {
      if (auditId) this.options.gatekeeper?.finish(auditId, report);
    };
    try {
      if (this.verifying) {
        try {
          await this.verifying;
        } catch (error) {
          const text = `hintbox could not verify ${this.options.serverName} against its lock file: ${(error as Error).message}`;
          return this.cancelledWhileAdmitting.has(clientId) ? undefined : this.replyResult(clientId, errorResult(text));
        }
        if (this.cancelledWhileAdmitting.has(clientId)) return;
      }
      // Looked up once the server is verified: its routes may differ from the lock file's.
      const routed = this.tools.get(name);
      if (!routed) return this.replyError(clientId, ErrorCode.InvalidParams, `Unknown tool: ${name}`);
      let retriesLeft = 0;
      if (this.options.gatekeeper) {
        const traceId = traceIdOf(params._meta);
        const admission = await this.options.gatekeeper.admit(name, params.arguments, this.clientChannel, traceId);
        if (!admission.allowed) {
          return this.cancelledWhileAdmitting.has(clientId) ? undefined : this.replyResult(clientId, admission.result);
        }
        auditId = admission.auditId;
        if (admission.decision.retryOnTimeout) retriesLeft = MAX_RETRIES;
      }
      if (this.cancelledWhileAdmitting.has(clientId)) {
        return finish({ outcome: 'cancelled', detail: 'cancelled by the client before it was forwarded' });
      }

      let upstream: Upstream;
      try {
        upstream = await this.upstreamFor(routed.sandbox);
      } catch (error) {
        const text = `hintbox could not start sandbox ${routed.sandbox} for ${name}: ${(error as Error).message}`;
        finish({ outcome: 'sandbox-died', detail: text });
        return this.replyResult(clientId, errorResult(text));
      }
      // Counted in its sandbox from here, whatever happens next: a held sandbox whose server this
      // call released (started) is frozen again when the call leaves it, a cancelled call too.
      const activity = this.activityOf(upstream, routed.sandbox);
      const thawed = activity.enter();
      /** Until a pending call takes the count over (`settle` leaves it then). */
      let countedHere = true;
      try {
        if (this.cancelledWhileAdmitting.has(clientId)) {
          return finish({ outcome: 'cancelled', detail: 'cancelled by the client before it was forwarded' });
        }
        const transport = upstream.client.transport;
        if (!transport) {
          const text = `sandbox ${routed.sandbox} for ${name} is not connected`;
          finish({ outcome: 'sandbox-died', detail: text });
          return this.replyResult(clientId, errorResult(text));
        }
        this.tap(upstream, transport);

        const meta = isObject(params._meta) ? params._meta : undefined;
        const token = meta?.progressToken;
        const call: PendingCall = {
          clientId,
          upstreamId: `${FORWARDED_ID_PREFIX}${this.nextId++}`,
          upstream,
          activity,
          sandbox: routed.sandbox,
          tool: name,
          ...(typeof token === 'string' || typeof token === 'number' ? { progressToken: token } : {}),
          ...(auditId ? { auditId } : {}),
          params,
          attempts: 1,
          retriesLeft,
        };
        this.pending.set(call.upstreamId, call);
        this.pendingByClientId.set(clientId, call);
        this.admitting.delete(clientId);
        this.armTimer(call);
        countedHere = false;
        try {
          await thawed; // a held sandbox is thawed for the call
        } catch (error) {
          const text = `hintbox could not thaw sandbox ${routed.sandbox} for ${name}: ${(error as Error).message}`;
          if (this.settle(call, { outcome: 'sandbox-died', detail: text }))
            this.replyResult(clientId, errorResult(text));
          return;
        }
        // Cancelled or timed out while the sandbox thawed: nothing is sent.
        if (this.pending.has(call.upstreamId)) await this.send(call);
      } finally {
        if (countedHere) {
          thawed.catch(() => undefined);
          activity.leave();
        }
      }
    } catch (error) {
      // A failure of hintbox itself: the client still gets an answer, the audit an outcome.
      finish({ outcome: 'error', detail: `hintbox: ${(error as Error).message}` });
      this.replyError(
        clientId,
        ErrorCode.InternalError,
        `hintbox failed to forward ${name}: ${(error as Error).message}`,
      );
    } finally {
      this.admitting.delete(clientId);
      this.cancelledWhileAdmitting.delete(clientId);
    }
  }

  private async send(call: PendingCall): Promise<void> {
    try {
      const transport = call.upstream.client.transport;
      if (!transport) throw new Error('not connected');
      await transport.send({
        jsonrpc: '2.0',
        id: call.upstreamId,
        method: 'tools/call',
        params: call.params,
      });
    } catch (error) {
      if (this.settle(call, { outcome: 'sandbox-died', detail: (error as Error).message })) {
        this.replyResult(call.clientId, this.diedResult(call, `sending the call failed: ${(error as Error).message}`));
      }
    }
  }

  /** The person at the client, for confirmations. */
  private readonly clientChannel: ClientChannel = {
    canElicit: () => this.server.getClientCapabilities()?.elicitation !== undefined,
    elicit: (params, timeoutMs) => this.server.elicitInput(params, { timeout: timeoutMs }),
  };

  /** Diverts the upstream's answers to forwarded calls before its SDK client sees them. */
  private tap(upstream: Upstream, transport: Transport): void {
    if (this.tapped.has(upstream)) return;
    this.tapped.add(upstream);
    const clientOnMessage = transport.onmessage?.bind(transport);
    transport.onmessage = (message, extra) => {
      const m = message as JsonRpcObject;
      if (typeof m.id === 'string' && m.id.startsWith(FORWARDED_ID_PREFIX) && m.method === undefined) {
        // Only the sandbox a call was sent to may answer it: ids are guessable, sandboxes are not trusted.
        const sent = this.pending.get(m.id);
        const call = sent?.upstream === upstream ? sent : undefined;
        if (call) {
          const violation = this.options.gatekeeper?.violationIn?.(call.tool, m.result ?? m.error);
          if (violation) call.hintViolation = call.hintViolation ? `${call.hintViolation}; ${violation}` : violation;
        }
        if (call && this.settle(call, outcomeOf(m))) this.sendToClient({ ...m, id: call.clientId });
        return; // an answer to a call that was cancelled or timed out: dropped
      }
      if (m.method === 'notifications/progress' && this.forwardProgress(m, upstream)) return;
      if (m.method === 'notifications/tools/list_changed') {
        // A held sandbox runs only for calls: a change it announces outside any call (in the
        // moment between its answer and its freeze) is dropped.
        const held = this.activities.get(upstream)?.held ?? upstream.freezer !== undefined;
        if (held && !this.hasCallsIn(upstream)) {
          this.options.log.debug(`a held sandbox announced a tool change outside a call: ignored`);
          return;
        }
        return this.toolsListChanged(upstream);
      }
      clientOnMessage?.(message, extra);
    };
    void upstream.closed.then(() => {
      for (const call of [...this.pending.values()]) {
        if (
          call.upstream === upstream &&
          this.settle(call, { outcome: 'sandbox-died', detail: upstream.diagnostics() })
        ) {
          this.replyResult(call.clientId, this.diedResult(call));
        }
      }
    });
  }

  private forwardProgress(notification: JsonRpcObject, from: Upstream): boolean {
    const token = notification.params?.progressToken;
    for (const call of this.pending.values()) {
      if (call.upstream === from && call.progressToken !== undefined && call.progressToken === token) {
        this.armTimer(call); // progress resets the deadline
        this.sendToClient(notification);
        return true;
      }
    }
    return false;
  }

  private cancelFromClient(notification: JsonRpcObject): boolean {
    const requestId = notification.params?.requestId as RequestId | undefined;
    if (requestId !== undefined && this.admitting.has(requestId)) {
      this.cancelledWhileAdmitting.add(requestId);
      return true;
    }
    const call = requestId === undefined ? undefined : this.pendingByClientId.get(requestId);
    const reason = notification.params?.reason;
    const detail = typeof reason === 'string' ? `cancelled by the client: ${reason}` : 'cancelled by the client';
    if (!call || !this.settle(call, { outcome: 'cancelled', detail })) return false;
    // A cancelled request gets no answer (MCP): pass the cancellation on, drop the late result.
    this.cancelUpstream(call, typeof reason === 'string' ? reason : undefined);
    return true;
  }

  private cancelUpstream(call: PendingCall, reason?: string): void {
    void call.upstream.client.transport
      ?.send({
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: call.upstreamId, ...(reason ? { reason } : {}) },
      })
      .catch(() => undefined);
  }

  private armTimer(call: PendingCall): void {
    if (call.timer) clearTimeout(call.timer);
    call.timer = setTimeout(() => {
      const seconds = Math.round(this.options.callTimeoutMs / 1000);
      if (this.pending.has(call.upstreamId)) this.options.onDeadline?.(call.sandbox, call.tool);
      if (call.retriesLeft > 0 && this.pending.has(call.upstreamId)) return this.retry(call, seconds);
      if (!this.settle(call, { outcome: 'error', detail: `no answer within ${seconds} s` })) return;
      this.cancelUpstream(call, `hintbox: no answer within ${seconds} s`);
      this.replyError(
        call.clientId,
        ErrorCode.RequestTimeout,
        `${call.tool} gave no answer within ${seconds} s (sandbox ${call.sandbox})`,
      );
    }, this.options.callTimeoutMs);
    call.timer.unref();
  }

  /**
   * An idempotent tool of a trusted server timed out: cancel the attempt and send the call again
   * under a new id after a backoff (1 s, 2 s). Logged; the audit record counts the attempts.
   */
  private retry(call: PendingCall, seconds: number): void {
    this.cancelUpstream(call, `hintbox: no answer within ${seconds} s; retrying`);
    this.pending.delete(call.upstreamId);
    call.retriesLeft--;
    call.attempts++;
    call.upstreamId = `${FORWARDED_ID_PREFIX}${this.nextId++}`;
    this.pending.set(call.upstreamId, call);
    const backoffMs = 1000 * 2 ** (call.attempts - 2);
    this.options.log.warn(
      `${call.tool} gave no answer within ${seconds} s; idempotent tool of a trusted server: attempt ${call.attempts} in ${backoffMs} ms`,
    );
    call.timer = setTimeout(() => {
      if (!this.pending.has(call.upstreamId)) return;
      this.armTimer(call);
      void this.send(call);
    }, backoffMs);
    call.timer.unref();
  }

  /** Marks a call answered and records its outcome. False when it already was: each call is answered once. */
  private settle(call: PendingCall, report: AuditOutcomeReport): boolean {
    if (!this.pending.delete(call.upstreamId)) return false;
    this.pendingByClientId.delete(call.clientId);
    if (call.timer) clearTimeout(call.timer);
    call.activity.leave();
    if (call.auditId) {
      this.options.gatekeeper?.finish(call.auditId, {
        ...report,
        attempts: call.attempts,
        ...(call.hintViolation ? { hintViolation: call.hintViolation } : {}),
      });
    }
    return true;
  }

  private diedResult(call: PendingCall, detail?: string): CallToolResult {
    const why = call.upstream.diagnostics();
    return errorResult(
      `sandbox ${call.sandbox} of ${this.options.serverName} died during the call to ${call.tool}` +
        `${detail ? ` (${detail})` : ''}${why ? `; its last words:\n${why}` : ''}\nIt will be started again on the next call.`,
    );
  }

  private replyResult(id: RequestId, result: CallToolResult): void {
    this.sendToClient({ jsonrpc: '2.0', id, result });
  }

  private replyError(id: RequestId, code: number, message: string): void {
    this.sendToClient({ jsonrpc: '2.0', id, error: { code, message } });
  }

  private sendToClient(message: Record<string, unknown>): void {
    void this.clientTransport?.send(message as JSONRPCMessage).catch((error: Error) => {
      this.options.log.warn(`could not answer the client: ${error.message}`);
    });
  }

  /** Serves a sandbox that the session started (e.g. the discovery sandbox, after a cold start). */
  adopt(sandboxId: string, upstream: Upstream): void {
    const slot = this.slot(sandboxId);
    const current = Promise.resolve(upstream);
    slot.current = current;
    const transport = upstream.client.transport;
    if (transport) this.tap(upstream, transport);
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

  /** The count of calls in flight in this upstream, made when it is first used. */
  private activityOf(upstream: Upstream, sandboxId: string): SandboxActivity {
    let activity = this.activities.get(upstream);
    if (!activity) {
      let ended = false;
      void upstream.closed.then(() => (ended = true));
      activity = new SandboxActivity({
        ...(upstream.freezer ? { freezer: upstream.freezer } : {}),
        holdBetweenCalls:
          upstream.freezer !== undefined && (upstream.holdBetweenCalls !== false || this.heldFromNow.has(sandboxId)),
        onFreezeFailed: (error) => {
          // A sandbox that died (or is being removed) cannot be frozen, and need not be.
          if (ended || this.closing) return this.options.log.debug(`sandbox ${sandboxId} ended: no freeze`);
          // Fail closed: a sandbox that cannot be frozen must not run on between calls.
          this.options.log.error(
            `could not freeze sandbox ${sandboxId} after its last call (${error.message}): removing it; it will be started again on the next call`,
          );
          void upstream.close().catch(() => undefined);
        },
        ...(this.options.onSandboxIdle ? { onIdle: () => this.options.onSandboxIdle?.(sandboxId) } : {}),
      });
      this.activities.set(upstream, activity);
    }
    return activity;
  }

  /** The running upstreams, by sandbox id (those still starting are waited for). */
  private async runningUpstreams(sandboxIds?: readonly string[]): Promise<[string, Upstream][]> {
    const ids = [...(sandboxIds ?? this.slots.keys())].sort();
    const found = await Promise.all(
      ids.map(async (id) => {
        const upstream = await this.slots.get(id)?.current?.catch(() => undefined);
        return upstream ? ([[id, upstream]] as [string, Upstream][]) : [];
      }),
    );
    return found.flat();
  }

  /**
   * From now on these sandboxes are frozen between calls, even those their upstream let run
   * free (`hold: false`): their server lost trust (a hint violation).
   */
  async holdBetweenCallsFromNow(sandboxIds: readonly string[]): Promise<void> {
    for (const id of sandboxIds) this.heldFromNow.add(id);
    const running = await this.runningUpstreams(sandboxIds);
    await Promise.all(running.map(([id, upstream]) => this.activityOf(upstream, id).holdBetweenCalls()));
  }

  /**
   * Runs `work` with these sandboxes frozen (calls in flight included) and no call going into
   * them meanwhile: for hintbox's own reads of what they can write (the preview's copies).
   * Sandboxes held at their gate run nothing and need no freeze. Rejects, without running
   * `work`, when one cannot be frozen.
   */
  async holdFrozenDuring<T>(sandboxIds: readonly string[], work: () => Promise<T>): Promise<T> {
    // In one order (by id), so that two holds never wait for each other.
    const running = await this.runningUpstreams(sandboxIds);
    const nest = (i: number): Promise<T> => {
      const next = running[i];
      if (!next) return work();
      const [id, upstream] = next;
      return this.activityOf(upstream, id).holdFrozenDuring(() => nest(i + 1));
    };
    return nest(0);
  }

  private hasCallsIn(upstream: Upstream): boolean {
    for (const call of this.pending.values()) if (call.upstream === upstream) return true;
    return false;
  }

  private slot(sandboxId: string): UpstreamSlot {
    let slot = this.slots.get(sandboxId);
    if (!slot) {
      slot = {};
      this.slots.set(sandboxId, slot);
    }
    return slot;
  }

  private async upstreamFor(sandboxId: string, again = false): Promise<Upstream> {
    const slot = this.slot(sandboxId);
    const current = slot.current;
    if (current) {
      const upstream = await current;
      if (upstream.client.transport || again) return upstream;
      // Its connection is gone (it died, or was removed after a failed freeze) and the slot has
      // not heard yet: start a new one rather than fail the call.
      if (slot.current === current) slot.current = undefined;
      return this.upstreamFor(sandboxId, true);
    }
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
}

/** The trace id of a W3C `traceparent` in a request's `_meta` (`00-<trace id>-<span id>-<flags>`), if any. */
export function traceIdOf(meta: unknown): string | undefined {
  const parent = isObject(meta) ? meta.traceparent : undefined;
  if (typeof parent !== 'string') return undefined;
  const match = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(parent);
  return match && !/^0+$/.test(match[1]!) ? match[1] : undefined;
}

/** The audit outcome of an upstream's answer. */
function outcomeOf(message: JsonRpcObject): AuditOutcomeReport {
  if (isObject(message.error)) {
    const text = message.error.message;
    return { outcome: 'error', detail: typeof text === 'string' ? text : 'error' };
  }
  const result = isObject(message.result) ? message.result : {};
  return { outcome: result.isError === true ? 'tool-error' : 'ok' };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function errorResult(text: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text }] };
}
