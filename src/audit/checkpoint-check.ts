import type { KeyObject } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { lineHash, type ChainBreak, type ChainSummary } from './audit-chain.js';
import { CHECKPOINTS_FILE, CheckpointSequence, readCheckpoint, type CheckpointAt } from './audit-checkpoint.js';
import { auditKeyId } from './audit-key.js';
import type { AnchoredLine } from './checkpoint-shipper.js';

/**
 * Holds an audit folder's chains against their signed checkpoints (`audit-checkpoint.ts`):
 * every chain must have one, its lines must hash to each checkpoint's head at its count, and
 * it must reach its last checkpoint; a closed chain must be covered whole. Fed the chain's
 * position after each line by the reader; the checkpoints file is read first, whole (one short
 * line per checkpoint).
 *
 * With an anchor (the checkpoints the Postgres sink holds of this folder), the anchor's come
 * first and the file adds only what the sink does not have yet (not shipped yet): a chain
 * deleted with its checkpoint lines, or a folder rolled back, is then held against checkpoints
 * its writer could not touch; checkpoints the sink holds that the file lacks are reported.
 */

/** Checkpoint lines held outside the folder, and what to call that place in a report. */
export interface CheckpointAnchor {
  place: string;
  lines: readonly AnchoredLine[];
}

export class CheckpointCheck {
  private readonly byChain = new Map<string, CheckpointSequence>();
  /** Problems of checkpoint lines that name no chain. */
  private readonly stray: ChainBreak[] = [];
  private readonly file: string;
  private readonly seen = new Set<string>();
  readonly missingFile: boolean;

  private constructor(dir: string) {
    this.file = path.join(dir, CHECKPOINTS_FILE);
    this.missingFile = !existsSync(this.file);
  }

  /** Reads and checks the checkpoints of `dir` (the anchor's, then its file's) with `publicKeys`. */
  static async read(
    dir: string,
    publicKeys: readonly KeyObject[],
    lines: (file: string) => AsyncIterable<{ text: string; torn?: number }>,
    anchor?: CheckpointAnchor,
  ): Promise<CheckpointCheck> {
    const check = new CheckpointCheck(dir);
    const keys = new Map(publicKeys.map((k) => [auditKeyId(k), k]));
    /** The anchor's lines by hash, with the chain each names, until the file shows them. */
    const notInFile = new Map<string, string | undefined>();
    for (const { hash, text } of anchor?.lines ?? []) {
      notInFile.set(hash, check.take(text, { file: anchor!.place, line: 0 }, keys));
    }
    if (!check.missingFile) {
      let line = 0;
      for await (const { text, torn } of lines(check.file)) {
        line++;
        // A checkpoint cut short by a crash is not one; the chain is uncovered from the one before.
        if (torn !== undefined) continue;
        if (anchor && notInFile.delete(lineHash(text))) continue; // taken from the anchor
        check.take(text, { file: check.file, line }, keys);
      }
    }
    check.reportNotInFile(notInFile);
    return check;
  }

  /** Checks one checkpoint line and adds it to its chain's sequence; returns the chain it names. */
  private take(
    text: string,
    at: { file: string; line: number },
    keys: ReadonlyMap<string, KeyObject>,
  ): string | undefined {
    const read = readCheckpoint(text, keys);
    const chain = read.ok ? read.checkpoint.chain : chainNamed(text);
    const sequence = chain === undefined ? undefined : this.sequence(chain);
    if (read.ok) sequence!.add({ checkpoint: read.checkpoint, ...at }, read.hash);
    else if (sequence) sequence.problems.push({ ...at, message: read.message });
    else this.stray.push({ ...at, message: read.message });
    return chain;
  }

  /** The anchor's lines the file lacks: one problem per chain (the file's writers removed them). */
  private reportNotInFile(notInFile: ReadonlyMap<string, string | undefined>): void {
    const byChain = new Map<string | undefined, number>();
    for (const chain of notInFile.values()) byChain.set(chain, (byChain.get(chain) ?? 0) + 1);
    for (const [chain, count] of byChain) {
      const problem = {
        file: this.file,
        line: 0,
        message: `${count} checkpoint line(s)${chain === undefined ? '' : ` of chain ${chain}`} that the sink holds are not in ${CHECKPOINTS_FILE}: removed from it, or the folder rolled back`,
      };
      if (chain === undefined) this.stray.push(problem);
      else this.sequence(chain).problems.push(problem);
    }
  }

