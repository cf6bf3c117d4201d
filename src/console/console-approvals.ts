import { callerKey, type Caller } from '../util/caller-identity.js';
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ToolHints } from '../policy/hints.js';
import { canonicalJson } from '../policy/tool-pin.js';

/**
 * The console's confirmations: every call waiting for a person, as the console's pages show it,
 * and the person's answers. Two ways a call waits:
 * - `held`: the call is held open while the person is asked (the client's elicitation, if any,
 *   runs beside the page; the first answer wins);
 * - `repeat`: the client can be asked nothing, so the call was denied with the page's link; an
 *   approval there lets the same call (same session, caller, tool, pin and arguments' digest),
 *   repeated within `grantWindowMs`, run once. A decline is kept the same way: the repeated call
 *   is denied as the person's, once.
 * No I/O but the clock and random tokens (both injectable): the HTTP side is `console-server.ts`.
 */

export type ConsoleAnswer = 'approved' | 'declined' | 'timeout';

/** What a confirmation page shows, fixed when the call asks. Every string is the server's or the client's (unrendered). */
export interface ApprovalRequest {
  server: string;
  session: string;
  /** The caller under `hintbox serve` (subject and client); null on stdio. */
  caller: Caller | null;
  tool: string;
  tags: readonly string[];
  /** The sandbox class the call would run in, and what it may do. */
  sandbox: string;
  sandboxGrant: string;
  effectiveHints: ToolHints;
  /** hintbox's own texts (warnings, why the person is asked). */
  warnings: readonly string[];
  reasons: readonly string[];
  /** Why the server is no longer trusted in this session, when it broke a hint. */
  untrustedBecause?: string;
  arguments: Record<string, unknown>;
  pinHash: string;
  /** The dry run's changes (server-made text), or one line saying why there is none. */
  preview: { available: true; text: string } | { available: false; reason: string };
}

export interface PendingApproval {
  readonly id: string;
  /** The page of this confirmation, with the token that opens it (and only it). */
  readonly link: string;
  /** The person's answer, or `timeout`. Never rejects. */
  readonly answer: Promise<ConsoleAnswer>;
  /** The call does not wait any more (answered elsewhere, cancelled): the page says so. */
  withdraw(why: string): void;
}

/** One confirmation as the pages list it. */
export interface ApprovalEntry {
  id: string;
  mode: 'held' | 'repeat';
  request: ApprovalRequest;
  askedAt: Date;
  /** When an unanswered confirmation times out. */
  expiresAt: Date;
  state: 'pending' | 'approved' | 'declined' | 'timeout' | 'withdrawn';
  answeredAt?: Date;
  /** Why it was withdrawn. */
  note?: string;
}

export interface ConsoleApprovalsOptions {
  /** The console's address, e.g. `http://127.0.0.1:41234` (links are made from it). */
  origin: string;
  /** Signs the per-confirmation tokens (the console's secret). */
  secret: Buffer;
  now?: () => number;
  /** How long a `repeat` confirmation waits for the person. Default 10 minutes. */
  repeatWaitMs?: number;
  /** How long an answer given on the page holds for the repeated call. Default 5 minutes. */
  grantWindowMs?: number;
  /** Answered confirmations kept for the pages. Default 100. */
  keepAnswered?: number;
  /** Confirmations waiting at once; beyond, the oldest `repeat` one times out. Default 200. */
  maxPending?: number;
  /** Told of every answer given on a page (for the audit trail). */
  onAnswered?: (entry: ApprovalEntry) => void;
}

interface Waiting extends ApprovalEntry {
  resolve(answer: ConsoleAnswer): void;
  timer: NodeJS.Timeout;
  /** The grant key of a `repeat` confirmation. */
  key?: string;
}

interface Grant {
  id: string;
  answer: 'approved' | 'declined';
  until: number;
}

export class ConsoleApprovals {
  private readonly entries = new Map<string, Waiting>();
  private readonly grants = new Map<string, Grant>();
  private readonly now: () => number;

