import {
  ErrorCode,
  type CallToolResult,
  type JSONRPCMessage,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import type { AuditOutcomeReport } from '../audit/audit-record.js';
import { errorAnswer, errorResult, isObject, isRequestId, type JsonRpcObject } from '../mcp/json-rpc.js';
import { METHOD } from '../mcp/methods.js';
import { forUpstream, isModernRequest, roundTripOf, type RoundTrip } from '../protocol/protocol-era.js';
import type { InputRequiredAnswer } from '../confirmation/call-to-confirm.js';
import type { CallGuard } from './call-guard.js';
import { addViolation, diedText, PendingCalls, traceOf, type PendingCall } from './forwarded-call.js';
import {
  cancelUpstream,
  outcomeOf,
  RequestLifecycle,
  type ForwardedRequest,
  type RequestLifecycleOptions,
} from './forwarded-request.js';
import type { ClientCatalog } from '../catalog/client-catalog.js';
import type { ServerRequestBroker } from './server-request-broker.js';
import { envelopeCapabilities, ServerInputRounds } from './server-input-rounds.js';
import type { InFlight, RequestAuditEvent } from './server-requests.js';
import { processRequestStates, type RequestStates } from '../confirmation/request-state.js';
import { VerificationGate } from './verification-gate.js';

export { traceIdOf } from './forwarded-call.js';

/**
 * The call relay: each `tools/call` of a client is admitted (the guard: approval and the audit
 * intent), then forwarded to the sandbox its route names, and its result passed back
 * (`forwarded-request.ts`: the life every forwarded request shares) — without the SDK's
 * validation of every message and result, several times per call. What is a call's own: its
 * route, the guard's admission and outcome, a retry of an idempotent tool of a trusted server
 * after a timeout, the hint a sandbox caught it breaking, the answer when its sandbox died
 * (the server's last words), and the end of its server's requests of the client.
 */

/** What the call relay uses of the `CallGuard` (tests of routing pass a fake). */
export type RelayGuard = Pick<CallGuard, 'visible' | 'admit' | 'finish'> &
  Partial<Pick<CallGuard, 'violationIn' | 'networkRefusalIn'>>;

export interface CallRelayOptions extends RequestLifecycleOptions {
  serverName: string;
  /** The routes served now (they change when the server's tools do). */
  routes: Pick<ClientCatalog, 'route'>;
  /** Approval and audit per call; without one every routed call is forwarded (tests of routing). */
  guard?: RelayGuard;
  /** The server's requests of the client, bound to calls: they end with their call. */
  serverRequests: ServerRequestBroker;
  /** The deadline of the sandbox's only call in flight passed (before a retry too): e.g. cut its database sessions. */
  onDeadline?: (sandbox: string, tool: string) => void;
  /** Calls wait for it before anything else (a cold start: the server is being verified). */
  verified?: Promise<void>;
  /** The caller's key (`callerKey`): what a 2026 client's answer to its server's question is bound to. Default `null`. */
  caller?: string;
  /** Signs the state of a server's question asked of a 2026 client. Default: this process's (the approvals' too). */
  requestStates?: RequestStates;
  /** A refused answer to a server's question, for the audit trail. */
  record?: (event: RequestAuditEvent) => void;
}

/** Timed-out calls of tools whose decision allows retries are sent again this many times. */
export const MAX_RETRIES = 2;

export class CallRelay extends RequestLifecycle<PendingCall> {
  /** Until the server is verified (a cold start): calls wait for it. */
  private readonly verification?: VerificationGate;
  private readonly calls: PendingCalls;
  /** The server's questions asked of 2026 clients, waiting for their retries. */
  private readonly rounds: ServerInputRounds;
  private refusedRetries = 0;

  constructor(private readonly options: CallRelayOptions) {
    const calls = new PendingCalls();
    super(options, calls);
    this.calls = calls;
    this.rounds = new ServerInputRounds(options.serverName, options.requestStates ?? processRequestStates);
    if (options.verified) this.verification = new VerificationGate(options.verified);
  }

  /** A message from the client: true when the relay took it (a call, or the cancellation of one). */
  fromClient(m: JsonRpcObject): boolean {
    if (m.method !== METHOD.toolsCall || !isRequestId(m.id)) return false;
    const clientId = m.id;
    const roundTrip = roundTripOf(m.params);
    if (roundTrip && this.rounds.claims(roundTrip)) {
      this.answerServer(clientId, m.params, roundTrip);
      return true;
    }
    void this.admit(clientId, (cancelled) => this.admitAndForward(clientId, m.params, cancelled)).catch(
      (error: Error) => this.options.log.error(`tools/call ${String(clientId)} failed in hintbox: ${error.message}`),
    );
    return true;
  }

  /** The tools of the calls in a sandbox that ran at some time in `[from, to]`: see `PendingCalls.toolsDuring`. */
  toolsDuring(sandbox: string, from: number, to: number): string[] {
    return this.calls.toolsDuring(sandbox, from, to);
  }

  /** The oldest call in flight in an upstream: what its server's requests bind to (a 2026 client's: asked as `input_required`). */
  oldestIn(upstream: PendingCall['upstream']): InFlight | undefined {
    const calls = this.calls.list(upstream);
    // A call parked on its server's question waits for its answer: a new question is another call's.
    const call = calls.find((c) => !c.parked) ?? calls[0];
    if (!call) return undefined;
    const { capabilities } = call;
    if (!capabilities) return { clientId: call.clientId, what: call.what, call: call.seq };
    return {
      clientId: call.clientId,
      what: call.what,
      call: call.seq,
      modern: {
        capabilities,
        refusal: () => this.rounds.refusal(this.options.caller ?? 'null'),
        ask: (method, params, options) => this.park(call, method, params, options),
      },
    };
  }

  /**
   * The server asks a 2026 client's call a question: the call's request is answered
   * `input_required` with it, and the call waits upstream (parked) for the retry that answers.
   * One question at a time: the call's request can be answered only once.
   */
  private park(
    call: PendingCall,
    method: string,
    params: Record<string, unknown> | undefined,
    options: { timeoutMs: number; signal: AbortSignal },
  ): Promise<Record<string, unknown>> {
    if (call.parked || !this.pending.has(call)) {
      return Promise.reject(new Error('a 2026 client is asked one question of a call at a time'));
    }
    const args = isObject(call.params.arguments) ? call.params.arguments : undefined;
    const parked = { caller: this.options.caller ?? 'null', tool: call.what, arguments: args, call: call.seq };
    const { inputRequired, answer } = this.rounds.ask(parked, method, params, options.timeoutMs, options.signal);
    call.parked = true;
    this.reply({ jsonrpc: '2.0', id: call.clientId, result: inputRequired });
    return answer;
  }

  /**
   * A 2026 client's retry that answers its server's question: the answer goes to the server and
   * the call goes on under the retry's id; a retry whose state does not redeem for exactly that
   * question (another caller, another call, replayed, expired, its call ended) answers nothing
   * to the server and is refused, and recorded.
   */
  private answerServer(clientId: RequestId, params: Record<string, unknown> | undefined, roundTrip: RoundTrip): void {
    const name = typeof params?.name === 'string' ? params.name : '';
    const args = isObject(params?.arguments) ? params.arguments : undefined;
    const outcome = this.rounds.retry(roundTrip, this.options.caller ?? 'null', name, args);
    if (outcome.answered) {
      const call = this.calls.list().find((c) => c.seq === outcome.call);
      if (call) {
        this.calls.rebind(call, clientId);
        call.parked = false;
        return;
      }
    }
    const why = outcome.answered ? 'its call ended' : outcome.why;
    this.options.record?.({
      type: 'server.request',
      ref: `retry#${++this.refusedRetries}`,
      sandbox: this.options.routes.route(name)?.sandbox ?? 'none',
      method: outcome.method ?? 'unknown',
      boundTo: name,
      decision: 'refused',
      reason: `a 2026 client's answer: ${why}`,
    });
    this.reply(this.failure(clientId, `hintbox refused the answer to ${this.options.serverName}'s question: ${why}`));
  }

  /**
   * A sandbox was seen breaking a hint (e.g. Postgres refused its role a write): marks every call
   * in flight in that sandbox, so their audit outcomes record `violation`, and returns those
   * calls' tool names (empty when none was running).
   */
  noteHintViolation(sandbox: string, violation: string): string[] {
    return this.calls.markViolation(sandbox, violation);
  }

  /** Admission (verified server, route, guard), then the lifecycle forwards it. */
  private async admitAndForward(
    clientId: RequestId,
    params: Record<string, unknown> | undefined,
    cancelled: () => boolean,
  ): Promise<void> {
    const { guard, serverName, log } = this.options;
    const name = params?.name;
    if (!params || typeof name !== 'string' || (params.arguments !== undefined && !isObject(params.arguments))) {
      const text = 'Invalid tools/call request: expected params.name (string) and params.arguments (object)';
      return this.reply(errorAnswer(clientId, ErrorCode.InvalidParams, text));
    }
    let auditId: string | undefined;
    try {
      // Once the server is verified (every call but those of a cold start) there is nothing to wait for.
      const verifying = this.verification?.wait(serverName, log);
      const unverified = verifying && (await verifying);
      if (cancelled()) return;
      if (unverified) return this.reply(this.failure(clientId, unverified));
      // Looked up once the server is verified: its routes may differ from the lock file's.
      const routed = this.options.routes.route(name);
      if (!routed) return this.reply(errorAnswer(clientId, ErrorCode.InvalidParams, `Unknown tool: ${name}`));
      let retriesLeft = 0;
      if (guard) {
        const channel = this.options.client.channelFor(clientId, roundTripOf(params));
        const admission = await guard.admit(name, params.arguments, channel, traceOf(params._meta));
        if (!admission.allowed) {
          return cancelled()
            ? undefined
            : this.reply(this.failure(clientId, admission.inputRequired ?? admission.result));
        }
        auditId = admission.auditId;
        if (admission.decision.retryOnTimeout) retriesLeft = MAX_RETRIES;
      }
      if (cancelled()) {
        if (auditId)
          guard?.finish(auditId, { outcome: 'cancelled', detail: 'cancelled by the client before it was forwarded' });
        return;
      }
      const spec = {
        clientId,
        sandbox: routed.sandbox,
        what: name,
        method: METHOD.toolsCall,
        params: forUpstream(params),
      };
      const extra: Omit<PendingCall, keyof ForwardedRequest> = {
        capabilities: isModernRequest(params) ? envelopeCapabilities(params) : undefined,
        auditId,
        attempts: 1,
        retriesLeft,
      };
      await this.forward(spec, cancelled, extra, (report, text) => {
        if (auditId) guard?.finish(auditId, report);
        if (text) this.reply(this.failure(clientId, text));
      });
    } catch (error) {
      // A failure of hintbox itself: the client still gets an answer, the audit an outcome.
      const message = (error as Error).message;
      if (auditId) guard?.finish(auditId, { outcome: 'error', detail: `hintbox: ${message}` });
      this.reply(errorAnswer(clientId, ErrorCode.InternalError, `hintbox failed to forward ${name}: ${message}`));
    }
  }

  /**
   * A call parked on its server's question answered anyway: its client's request was answered
   * (`input_required`) already, so the call settles (recorded, its question withdrawn) and the
   * answer is not sent a second time.
   */
  override answer(call: PendingCall, from: PendingCall['upstream'], message: JsonRpcObject): void {
    if (!call.parked || call.upstream !== from || !this.pending.has(call)) return super.answer(call, from, message);
    this.answered(call, message);
    this.settle(call, outcomeOf(message));
  }

  /** A call's failure is a result with `isError` (MCP: the tool failed, not the protocol). */
  protected override failure(clientId: RequestId, text: string | CallToolResult | InputRequiredAnswer): JSONRPCMessage {
    return { jsonrpc: '2.0', id: clientId, result: typeof text === 'string' ? errorResult(text) : text };
  }

  protected override diedText(call: PendingCall, detail?: string): string {
    return diedText(call, this.options.serverName, detail);
  }

  /** The sandbox caught the call breaking a hint (e.g. `EROFS` of a read-only tool): recorded with its outcome. */
  protected override answered(call: PendingCall, message: JsonRpcObject): void {
    const violation = this.options.guard?.violationIn?.(call.what, message.result ?? message.error);
    if (violation) call.hintViolation = addViolation(call.hintViolation, violation);
    const refusal = this.options.guard?.networkRefusalIn?.(call.what, message.result);
    if (refusal) call.networkRefusal = refusal;
  }

  protected override settled(call: PendingCall, report: AuditOutcomeReport): void {
    this.options.serverRequests.callEnded(call.seq);
    if (call.auditId) {
      // Not `ok`: the sandbox had no network for what the tool set out to reach.
      const refused = report.outcome === 'ok' && call.networkRefusal;
      this.options.guard?.finish(call.auditId, {
        ...(refused ? { outcome: 'tool-error', detail: call.networkRefusal } : report),
        attempts: call.attempts,
        ...(call.hintViolation ? { hintViolation: call.hintViolation } : {}),
      });
    }
  }

  protected override expired(call: PendingCall, seconds: number): void {
    const { pool, onDeadline } = this.options;
    // A call parked on its server's question: its client's request was answered already
    // (`input_required`); the call ends, the server's question with it, nothing more is sent.
    if (
      call.parked &&
      this.settle(call, {
        outcome: 'error',
        detail: `timeout: no answer to the server's question within ${seconds} s (timeouts.call)`,
      })
    ) {
      return cancelUpstream(call, `hintbox: no answer within ${seconds} s`);
    }
    // Not under the calls of others (clients sharing it): its sessions end when the last call leaves.
    const alone = this.pending.has(call) && call.activity.calls <= 1;
    if (alone) onDeadline?.(call.sandbox, call.what);
    if (call.retriesLeft > 0 && this.pending.has(call)) return this.retry(call, seconds);
    // A server that stopped reading or answering would hold every later call too: it is
    // replaced, unless other calls (of other clients) are still running in it.
    const replaced = alone ? '; the sandbox is stopped, the next call starts a fresh one' : '';
    const detail = `timeout: no answer within ${seconds} s (timeouts.call)${replaced}`;
    const message = `${call.what} gave no answer within ${seconds} s (timeouts.call, which progress does not extend; sandbox ${call.sandbox})${replaced}`;
    if (this.timeOut(call, detail, message) && alone) {
      pool.recycle(call.sandbox, call.upstream, `gave no answer to ${call.what} in ${seconds} s`);
    }
  }

  /**
   * An idempotent tool of a trusted server timed out: cancel the attempt and send the call again
   * under a new id after a backoff (1 s, 2 s). Logged; the audit record counts the attempts.
   */
  private retry(call: PendingCall, seconds: number): void {
    cancelUpstream(call, `hintbox: no answer within ${seconds} s; retrying`);
    call.retriesLeft--;
    call.attempts++;
    this.rekey(call);
    const backoffMs = 1000 * 2 ** (call.attempts - 2);
    this.options.log.warn(
      `${call.what} gave no answer within ${seconds} s; idempotent tool of a trusted server: attempt ${call.attempts} in ${backoffMs} ms`,
    );
    call.timer = setTimeout(() => {
      if (!this.pending.has(call)) return;
      this.arm(call);
      this.send(call);
    }, backoffMs);
    call.timer.unref();
  }
}
