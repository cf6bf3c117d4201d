import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { writeFileAtomic } from '../util/atomic-write.js';
import {
  approvalToken,
  grantKey,
  sameText,
  type ApprovalEntry,
  type ApprovalRequest,
  type ConsoleAnswer,
  type PendingApproval,
} from './console-approvals.js';
import { isoTime } from '../util/iso-time.js';

/**
 * The console's confirmations kept in files, for a console that outlives the runs (`hintbox
 * console`): a run whose client exits after each call (a script, Inspector's CLI) leaves its
 * confirmation here, the person answers it on the console's page after that run is gone, and
 * the next run of the same call takes the answer, once, within the grant window.
 *
 * Layout, in `<state>/console/` (hintbox's own folder: never mounted into a sandbox):
 * - `console.json`: the console's address, pid and secret (0600), while it runs;
 * - `entries/<id>.json`: a confirmation as its page shows it, and its state;
 * - `grants/<key>.json`: an answer given, for the call it is bound to. The key is the call's
 *   server, caller, tool, pin and arguments, without the session: the next run's call is the
 *   same call. Taken by renaming it away (one reader wins), then checked against its window.
 * A held call (a client that waits) polls its entry for the answer.
 */

export interface SharedApprovalsOptions {
  /** `<state>/console`. */
  dir: string;
  origin: string;
  secret: Buffer;
  now?: () => number;
  /** How long a `repeat` confirmation waits for the person. Default 10 minutes. */
  repeatWaitMs?: number;
  /** How long an answer holds for the repeated call. Default 5 minutes. */
  grantWindowMs?: number;
  /** How often a held call looks for its answer. Default 250 ms. */
  pollMs?: number;
}

interface StoredEntry extends Omit<ApprovalEntry, 'askedAt' | 'expiresAt' | 'answeredAt'> {
  askedAt: string;
  expiresAt: string;
  answeredAt?: string;
  key: string;
}

interface StoredGrant {
  id: string;
  answer: 'approved' | 'declined';
  until: number;
}

/** Entries kept after they are answered or expired (for the pages), then removed. */
const KEEP_MS = 60 * 60_000;

export class SharedApprovals {
  private readonly now: () => number;

  constructor(private readonly options: SharedApprovalsOptions) {
    this.now = options.now ?? Date.now;
    for (const sub of ['entries', 'grants']) mkdirSync(path.join(options.dir, sub), { recursive: true, mode: 0o700 });
  }

  /** A call waits for a person: its page is written for the console to show. */
  open(request: ApprovalRequest, mode: 'held' | 'repeat', timeoutMs: number): PendingApproval {
    this.prune();
    const id = randomBytes(9).toString('base64url');
    const askedAt = this.now();
    const wait = mode === 'repeat' ? (this.options.repeatWaitMs ?? 10 * 60_000) : timeoutMs;
    const key = grantKey(request, false);
    const entry: StoredEntry = {
      id,
      mode,
      request,
      key,
      state: 'pending',
      askedAt: isoTime(askedAt),
      expiresAt: isoTime(askedAt + wait),
    };
    this.write(entry);
    let stop = (_state: ConsoleAnswer): void => undefined;
    const answer = new Promise<ConsoleAnswer>((resolve) => {
      const timer = setInterval(() => {
        const now = this.read(id);
        if (now && now.state !== 'pending') stop(now.state === 'withdrawn' ? 'timeout' : now.state);
        else if (this.now() >= askedAt + wait) stop('timeout');
      }, this.options.pollMs ?? 250);
      timer.unref();
      stop = (state) => {
        clearInterval(timer);
        resolve(state);
      };
    });
    return {
      id,
      link: this.linkFor(id),
      answer,
      withdraw: (why) => {
        const now = this.read(id);
        if (now?.state === 'pending') this.write({ ...now, state: 'withdrawn', note: why });
        stop('timeout');
      },
    };
  }

  /** The person's answer from a page: the entry says it, and a repeated call may take it. */
  answer(id: string, answer: 'approved' | 'declined'): boolean {
    const entry = this.read(id);
    if (!entry || entry.state !== 'pending' || Date.parse(entry.expiresAt) < this.now()) return false;
    this.write({ ...entry, state: answer, answeredAt: isoTime(this.now()) });
    if (entry.mode === 'repeat') {
      const grant: StoredGrant = { id, answer, until: this.now() + (this.options.grantWindowMs ?? 5 * 60_000) };
      writeFileAtomic(this.grantFile(entry.key), JSON.stringify(grant), 0o600);
    }
    return true;
  }

