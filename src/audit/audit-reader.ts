import type { KeyObject } from 'node:crypto';
import { createReadStream, readdirSync } from 'node:fs';
import path from 'node:path';
import { normalizeTag } from '../policy/tool-tags.js';
import { ChainVerifier, parseAuditFileName, type ChainSummary } from './audit-chain.js';
import {
  AuditRecordError,
  parseAuditLine,
  type AuditDecision,
  type AuditLine,
  type AuditOutcome,
  type CallIntentLine,
  type CallOutcomeLine,
} from './audit-record.js';
import { LineSplitter } from './line-splitter.js';
import { CHECKPOINTS_FILE } from './audit-checkpoint.js';
import { CheckpointCheck, type CheckpointAnchor } from './checkpoint-check.js';
import { isoTime } from '../util/iso-time.js';

/**
 * Reading the audit folder: its chains (`audit-chain.ts`), each file streamed line by line, so
 * that memory stays bounded however large the log is — by the calls still without an outcome
 * in one chain, and by the number of records asked for.
 */

/** A chain's files, in seq order. */
export interface AuditChainFiles {
  chain: string;
  files: { file: string; seq: number }[];
}

/** The chains of an audit folder, oldest first (chain names start with their start time). */
export function listAuditChains(dir: string): AuditChainFiles[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const chains = new Map<string, AuditChainFiles>();
  for (const name of names) {
    const parsed = parseAuditFileName(name);
    if (!parsed) continue;
    let chain = chains.get(parsed.chain);
    if (!chain) chains.set(parsed.chain, (chain = { chain: parsed.chain, files: [] }));
    chain.files.push({ file: path.join(dir, name), seq: parsed.seq });
  }
  const list = [...chains.values()].sort((a, b) => (a.chain < b.chain ? -1 : a.chain > b.chain ? 1 : 0));
  for (const chain of list) chain.files.sort((a, b) => a.seq - b.seq);
  return list;
}

/**
 * The lines of a file, without their newlines (split at `\n` only, as written); a last line
 * without one is given last as `torn`, with its length in bytes (see `audit-chain.ts`).
 */
export async function* fileLines(file: string): AsyncGenerator<{ text: string; torn?: number }> {
  const input = createReadStream(file, { highWaterMark: 1 << 20 });
  const splitter = new LineSplitter();
  try {
    for await (const chunk of input as AsyncIterable<Buffer>) {
      for (const { line } of splitter.push(chunk)) yield { text: line.toString('utf8') };
    }
    const rest = splitter.rest();
    if (rest.length > 0) yield { text: rest.toString('utf8'), torn: rest.length };
  } finally {
    input.destroy();
  }
}

/** What {@link verifyAuditLog} checks besides the hash chains. */
export interface VerifyOptions {
  /**
   * Check every chain against its signed checkpoints, with these public keys (`audit-key.ts`):
   * a chain without one, cut, rewritten or forged is a break; an open chain's records after its
   * last checkpoint are `uncovered`. Without: the hash chains alone.
   */
  publicKeys?: readonly KeyObject[];
  /** With `publicKeys`: checkpoints held elsewhere (the sink's), taken before the folder's file. */
  anchor?: CheckpointAnchor;
}

/**
 * Every chain of the folder checked: where each breaks, and its head. With checkpoints checked,
 * problems of the checkpoints file that belong to no chain read are a last summary of their own
 * (chain `checkpoints.jsonl`).
 */
