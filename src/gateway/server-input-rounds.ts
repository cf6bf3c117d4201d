import { ErrorCode, type ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';
import { MAX_STATE_TTL_MS, refusalText, type CallBinding, type RequestStates } from '../confirmation/request-state.js';
import { isObject } from '../mcp/json-rpc.js';
import { META_KEY, ownResult, type RoundTrip } from '../protocol/protocol-era.js';

/**
 * A 2025 server's own requests of the client (`elicitation/create`, `sampling/createMessage`)
 * made during a 2026 client's `tools/call`, asked as MCP 2026-07-28 asks: the client's request
 * is answered `input_required` with the server's request under a key of hintbox's, while the
 * server's call stays open upstream (the call's ceiling, `timeouts.call`, still runs, and the
 * question has its own: its state's life); the client's retry carries the answer and the state
 * back, the answer goes to the server, and the same call goes on under the retry's id: it runs
 * once. A caller may have only so many calls parked on questions at once (`ParkedCalls`).
 *
 * The state is hintbox's approvals' (`request-state.ts`: the same signer and single-use store,
 * signed by this process, expiring). It binds the caller, the server, the tool and arguments the
 * retry must repeat, the pending call (a process-unique number, in the pin's place) and the
 * question's key: a retry that answers another call's question (another caller, another call), a
 * replayed one, one whose question is gone (its call ended) or expired answers nothing to the
 * server and is refused. Pure bookkeeping: the relay sends and the broker answers the server.
 */

/** The start of every key hintbox gives a server's question in `inputRequests`. */
export const SERVER_INPUT_PREFIX = 'hintbox.server-input.';

/** A server's request waiting for a 2026 client's retry. */
interface Waiting {
  binding: CallBinding;
  method: string;
  /** The retry's answer: the question ends (its timer, its count) and the server gets it. */
  answered: (answer: Record<string, unknown>) => void;
}

/** What a retry came to: the server's question answered (the call goes on), or refused (why, for the client and the audit). */
export type RetryOutcome =
  { answered: true; method: string; call: number } | { answered: false; method: string | undefined; why: string };

/** The call a question is asked in: who called, which tool with which arguments, and which pending call (its number). */
export interface ParkedCall {
  caller: string;
  tool: string;
  arguments: Record<string, unknown> | undefined;
  call: number;
}

/**
 * The most calls one caller may have parked on their servers' questions at once, over all its
 * gateways (each holds a call open in a sandbox, and its client's request was answered): more
 * are refused to the server, and audited.
 */
export const MAX_PARKED_CALLS_PER_CALLER = 8;

/** How many calls each caller has parked on a server's question, in this process. */
export class ParkedCalls {
  private readonly perCaller = new Map<string, number>();

  constructor(readonly max = MAX_PARKED_CALLS_PER_CALLER) {}

  /** Why `caller` may not park another call now, if it may not. */
  refusal(caller: string): string | undefined {
    if ((this.perCaller.get(caller) ?? 0) < this.max) return undefined;
    return `this caller already has ${this.max} calls waiting for the answers to their servers' questions (the most it may): answer those first`;
  }

  /** How many calls `caller` has parked (all callers: without one). */
  count(caller?: string): number {
    if (caller !== undefined) return this.perCaller.get(caller) ?? 0;
    return [...this.perCaller.values()].reduce((a, b) => a + b, 0);
  }

  take(caller: string): void {
    this.perCaller.set(caller, this.count(caller) + 1);
  }

  leave(caller: string): void {
    const left = this.count(caller) - 1;
    if (left > 0) this.perCaller.set(caller, left);
    else this.perCaller.delete(caller);
  }
}

/** This process's parked calls: the cap holds over every gateway of a caller. */
export const processParkedCalls = new ParkedCalls();

export class ServerInputRounds {
  private readonly waiting = new Map<string, Waiting>();
  private nextKey = 1;

  constructor(
    private readonly server: string,
    private readonly states: RequestStates,
    private readonly parked: ParkedCalls = processParkedCalls,
  ) {}

  /** Why `caller` may not be asked another question now (its parked calls are at the cap), if it may not. */
  refusal(caller: string): string | undefined {
    return this.parked.refusal(caller);
  }

  /**
   * Asks a server's `method` request in `call`: the `input_required` result the client's request
   * is answered with, and the answer its retry brings. The question lives as long as its state
   * (`ttlMs`, at most `MAX_STATE_TTL_MS`): then it is withdrawn and the answer rejected (a
   * timeout), as it is when `signal` aborts (the call ended, the server cancelled, the policy
   * narrowed); a withdrawn question is forgotten and its state used up. Throws when the caller
   * has as many calls parked as it may.
   */
  ask(
    call: ParkedCall,
    method: string,
    params: Record<string, unknown> | undefined,
    ttlMs: number,
    signal: AbortSignal,
  ): { inputRequired: Record<string, unknown>; answer: Promise<Record<string, unknown>> } {
    const refused = this.parked.refusal(call.caller);
    if (refused) throw new Error(refused);
    const key = `${SERVER_INPUT_PREFIX}${this.nextKey++}`;
    const binding = this.bindingOf(call, key);
    const requestState = this.states.mint(binding, ttlMs);
    const lifeMs = Math.min(ttlMs, MAX_STATE_TTL_MS);
    const answer = new Promise<Record<string, unknown>>((resolve, reject) => {
      const end = (): boolean => {
        if (!this.waiting.delete(key)) return false;
        clearTimeout(timer);
        signal.removeEventListener('abort', withdrawn);
        this.parked.leave(call.caller);
        return true;
      };
      const withdraw = (why: Error): void => {
        if (!end()) return;
        // Used up now: a withdrawn question's state would otherwise count against its caller's
        // outstanding states (shared with hintbox's own approvals) until it expires.
        this.states.redeem(requestState, binding);
        reject(why);
      };
      const withdrawn = (): void =>
        withdraw(signal.reason instanceof Error ? signal.reason : new Error('the question was withdrawn'));
      const timer = setTimeout(() => withdraw(unansweredIn(lifeMs)), lifeMs);
      timer.unref();
      this.waiting.set(key, {
        binding,
        method,
        answered: (a) => {
          if (end()) resolve(a);
        },
      });
      this.parked.take(call.caller);
      if (signal.aborted) return withdrawn();
      signal.addEventListener('abort', withdrawn, { once: true });
    });
    const inputRequired = ownResult({
      resultType: 'input_required',
      inputRequests: { [key]: { method, ...(params ? { params } : {}) } },
      requestState,
    });
    return { inputRequired, answer };
  }

  /** Whether a 2026 request's retry answers a server's question (one of its answers has hintbox's server-input key). */
  claims(roundTrip: RoundTrip | undefined): boolean {
    return questionKeyOf(roundTrip) !== undefined;
  }

  /**
   * A retry of `caller` repeating `tool` with `args`: its answer passed to the server's waiting
   * request when its state redeems for exactly that question; else refused, and nothing is
   * answered to the server.
   */
  retry(roundTrip: RoundTrip, caller: string, tool: string, args: Record<string, unknown> | undefined): RetryOutcome {
    const key = questionKeyOf(roundTrip);
    const waiting = key === undefined ? undefined : this.waiting.get(key);
    if (key === undefined || !waiting) {
      return {
        answered: false,
        method: undefined,
        why: 'no question of the server waits for this answer (answered, withdrawn, or its call ended)',
      };
    }
    const given: CallBinding = { ...waiting.binding, caller, tool, arguments: args };
    const refusal = this.states.redeem(roundTrip.requestState, given);
    if (refusal) return { answered: false, method: waiting.method, why: refusalText(refusal) };
    const answers = roundTrip.inputResponses as Record<string, unknown>;
    const answer = answers[key];
    waiting.answered(isObject(answer) ? answer : {});
    return { answered: true, method: waiting.method, call: callOf(waiting.binding) };
  }

  private bindingOf(call: ParkedCall, key: string): CallBinding {
    return {
      caller: call.caller,
      server: this.server,
      tool: call.tool,
      // The pending call, not a definition: a state for a server's question never passes for an approval's.
      pinHash: `server-input:${call.call}`,
      arguments: call.arguments,
      question: key,
    };
  }
}

/** The error a server gets when its question expired unanswered (a timeout, as a 2025 client's request gives). */
function unansweredIn(lifeMs: number): Error {
  const seconds = Math.round(lifeMs / 100) / 10;
  const error = new Error(`no answer to the question within ${seconds} s (its requestState expired): withdrawn`);
  return Object.assign(error, { code: ErrorCode.RequestTimeout });
}

function callOf(binding: CallBinding): number {
  return Number(binding.pinHash.slice('server-input:'.length));
}

/** The key of the server's question a retry answers: its one `inputResponses` key of hintbox's server-input kind. */
function questionKeyOf(roundTrip: RoundTrip | undefined): string | undefined {
  const answers = roundTrip?.inputResponses;
  if (!isObject(answers)) return undefined;
  return Object.keys(answers).find((k) => k.startsWith(SERVER_INPUT_PREFIX));
}

/** The capabilities a 2026 request's envelope declares (its era has no `initialize`). */
export function envelopeCapabilities(params: unknown): ClientCapabilities {
  const meta = isObject(params) ? params._meta : undefined;
  const capabilities = isObject(meta) ? meta[META_KEY.clientCapabilities] : undefined;
  return isObject(capabilities) ? capabilities : {};
}
