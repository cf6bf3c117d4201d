import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { canonicalJson } from '../policy/tool-pin.js';
import { monotonicMs } from '../util/clock.js';

/**
 * The `requestState` of a confirmation asked as `input_required` (MCP 2026-07-28): what lets a
 * client's retry carry the person's answer back to exactly the call that was asked about.
 *
 * The client holds the state between the two requests, so it is attacker-controlled input on
 * the way back. It is therefore signed (HMAC-SHA256 under a key of this process: a state minted
 * by another process, or altered in one byte, does not verify), it expires (the time a person
 * has to answer), it binds the call (the caller, the server, the tool, the pin of its definition
 * and the canonical hash of its arguments: a retry that differs in any of them is another call),
 * and it is redeemed once (a replayed state runs nothing). It authenticates nobody: the caller
 * is whoever the connection says, and the state only has to match them.
 *
 * What a client can make the process hold is bounded: a state lives at most `MAX_STATE_TTL_MS`
 * whatever the approval timeout, and only outstanding states (asked, not yet answered nor
 * expired) are remembered, at most `maxPerCaller` per caller and `maxTotal` in all; past a cap
 * no state is minted (the call is refused). A redeemed state leaves no record: it is no longer
 * outstanding, which is what refuses its replay. Time is monotonic (`monotonicMs`): a wall clock
 * stepped forward then back can neither expire nor revive a state (states die with the process
 * anyway, since its key does).
 */

/** The call a state is bound to. */
export interface CallBinding {
  /** The authenticated principal (`hintbox serve`: subject and client), or `stdio` for `hintbox run`. */
  caller: string;
  server: string;
  tool: string;
  /** The hash of the tool's pinned definition. */
  pinHash: string;
  /** The call's arguments (hashed canonically: key order does not matter, every value does). */
  arguments: Record<string, unknown> | undefined;
  /**
   * What the person was shown besides the call (why they are asked, the warnings, the server's
   * trust), canonically hashed: an answer given to another question does not count. Default: none.
   */
  question?: unknown;
}

/** Which part of the binding a state was minted for another value of. */
export type BoundField = 'caller' | 'server' | 'tool' | 'pin' | 'arguments' | 'question';

/** Why a state was refused. */
export type StateRefusal =
  | { reason: 'malformed' }
  | { reason: 'forged' }
  | { reason: 'expired' }
  | { reason: 'mismatch'; fields: BoundField[] }
  | { reason: 'replayed' };

/** Why no state was minted: the caller, or the process, has as many outstanding as it may. */
export interface MintRefusal {
  reason: 'too-many';
  /** Whose cap was reached, and what it is. */
  cap: 'caller' | 'total';
  limit: number;
}

/** The longest a state lives, whatever the approval timeout says: 10 minutes. */
export const MAX_STATE_TTL_MS = 10 * 60_000;

export interface RequestStatesOptions {
  /** The HMAC key (at least 32 bytes). Default: 32 random bytes, so only this process verifies its states. */
  key?: Uint8Array;
  /** Now, in ms on a clock that only moves forward. Default `monotonicMs`. */
  now?: () => number;
  /** Outstanding states a caller may have (asked, neither redeemed nor expired). Default 100. */
  maxPerCaller?: number;
  /** Outstanding states of the whole process. Default 10,000. */
  maxTotal?: number;
}

/** How often, at most, expired states are swept (in ms): a sweep is never paid per request. */
const SWEEP_EVERY_MS = 1000;

const PREFIX = 'hbx1';
/** Domain separation: this key signs nothing else under the same text. */
const MAC_DOMAIN = 'hintbox.requestState.v1:';

interface StateBody {
  /** Single-use id. */
  n: string;
  /** Expiry, on this process's monotonic clock. */
  exp: number;
  /** A hash per bound field (the values themselves are not in the state). */
  b: Record<BoundField, string>;
}

function fieldHashes(binding: CallBinding): Record<BoundField, string> {
  const h = (value: string): string => createHash('sha256').update(value).digest('base64url').slice(0, 22);
  return {
    caller: h(binding.caller),
    server: h(binding.server),
    tool: h(binding.tool),
    pin: h(binding.pinHash),
    arguments: h(canonicalJson(binding.arguments ?? {})),
    question: h(canonicalJson(binding.question ?? null)),
  };
}

/** A state minted and not yet redeemed: whose it is (for the caps) and when it expires. */
interface Outstanding {
  caller: string;
  exp: number;
}

export class RequestStates {
  private readonly key: Uint8Array;
  private readonly now: () => number;
  private readonly maxPerCaller: number;
  private readonly maxTotal: number;
  /** States minted and not yet redeemed, by id: only these redeem (a redeemed one is forgotten). */
  private readonly outstanding = new Map<string, Outstanding>();
  /** How many of them each caller has. */
  private readonly perCaller = new Map<string, number>();
  private nextSweep = -Infinity;

  constructor(options: RequestStatesOptions = {}) {
    if (options.key && options.key.length < 32) throw new Error('the requestState key must be at least 32 bytes');
    this.key = options.key ?? randomBytes(32);
    this.now = options.now ?? monotonicMs;
    this.maxPerCaller = options.maxPerCaller ?? 100;
    this.maxTotal = options.maxTotal ?? 10_000;
  }