export async function verifyAuditLog(dir: string, options: VerifyOptions = {}): Promise<ChainSummary[]> {
  const checkpoints = options.publicKeys
    ? await CheckpointCheck.read(dir, options.publicKeys, fileLines, options.anchor)
    : undefined;
  const summaries: ChainSummary[] = [];
  for (const chain of listAuditChains(dir)) {
    const verifier = new ChainVerifier(chain.chain);
    const covered = checkpoints?.chain(chain.chain);
    for (const { file, seq } of chain.files) {
      verifier.startFile(file, seq);
      let line = 0;
      for await (const { text, torn } of fileLines(file)) {
        line++;
        if (torn !== undefined) verifier.tornLine(torn);
        else {
          verifier.line(text);
          covered?.at(verifier.position, file, line);
        }
      }
    }
    const summary = verifier.end();
    covered?.end(summary);
    summaries.push(summary);
  }
  const orphans = checkpoints?.orphans() ?? [];
  if (orphans.length) {
    summaries.push({
      chain: CHECKPOINTS_FILE,
      files: 1,
      lines: 0,
      head: null,
      closed: false,
      breaks: orphans,
      torn: [],
    });
  }
  return summaries;
}

// ---------------------------------------------------------------------------------------------
// Querying

/** A call as `hintbox audit` shows it: its intent, with its outcome when one was recorded. */
export interface AuditCallRecord extends Omit<CallIntentLine, 'v' | 'type' | 'prev'> {
  kind: 'call';
  subject: string | null;
  /** Null: no outcome was recorded (hintbox stopped during the call, or it is still running). */
  outcome: AuditOutcome | null;
  detail: string | null;
  hintViolation: string | null;
  attempts: number | null;
  endedAt: string | null;
  durationMs: number | null;
}

/** Any other record (approvals asked and answered, hint violations, sandboxes, pins), as written. */
export interface AuditEventRecord {
  kind: 'event';
  id: string;
  time: string;
  type: string;
  subject: string | null;
  fields: Record<string, unknown>;
}

export type AuditEntry = AuditCallRecord | AuditEventRecord;

/** A filter; every field given must match. */
export interface AuditFilter {
  server?: string;
  tool?: string;
  session?: string;
  /** A profile tag or a server-claimed one (normalised). */
  tag?: string;
  decision?: AuditDecision;
  /** `null` selects calls without an outcome. */
  outcome?: AuditOutcome | null;
  /** Records at or after this time. */
  since?: Date;
  /** Records before this time. */
  until?: Date;
  /** Include events besides calls. Default false. */
  events?: boolean;
}

/** Intents waiting for their outcome, per chain; past this the oldest are given without one. */
const MAX_OPEN_CALLS = 100_000;

function callOf(intent: CallIntentLine, subject: string | null): AuditCallRecord {
  return {
    kind: 'call',
    id: intent.id,
    time: intent.time,
    subject,
    session: intent.session,
    server: intent.server,
    tool: intent.tool,
    tags: intent.tags,
    claimedTags: intent.claimedTags,
    claimedHints: intent.claimedHints,
    effectiveHints: intent.effectiveHints,
    sandbox: intent.sandbox,
    decision: intent.decision,
    decidedBy: intent.decidedBy,
    arguments: intent.arguments,
    pin: intent.pin,
    traceId: intent.traceId ?? null,
    caller: intent.caller ?? null,
    client: intent.client ?? null,
    outcome: null,
    detail: null,
    hintViolation: null,
    attempts: null,
    endedAt: null,
    durationMs: null,
  };
}

function endCall(call: AuditCallRecord, outcome: CallOutcomeLine): void {
  call.outcome = outcome.outcome;
  call.detail = outcome.detail;
  call.hintViolation = outcome.hintViolation;
  call.attempts = outcome.attempts;
  call.endedAt = outcome.time;
  call.durationMs = outcome.durationMs;
}

