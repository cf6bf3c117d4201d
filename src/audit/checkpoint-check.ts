import type { KeyObject } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { ChainBreak, ChainSummary } from './audit-chain.js';
import { CHECKPOINTS_FILE, CheckpointSequence, readCheckpoint, type CheckpointAt } from './audit-checkpoint.js';
import { auditKeyId } from './audit-key.js';

/**
 * Holds an audit folder's chains against their signed checkpoints (`audit-checkpoint.ts`):
 * every chain must have one, its lines must hash to each checkpoint's head at its count, and
 * it must reach its last checkpoint; a closed chain must be covered whole. Fed the chain's
 * position after each line by the reader; the checkpoints file is read first, whole (one short
 * line per checkpoint).
 */
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

  /** Reads and checks the checkpoints file of `dir` with `publicKeys`. */
  static async read(
    dir: string,
    publicKeys: readonly KeyObject[],
    lines: (file: string) => AsyncIterable<{ text: string; torn?: number }>,
  ): Promise<CheckpointCheck> {
    const check = new CheckpointCheck(dir);
    if (check.missingFile) return check;
    const keys = new Map(publicKeys.map((k) => [auditKeyId(k), k]));
    let line = 0;
    for await (const { text, torn } of lines(check.file)) {
      line++;
      // A checkpoint cut short by a crash is not one; the chain is uncovered from the one before.
      if (torn !== undefined) continue;
      const read = readCheckpoint(text, keys);
      const chain = read.ok ? read.checkpoint.chain : chainNamed(text);
      const sequence = chain === undefined ? undefined : check.sequence(chain);
      if (read.ok) sequence!.add({ checkpoint: read.checkpoint, line }, read.hash);
      else if (sequence) sequence.problems.push({ line, message: read.message });
      else check.stray.push({ file: check.file, line, message: read.message });
    }
    return check;
  }

  /** Follows one chain: `at` is called after each of its lines, `end` with its summary. */
  chain(chain: string): { at(position: Position, file: string, line: number): void; end(summary: ChainSummary): void } {
    this.seen.add(chain);
    const sequence = this.byChain.get(chain);
    const valid = sequence?.valid ?? [];
    const byRecords = new Map<number, CheckpointAt>(valid.map((c) => [c.checkpoint.records, c]));
    const breaks: ChainBreak[] = (sequence?.problems ?? []).map((p) => ({ file: this.file, ...p }));
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
        breaks.push({ file: this.file, line: first.line, message: `chain ${chain} has no files left: deleted` });
      }
      breaks.push(...sequence.problems.map((p) => ({ file: this.file, ...p })));
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
    return `${at.checkpoint.n} (${CHECKPOINTS_FILE}:${at.line}, ${at.checkpoint.time})`;
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