  /** How many states are outstanding (minted, neither redeemed nor swept after their expiry). */
  get size(): number {
    return this.outstanding.size;
  }

  /** A signed state for `binding` (see `tryMint`); throws when a cap is reached. */
  mint(binding: CallBinding, ttlMs: number): string {
    const minted = this.tryMint(binding, ttlMs);
    if ('refused' in minted) throw new Error(mintRefusalText(minted.refused));
    return minted.state;
  }

  /**
   * A signed state for `binding`, valid for `ttlMs` (at most `MAX_STATE_TTL_MS`), redeemable
   * once; or, when its caller or the process has as many outstanding as it may, why none is.
   */
  tryMint(binding: CallBinding, ttlMs: number): { state: string } | { refused: MintRefusal } {
    const now = this.now();
    this.sweep(now);
    if (this.outstanding.size >= this.maxTotal)
      return { refused: { reason: 'too-many', cap: 'total', limit: this.maxTotal } };
    const held = this.perCaller.get(binding.caller) ?? 0;
    if (held >= this.maxPerCaller) {
      return { refused: { reason: 'too-many', cap: 'caller', limit: this.maxPerCaller } };
    }
    const body: StateBody = {
      n: randomUUID(),
      exp: now + Math.min(ttlMs, MAX_STATE_TTL_MS),
      b: fieldHashes(binding),
    };
    this.outstanding.set(body.n, { caller: binding.caller, exp: body.exp });
    this.perCaller.set(binding.caller, held + 1);
    const text = Buffer.from(JSON.stringify(body)).toString('base64url');
    return { state: `${PREFIX}.${text}.${this.mac(text).toString('base64url')}` };
  }

  /**
   * Redeems `state` for the call `binding`: undefined when it is this process's, unexpired,
   * minted for exactly this call and not redeemed before (it is redeemed now); else why not.
   * A state refused for another reason is not used up (its rightful call may still come).
   */
  redeem(state: unknown, binding: CallBinding): StateRefusal | undefined {
    if (typeof state !== 'string' || state.length > 4096) return { reason: 'malformed' };
    const [prefix, text, mac, extra] = state.split('.');
    if (prefix !== PREFIX || !text || !mac || extra !== undefined) return { reason: 'malformed' };
    const given = Buffer.from(mac, 'base64url');
    const expected = this.mac(text);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { reason: 'forged' };
    const body = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as StateBody;
    const now = this.now();
    if (!(body.exp > now)) {
      this.forget(body.n);
      return { reason: 'expired' };
    }
    const wanted = fieldHashes(binding);
    const fields = (Object.keys(wanted) as BoundField[]).filter((f) => body.b[f] !== wanted[f]);
    if (fields.length > 0) return { reason: 'mismatch', fields };
    // Signed by us, unexpired, and not outstanding: it was redeemed before.
    if (!this.forget(body.n)) return { reason: 'replayed' };
    return undefined;
  }

  private mac(text: string): Buffer {
    return createHmac('sha256', this.key).update(MAC_DOMAIN).update(text).digest();
  }

  /** Forgets an outstanding state; false when it was not (redeemed, or swept after its expiry). */
  private forget(id: string): boolean {
    const entry = this.outstanding.get(id);
    if (!entry) return false;
    this.outstanding.delete(id);
    const left = (this.perCaller.get(entry.caller) ?? 1) - 1;
    if (left > 0) this.perCaller.set(entry.caller, left);
    else this.perCaller.delete(entry.caller);
    return true;
  }

  /** Forgets the expired states, at most once every `SWEEP_EVERY_MS` (so its cost is shared by many mints). */
  private sweep(now: number): void {
    if (now < this.nextSweep) return;
    this.nextSweep = now + SWEEP_EVERY_MS;
    for (const [id, entry] of this.outstanding) if (entry.exp <= now) this.forget(id);
  }
}

/**
 * This process's states: one key for every session it serves, so a state is redeemed where it
 * was minted and nowhere else (a deployment of several processes needs a shared key: not yet).
 */
export const processRequestStates = new RequestStates();

/** A refusal in words, for the client's answer and the audit trail. */
export function refusalText(refusal: StateRefusal): string {
  switch (refusal.reason) {
    case 'malformed':
      return 'its requestState is not one hintbox issued (malformed)';
    case 'forged':
      return 'its requestState does not verify (altered, forged, or issued by another hintbox process)';
    case 'expired':
      return 'its requestState expired (the confirmation was not answered in time)';
    case 'mismatch':
      return `its requestState was issued for another call (different ${refusal.fields.join(', ')})`;
    case 'replayed':
      return 'its requestState was already used (a confirmation approves one call, once)';
  }
}

/** A refusal to mint, in words: the one line the refused call's client is given. */
export function mintRefusalText(refusal: MintRefusal): string {
  return refusal.cap === 'caller'
    ? `this caller already has ${refusal.limit} confirmations waiting for an answer (the most it may): answer those first, or let them expire`
    : `hintbox already has ${refusal.limit} confirmations waiting for an answer (the most it keeps): try again later`;
}
