import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { canonicalJson } from '../policy/tool-pin.js';

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
}

/** Which part of the binding a state was minted for another value of. */
export type BoundField = 'caller' | 'server' | 'tool' | 'pin' | 'arguments';

/** Why a state was refused. */
export type StateRefusal =
  | { reason: 'malformed' }
  | { reason: 'forged' }
  | { reason: 'expired' }
  | { reason: 'mismatch'; fields: BoundField[] }
  | { reason: 'replayed' };

export interface RequestStatesOptions {
  /** The HMAC key (at least 32 bytes). Default: 32 random bytes, so only this process verifies its states. */
  key?: Uint8Array;
  /** Now, in ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

const PREFIX = 'hbx1';
/** Domain separation: this key signs nothing else under the same text. */
const MAC_DOMAIN = 'hintbox.requestState.v1:';

interface StateBody {
  /** Single-use id. */
  n: string;
  /** Expiry, ms since the epoch. */
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
  };
}

export class RequestStates {
  private readonly key: Uint8Array;
  private readonly now: () => number;
  /** Redeemed ids, with their expiry (kept until then: after it, expiry refuses them anyway). */
  private readonly redeemed = new Map<string, number>();

  constructor(options: RequestStatesOptions = {}) {
    if (options.key && options.key.length < 32) throw new Error('the requestState key must be at least 32 bytes');
    this.key = options.key ?? randomBytes(32);
    this.now = options.now ?? Date.now;
  }

  /** A signed state for `binding`, valid for `ttlMs`, redeemable once. */
  mint(binding: CallBinding, ttlMs: number): string {
    const body: StateBody = { n: randomUUID(), exp: this.now() + ttlMs, b: fieldHashes(binding) };
    const text = Buffer.from(JSON.stringify(body)).toString('base64url');
    return `${PREFIX}.${text}.${this.mac(text).toString('base64url')}`;
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
    if (!(body.exp > now)) return { reason: 'expired' };
    const wanted = fieldHashes(binding);
    const fields = (Object.keys(wanted) as BoundField[]).filter((f) => body.b[f] !== wanted[f]);
    if (fields.length > 0) return { reason: 'mismatch', fields };
    this.forgetExpired(now);
    if (this.redeemed.has(body.n)) return { reason: 'replayed' };
    this.redeemed.set(body.n, body.exp);
    return undefined;
  }

  private mac(text: string): Buffer {
    return createHmac('sha256', this.key).update(MAC_DOMAIN).update(text).digest();
  }

  private forgetExpired(now: number): void {
    for (const [id, exp] of this.redeemed) if (exp <= now) this.redeemed.delete(id);
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