  constructor(private readonly options: ConsoleApprovalsOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * A call waits for a person. `timeoutMs` for a held call (the profile's approval timeout); a
   * `repeat` one waits `repeatWaitMs`.
   */
  open(request: ApprovalRequest, mode: 'held' | 'repeat', timeoutMs: number): PendingApproval {
    this.makeRoom();
    const id = randomBytes(9).toString('base64url');
    const wait = mode === 'repeat' ? (this.options.repeatWaitMs ?? 10 * 60_000) : timeoutMs;
    const askedAt = this.now();
    let resolve!: (answer: ConsoleAnswer) => void;
    const answer = new Promise<ConsoleAnswer>((r) => (resolve = r));
    const entry: Waiting = {
      id,
      mode,
      request,
      askedAt: new Date(askedAt),
      expiresAt: new Date(askedAt + wait),
      state: 'pending',
      resolve,
      timer: setTimeout(() => this.settle(entry, 'timeout'), wait),
      ...(mode === 'repeat' ? { key: grantKey(request) } : {}),
    };
    entry.timer.unref();
    this.entries.set(id, entry);
    return {
      id,
      link: `${this.options.origin}/approvals/${id}?token=${this.tokenFor(id)}`,
      answer,
      withdraw: (why) => {
        if (entry.state !== 'pending') return;
        entry.note = why;
        this.settle(entry, 'withdrawn');
      },
    };
  }

  /** The person's answer from a page. False when there is no such confirmation waiting. */
  answer(id: string, answer: 'approved' | 'declined'): boolean {
    const entry = this.entries.get(id);
    if (!entry || entry.state !== 'pending') return false;
    this.settle(entry, answer);
    return true;
  }

  /**
   * A repeated call's answer from the page, used once: the approval (or decline) of the same
   * call — same session, caller, tool, pin and arguments — within the grant window.
   */
  takeAnswer(
    request: Pick<ApprovalRequest, 'server' | 'session' | 'caller' | 'tool' | 'pinHash' | 'arguments'>,
  ): { id: string; answer: 'approved' | 'declined' } | undefined {
    const key = grantKey(request);
    const grant = this.grants.get(key);
    if (!grant) return undefined;
    this.grants.delete(key);
    if (grant.until < this.now()) return undefined;
    return { id: grant.id, answer: grant.answer };
  }

  /** A `repeat` confirmation of this very call still waiting: its link is given again, not a new one. */
  waitingFor(
    request: Pick<ApprovalRequest, 'server' | 'session' | 'caller' | 'tool' | 'pinHash' | 'arguments'>,
  ): string | undefined {
    const key = grantKey(request);
    for (const entry of this.entries.values()) {
      if (entry.state === 'pending' && entry.key === key) {
        return `${this.options.origin}/approvals/${entry.id}?token=${this.tokenFor(entry.id)}`;
      }
    }
    return undefined;
  }

  get(id: string): ApprovalEntry | undefined {
    return this.entries.get(id);
  }

  /** Every confirmation kept, newest first. */
  list(): ApprovalEntry[] {
    return [...this.entries.values()].reverse();
  }

  /** The token of one confirmation's page: it opens that page and answers it, nothing else. */
  tokenFor(id: string): string {
    return approvalToken(this.options.secret, id);
  }

  /** Whether `token` opens the page of confirmation `id`. */
  opens(id: string, token: string): boolean {
    return sameText(token, this.tokenFor(id));
  }

  /** Ends every wait (the console closes): held calls are declined as timed out. */
  close(): void {
    for (const entry of this.entries.values()) if (entry.state === 'pending') this.settle(entry, 'timeout');
  }

  private settle(entry: Waiting, state: Exclude<ApprovalEntry['state'], 'pending'>): void {
    if (entry.state !== 'pending') return;
    clearTimeout(entry.timer);
    entry.state = state;
    entry.answeredAt = new Date(this.now());
    entry.resolve(state === 'withdrawn' ? 'timeout' : state);
    if ((state === 'approved' || state === 'declined') && entry.key) {
      this.grants.set(entry.key, {
        id: entry.id,
        answer: state,
        until: this.now() + (this.options.grantWindowMs ?? 5 * 60_000),
      });
    }
    if (state === 'approved' || state === 'declined') this.options.onAnswered?.(entry);
    this.trimAnswered();
  }

  private makeRoom(): void {
    const max = this.options.maxPending ?? 200;
    const pending = [...this.entries.values()].filter((e) => e.state === 'pending');
    for (const entry of pending.filter((e) => e.mode === 'repeat').slice(0, Math.max(0, pending.length - max + 1))) {
      this.settle(entry, 'timeout');
    }
    const now = this.now();
    for (const [key, grant] of this.grants) if (grant.until < now) this.grants.delete(key);
  }

  private trimAnswered(): void {
    const answered = [...this.entries.values()].filter((e) => e.state !== 'pending');
    for (const entry of answered.slice(0, Math.max(0, answered.length - (this.options.keepAnswered ?? 100)))) {
      this.entries.delete(entry.id);
    }
  }
}

/**
 * The call an answer on the page is bound to: who, what, against which definition, with which
 * arguments; and in which session, unless `inSession` is false (a console that outlives the runs:
 * the next run's call is the same call).
 */
export function grantKey(
  request: Pick<ApprovalRequest, 'server' | 'caller' | 'tool' | 'pinHash' | 'arguments'> & { session?: string },
  inSession = true,
): string {
  return createHash('sha256')
    .update(
      canonicalJson([
        request.server,
        inSession ? (request.session ?? null) : null,
        callerKey(request.caller),
        request.tool,
        request.pinHash,
        request.arguments,
      ]),
    )
    .digest('hex');
}

/** The token of one confirmation's page: it opens that page and answers it, nothing else. */
export function approvalToken(secret: Buffer, id: string): string {
  return createHmac('sha256', secret).update(`approval:${id}`).digest('base64url');
}

/** Compares two secrets in constant time (for their length). */
export function sameText(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