  /** Follows one chain: `at` is called after each of its lines, `end` with its summary. */
  chain(chain: string): { at(position: Position, file: string, line: number): void; end(summary: ChainSummary): void } {
    this.seen.add(chain);
    const sequence = this.byChain.get(chain);
    const valid = sequence?.valid ?? [];
    const byRecords = new Map<number, CheckpointAt>(valid.map((c) => [c.checkpoint.records, c]));
    const breaks: ChainBreak[] = [...(sequence?.problems ?? [])];
    const covered = valid.at(-1)?.checkpoint.records ?? 0;
    let last = { file: '', line: 0 };
    let firstUncovered = last;
    return {
      at: (position, file, line) => {
        last = { file, line };
        if (position.records === covered + 1) firstUncovered = last;
        const cp = byRecords.get(position.records);
        if (cp && cp.checkpoint.head !== position.head) {
          breaks.push({
            file,
            line,
            message: `the line does not match checkpoint ${this.where(cp)}: the chain was rewritten`,
          });
        }
      },
      end: (summary) => {
        summary.breaks.push(...breaks, ...this.coverage(summary, valid.at(-1), last, firstUncovered));
      },
    };
  }

  /** Problems of the checkpoints file not tied to a chain that was read: stray lines, chains without files. */
  orphans(): ChainBreak[] {
    const breaks = [...this.stray];
    for (const [chain, sequence] of this.byChain) {
      if (this.seen.has(chain)) continue;
      const first = sequence.valid[0] ?? sequence.problems[0];
      if (first && 'checkpoint' in first) {
        breaks.push({ file: first.file, line: first.line, message: `chain ${chain} has no files left: deleted` });
      }
      breaks.push(...sequence.problems);
    }
    return breaks;
  }

  private coverage(
    summary: ChainSummary,
    last: CheckpointAt | undefined,
    end: { file: string; line: number },
    firstUncovered: { file: string; line: number },
  ): ChainBreak[] {
    const whole = { file: end.file, line: 0 };
    if (!last) {
      const why = this.missingFile ? `${CHECKPOINTS_FILE} is missing` : 'none names it';
      return [
        {
          ...whole,
          message: `no signed checkpoint covers this chain (${why}: checkpoints deleted, or the chain forged)`,
        },
      ];
    }
    const cp = last.checkpoint;
    const records = summary.lines;
    if (records < cp.records || summary.files < cp.files) {
      return [
        {
          ...end,
          message: `checkpoint ${this.where(last)} covers ${cp.records} records in ${cp.files} file(s), the chain has ${records} in ${summary.files}: its tail was cut (lines or files deleted)`,
        },
      ];
    }
    if (records === cp.records) return [];
    if (cp.reason === 'close') return [{ ...end, message: `lines after the closing checkpoint ${this.where(last)}` }];
    if (summary.closed) {
      return [
        {
          ...end,
          message: `log.close is not covered by a checkpoint (the last is ${this.where(last)}): checkpoints were cut, or an old checkpoints file put back`,
        },
      ];
    }
    summary.uncovered = { ...firstUncovered, records: records - cp.records };
    return [];
  }

  private where(at: CheckpointAt): string {
    const place = at.line ? `${CHECKPOINTS_FILE}:${at.line}` : at.file;
    return `${at.checkpoint.n} (${place}, ${at.checkpoint.time})`;
  }

  private sequence(chain: string): CheckpointSequence {
    let sequence = this.byChain.get(chain);
    if (!sequence) this.byChain.set(chain, (sequence = new CheckpointSequence()));
    return sequence;
  }
}

export interface Position {
  head: string | null;
  records: number;
}

/** The chain a line names, when it is JSON with a string `chain`. */
function chainNamed(text: string): string | undefined {
  try {
    const chain = (JSON.parse(text) as { chain?: unknown }).chain;
    return typeof chain === 'string' ? chain : undefined;
  } catch {
    return undefined;
  }
}