/** Compiles a filter into a test of intents (before their outcome) and of whole records. */
function matcher(filter: AuditFilter): {
  intent(line: CallIntentLine): boolean;
  event(line: AuditLine): boolean;
  complete(call: AuditCallRecord): boolean;
} {
  const since = filter.since && isoTime(filter.since);
  const until = filter.until && isoTime(filter.until);
  const tag = filter.tag === undefined ? undefined : normalizeTag(filter.tag);
  const common = (line: { time: string } & Record<string, unknown>): boolean =>
    (since === undefined || line.time >= since) &&
    (until === undefined || line.time < until) &&
    (filter.server === undefined || line.server === filter.server) &&
    (filter.tool === undefined || line.tool === filter.tool) &&
    (filter.session === undefined || line.session === filter.session);
  return {
    intent: (line) =>
      common(line) &&
      (filter.decision === undefined || line.decision === filter.decision) &&
      (tag === undefined || line.tags.includes(tag) || line.claimedTags.includes(tag)),
    event: (line) =>
      filter.events === true &&
      filter.decision === undefined &&
      filter.outcome === undefined &&
      tag === undefined &&
      common(line),
    complete: (call) => filter.outcome === undefined || call.outcome === filter.outcome,
  };
}

/**
 * Streams every record matching the filter to `emit`: chain by chain (oldest chain first),
 * each call once its outcome is read (or at the end of its chain, without one), events as read.
 * Lines that are not valid records are skipped and counted (see `hintbox audit verify`).
 */
export async function scanAuditLog(
  dir: string,
  filter: AuditFilter,
  emit: (entry: AuditEntry) => void | Promise<void>,
): Promise<{ skipped: number }> {
  const match = matcher(filter);
  let skipped = 0;
  for (const chain of listAuditChains(dir)) {
    const open = new Map<string, AuditCallRecord>();
    let subject: string | null = null;
    // What `emit` returns (a writer that wants to drain) is awaited: memory stays bounded.
    const complete = (call: AuditCallRecord): void | Promise<void> => (match.complete(call) ? emit(call) : undefined);
    for (const { file } of chain.files) {
      for await (const { text, torn } of fileLines(file)) {
        if (torn !== undefined) continue; // not a record written (see hintbox audit verify)
        let line: AuditLine;
        try {
          line = parseAuditLine(text);
        } catch (error) {
          if (!(error instanceof AuditRecordError)) throw error;
          skipped++;
          continue;
        }
        switch (line.type) {
          case 'log.open':
            subject = typeof line.subject === 'string' ? line.subject : null;
            break;
          case 'log.close':
            break;
          case 'call.intent':
            if (!match.intent(line)) break;
            open.set(line.id, callOf(line, subject));
            if (open.size > MAX_OPEN_CALLS) {
              const [oldestId, oldest] = open.entries().next().value as [string, AuditCallRecord];
              open.delete(oldestId);
              await complete(oldest);
            }
            break;
          case 'call.outcome': {
            const call = open.get(line.callId);
            if (!call) break;
            open.delete(line.callId);
            endCall(call, line);
            await complete(call);
            break;
          }
          default:
            if (match.event(line)) {
              const fields: Record<string, unknown> = { ...line };
              for (const key of ['v', 'id', 'time', 'type', 'prev']) delete fields[key];
              await emit({ kind: 'event', id: line.id, time: line.time, type: line.type, subject, fields });
            }
        }
      }
    }
    for (const call of open.values()) await complete(call);
  }
  return { skipped };
}

/**
 * The newest `limit` matching records, newest first. Memory: at most twice `limit` records
 * besides what {@link scanAuditLog} holds.
 */
export async function newestAuditEntries(
  dir: string,
  filter: AuditFilter,
  limit: number,
): Promise<{ entries: AuditEntry[]; skipped: number }> {
  let kept: AuditEntry[] = [];
  const trim = (): void => {
    kept.sort(newestFirst);
    kept = kept.slice(0, limit);
  };
  const { skipped } = await scanAuditLog(dir, filter, (entry) => {
    kept.push(entry);
    if (kept.length >= 2 * limit) trim();
  });
  trim();
  return { entries: kept, skipped };
}

function newestFirst(a: AuditEntry, b: AuditEntry): number {
  return a.time < b.time ? 1 : a.time > b.time ? -1 : 0;
}