  /** The answer to this very call (any session), used once, within its window. */
  takeAnswer(
    request: Pick<ApprovalRequest, 'server' | 'caller' | 'tool' | 'pinHash' | 'arguments'>,
  ): { id: string; answer: 'approved' | 'declined' } | undefined {
    const file = this.grantFile(grantKey(request, false));
    const taken = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.taken`;
    try {
      renameSync(file, taken); // one taker wins: the file is gone for any other
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    try {
      const grant = JSON.parse(readFileSync(taken, 'utf8')) as StoredGrant;
      return grant.until < this.now() ? undefined : { id: grant.id, answer: grant.answer };
    } finally {
      rmSync(taken, { force: true });
    }
  }

  /** A `repeat` confirmation of this very call still waiting: its link, not a new one. */
  waitingFor(
    request: Pick<ApprovalRequest, 'server' | 'caller' | 'tool' | 'pinHash' | 'arguments'>,
  ): string | undefined {
    const key = grantKey(request, false);
    const now = this.now();
    const waiting = this.entries().find(
      (e) => e.key === key && e.mode === 'repeat' && e.state === 'pending' && Date.parse(e.expiresAt) > now,
    );
    return waiting && this.linkFor(waiting.id);
  }

  get(id: string): ApprovalEntry | undefined {
    const entry = this.read(id);
    return entry && this.shown(entry);
  }

  /** Every confirmation kept, newest first. */
  list(): ApprovalEntry[] {
    return this.entries()
      .sort((a, b) => b.askedAt.localeCompare(a.askedAt))
      .map((e) => this.shown(e));
  }

  tokenFor(id: string): string {
    return approvalToken(this.options.secret, id);
  }

  opens(id: string, token: string): boolean {
    return sameText(token, this.tokenFor(id));
  }

  /** Nothing to end: the confirmations stay for the next console. */
  close(): void {}

  private linkFor(id: string): string {
    return `${this.options.origin}/approvals/${id}?token=${this.tokenFor(id)}`;
  }

  /** As the pages show it: a pending one past its time has timed out. */
  private shown(entry: StoredEntry): ApprovalEntry {
    const expired = entry.state === 'pending' && Date.parse(entry.expiresAt) < this.now();
    return {
      id: entry.id,
      mode: entry.mode,
      request: entry.request,
      askedAt: new Date(entry.askedAt),
      expiresAt: new Date(entry.expiresAt),
      state: expired ? 'timeout' : entry.state,
      ...(entry.answeredAt ? { answeredAt: new Date(entry.answeredAt) } : {}),
      ...(entry.note ? { note: entry.note } : {}),
    };
  }

  private entries(): StoredEntry[] {
    return readdirSync(path.join(this.options.dir, 'entries'))
      .filter((name) => /^[A-Za-z0-9_-]{1,64}\.json$/.test(name))
      .flatMap((name) => this.read(name.slice(0, -'.json'.length)) ?? []);
  }

  /** Entries answered or expired more than an hour ago, and grants past their window, go. */
  private prune(): void {
    const now = this.now();
    for (const entry of this.entries()) {
      if (Date.parse(entry.answeredAt ?? entry.expiresAt) + KEEP_MS < now)
        rmSync(this.entryFile(entry.id), { force: true });
    }
  }

  private read(id: string): StoredEntry | undefined {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) return undefined;
    try {
      return JSON.parse(readFileSync(this.entryFile(id), 'utf8')) as StoredEntry;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' || error instanceof SyntaxError) return undefined;
      throw error;
    }
  }

  private write(entry: StoredEntry): void {
    writeFileAtomic(this.entryFile(entry.id), JSON.stringify(entry), 0o600);
  }

  private entryFile(id: string): string {
    return path.join(this.options.dir, 'entries', `${id}.json`);
  }

  private grantFile(key: string): string {
    return path.join(this.options.dir, 'grants', `${key}.json`);
  }
}
