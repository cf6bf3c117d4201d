import { sign, verify, type KeyObject } from 'node:crypto';
import { lineHash } from './audit-chain.js';

/**
 * A signed checkpoint of one audit chain, one JSON line in the audit folder's
 * `checkpoints.jsonl`: the chain, the checkpoint's number in it (`n`, from 0), why it was taken,
 * the time, how many files and whole lines the chain had, the hash of its last line (`head`),
 * the hash of the chain's previous checkpoint line (`prev`), the signing key's id, and last
 * `sig`: the Ed25519 signature (base64) of the line's text up to `sig`, closed with `}`.
 *
 * The hash chain shows a line changed or removed inside a chain; a checkpoint shows what the
 * chain alone cannot: its tail cut, its newest files deleted, the whole chain rewritten with
 * fresh hashes, a chain forged, and (as `prev` links a chain's checkpoints) a checkpoint removed
 * or an old checkpoints file put back over a closed chain. Pure: no I/O.
 */

export const CHECKPOINTS_FILE = 'checkpoints.jsonl';

/** Why a checkpoint was taken. */
export type CheckpointReason = 'open' | 'rotate' | 'interval' | 'close';
const REASONS: readonly string[] = ['open', 'rotate', 'interval', 'close'];

/** What a checkpoint states about its chain. */
export interface ChainState {
  /** Files of the chain so far (the newest is seq `files - 1`). */
  files: number;
  /** Whole lines written in the chain (log.open lines included). */
  records: number;
  /** SHA-256 of the chain's last whole line; null before its first. */
  head: string | null;
}

export interface Checkpoint extends ChainState {
  v: 1;
  type: 'checkpoint';
  chain: string;
  n: number;
  reason: CheckpointReason;
  time: string;
  /** SHA-256 of this chain's previous checkpoint line; null for its first. */
  prev: string | null;
  key: string;
  sig: string;
}

/** The text of a signed checkpoint line (no newline). */
export function signCheckpoint(fields: Omit<Checkpoint, 'v' | 'type' | 'sig'>, privateKey: KeyObject): string {
  const { chain, n, reason, time, files, records, head, prev, key } = fields;
  const body = JSON.stringify({ v: 1, type: 'checkpoint', chain, n, reason, time, files, records, head, prev, key });
  const sig = sign(null, Buffer.from(body, 'utf8'), privateKey).toString('base64');
  return `${body.slice(0, -1)},"sig":"${sig}"}`;
}

/** A checkpoint line read back: its fields, or why it cannot be one. */
export type ReadCheckpoint = { ok: true; checkpoint: Checkpoint; hash: string } | { ok: false; message: string };

/**
 * Parses a checkpoint line and checks its signature with the public key of the id it names
 * (`keys` by id). Checks the line alone; how it fits its chain is {@link CheckpointSequence}'s.
 */
export function readCheckpoint(text: string, keys: ReadonlyMap<string, KeyObject>): ReadCheckpoint {
  const at = text.lastIndexOf(',"sig":"');
  let fields: Record<string, unknown>;
  try {
    fields = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return { ok: false, message: 'not a checkpoint: not JSON' };
  }
  if (at < 0 || typeof fields.sig !== 'string') return { ok: false, message: 'not a checkpoint: no sig' };
  const body = `${text.slice(0, at)}}`;
  const { sig, ...signed } = fields;
  // The signed text must be the fields as written: no key given twice, nothing after sig.
  if (JSON.stringify(signed) !== body || `${body.slice(0, -1)},"sig":${JSON.stringify(sig)}}` !== text) {
    return { ok: false, message: 'not a checkpoint as hintbox writes one' };
  }
  const c = fields as unknown as Checkpoint;
  const shapeOk =
    c.v === 1 &&
    c.type === 'checkpoint' &&
    typeof c.chain === 'string' &&
    Number.isInteger(c.n) &&
    REASONS.includes(c.reason) &&
    typeof c.time === 'string' &&
    Number.isInteger(c.files) &&
    Number.isInteger(c.records) &&
    (c.head === null || typeof c.head === 'string') &&
    (c.prev === null || typeof c.prev === 'string') &&
    typeof c.key === 'string';
  if (!shapeOk) return { ok: false, message: 'not a checkpoint: a field is missing or of the wrong type' };
  const key = keys.get(c.key);
  if (!key) return { ok: false, message: `signed by key ${c.key}, not one given (a forged or foreign checkpoint?)` };
  if (!verify(null, Buffer.from(body, 'utf8'), key, Buffer.from(sig, 'base64'))) {
    return { ok: false, message: 'the signature does not match: the checkpoint was altered or forged' };
  }
  return { ok: true, checkpoint: c, hash: lineHash(text) };
}

/** A checkpoint and where it was read: a line of the checkpoints file, or the sink. */
export interface CheckpointAt {
  checkpoint: Checkpoint;
  file: string;
  /** 1-based line in `file`; 0 where it has no lines (the sink). */
  line: number;
}

/**
 * The checkpoints of one chain, in file order: checks that each links to the one before (`n`
 * counts up from 0, `prev` is its hash, counts never go back). Problems are reported by line.
 */
export class CheckpointSequence {
  readonly valid: CheckpointAt[] = [];
  readonly problems: { file: string; line: number; message: string }[] = [];
  private lastHash: string | null = null;

  add(at: CheckpointAt, hash: string): void {
    const c = at.checkpoint;
    const last = this.valid.at(-1)?.checkpoint;
    const fail = (message: string): void => void this.problems.push({ file: at.file, line: at.line, message });
    if (c.prev !== this.lastHash)
      fail('prev does not match the checkpoint before it (a checkpoint removed or put back)');
    else if (c.n !== (last ? last.n + 1 : 0)) fail(`checkpoint ${c.n} follows ${last ? last.n : 'none'}`);
    else if (last && (c.records < last.records || c.files < last.files))
      fail('counts lower than the checkpoint before');
    else if (last?.reason === 'close') fail('a checkpoint after the chain was closed');
    this.lastHash = hash;
    this.valid.push(at);
  }
}
