import { sha256Hex } from '../util/sha256.js';
import { parseAuditLine, type AuditLine, type AuditRecordError } from './audit-record.js';
import { isoTime } from '../util/iso-time.js';

/**
 * The hash chain of the audit log. Pure: no I/O.
 *
 * Each hintbox process writes one chain, in files `<chain>.<seq>.jsonl` (seq from 000000).
 * Every line carries, last, `prev`: the SHA-256 (hex) of the exact text of the line before it
 * in the chain (its UTF-8 bytes, without the newline); the first line of a file links to the
 * last line of the file it follows, and the very first line of a chain has `prev: null`. The
 * first line of every file is a `log.open` naming its chain and seq. So a line changed,
 * removed, inserted or moved breaks the link of the line after it; a file removed from the
 * middle or the start of a chain breaks the seq numbering. What a chain alone cannot show: its
 * last lines (or last files) cut off, when no `log.close` was written — a process killed
 * looks the same. `hintbox audit verify` prints each chain's head (the hash of its last line)
 * so that it can be kept elsewhere.
 *
 * A line is whole once its newline is written. A last line without one is torn: a write cut
 * off by a crash or a failed write (a full disk), not part of the chain (nothing links to it;
 * the writer's next line, in a new file, links to the line before it). It is reported apart
 * from the breaks: in the newest file of a chain it is where a crash left the chain; in an
 * earlier file the next file must go on from the line before it, or that file breaks. A torn
 * line that something links to, or any line that is not a record, is a break.
 */

/** SHA-256 (hex) of a line's text. */
export function lineHash(text: string): string {
  return sha256Hex(text);
}

/**
 * The text of a line: the record's fields in their order, then `prev` (the same text as
 * `JSON.stringify({ ...fields, prev })`, without copying the object). `fields` must not have
 * `prev` and must have at least one field.
 */
export function frameLine(fields: Record<string, unknown>, prev: string | null): string {
  return frameBody(JSON.stringify(fields).slice(0, -1), prev);
}

/**
 * The text of a line from its fields' JSON text without the closing brace (`{"v":1,…`), then
 * `prev`: what {@link frameLine} writes, for a body built as text.
 */
export function frameBody(body: string, prev: string | null): string {
  return `${body},"prev":${prev === null ? 'null' : `"${prev}"`}}`;
}

/** `<chain>.<seq>.jsonl`: chain is `<yyyymmddThhmmssZ>-<pid>-<8 hex>`, seq six digits. */
const FILE_NAME = /^(\d{8}T\d{6}Z-\d+-[0-9a-f]{8})\.(\d{6})\.jsonl$/;

export function auditFileName(chain: string, seq: number): string {
  return `${chain}.${String(seq).padStart(6, '0')}.jsonl`;
}

/** The chain and seq of an audit file's name, or undefined for a file that is not one. */
export function parseAuditFileName(name: string): { chain: string; seq: number } | undefined {
  const match = FILE_NAME.exec(name);
  return match ? { chain: match[1]!, seq: Number(match[2]) } : undefined;
}

/** A new chain's name: sorts by its start time. */
export function chainName(start: Date, pid: number, random: string): string {
  const stamp = isoTime(start)
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  return `${stamp}-${pid}-${random}`;
}

/** Where a chain does not hold. */
export interface ChainBreak {
  file: string;
  /** 1-based; 0 when the break is about the file as a whole. */
  line: number;
  message: string;
}

export interface ChainSummary {
  chain: string;
  files: number;
  /** Whole lines (torn ones are not counted). */
  lines: number;
  /** SHA-256 of the chain's last line; null when it has none. */
  head: string | null;
  /** The chain ends with `log.close`. */
  closed: boolean;
  breaks: ChainBreak[];
  /** Torn last lines and empty files: where a crash or a failed write stopped a file; not breaks. */
  torn: ChainBreak[];
  /**
   * With checkpoints checked: the records after the chain's last checkpoint of an open chain
   * (the crash window), from `file:line` on; not breaks, and not proven either.
   */
  uncovered?: { file: string; line: number; records: number };
}

/**
 * Checks one chain, fed file by file (in seq order) and line by line. After a break it goes on
 * from the line that is there, so that every place where the chain breaks is reported.
 */
export class ChainVerifier {
  private prev: string | null = null;
  private expectedSeq = 0;
  private file = '';
  private lineNo = 0;
  private lines = 0;
  private files = 0;
  private lastType: string | undefined;
  /** The current file ends with a torn line (or is empty); its tear is noted once the next file or the end shows which kind. */
  private tear: { line: number; bytes: number } | undefined;
  private readonly breaks: ChainBreak[] = [];
  private readonly torn: ChainBreak[] = [];

  constructor(readonly chain: string) {}

  /** The hash of the last line read and how many lines were read: what a checkpoint states. */
  get position(): { head: string | null; records: number } {
    return { head: this.prev, records: this.lines };
  }

  startFile(file: string, seq: number): void {
    this.endFile(false);
    this.file = file;
    this.lineNo = 0;
    this.files++;
    if (seq !== this.expectedSeq) {
      this.fail(
        0,
        seq > this.expectedSeq ? `files ${this.expectedSeq}…${seq - 1} of the chain are missing` : `seq ${seq} again`,
      );
    }
    this.expectedSeq = seq + 1;
  }

  /**
   * The file's last line, that has no newline (`bytes` long): torn, not part of the chain. A
   * line after log.close is a break, torn or not.
   */
  tornLine(bytes: number): void {
    if (this.lastType === 'log.close') this.fail(this.lineNo + 1, 'a line after log.close');
    else this.tear = { line: this.lineNo + 1, bytes };
  }

  /** Checks the next line; returns it parsed, or undefined when it is not a valid line. */
  line(text: string): AuditLine | undefined {
    this.lineNo++;
    this.lines++;
    const hash = lineHash(text);
    const prev = this.prev;
    this.prev = hash;
    let line: AuditLine;
    try {
      line = parseAuditLine(text);
    } catch (error) {
      this.fail(this.lineNo, `not a valid record: ${(error as AuditRecordError).message}`);
      this.lastType = undefined;
      return undefined;
    }
    if (line.prev !== prev) {
      this.fail(
        this.lineNo,
        prev === null
          ? 'prev should be null (the first line of the chain)'
          : `prev does not match the line before it (a line was changed, removed, inserted or moved): expected ${prev.slice(0, 16)}…, found ${line.prev === null ? 'null' : `${line.prev.slice(0, 16)}…`}`,
      );
    }
    if (this.lineNo === 1) {
      const expectedSeq = this.expectedSeq - 1;
      if (line.type !== 'log.open') this.fail(1, 'the first line of a file is not log.open');
      else if (line.chain !== this.chain || line.seq !== expectedSeq) {
        this.fail(
          1,
          `log.open names chain ${line.chain} file ${line.seq}, not this file (${this.chain} ${expectedSeq})`,
        );
      }
    } else if (line.type === 'log.open') {
      this.fail(this.lineNo, 'log.open inside a file');
    }
    if (this.lastType === 'log.close') this.fail(this.lineNo, 'a line after log.close');
    this.lastType = line.type;
    return line;
  }

  end(): ChainSummary {
    this.endFile(true);
    return {
      chain: this.chain,
      files: this.files,
      lines: this.lines,
      head: this.prev,
      closed: this.lastType === 'log.close',
      breaks: this.breaks,
      torn: this.torn,
    };
  }

  /** A torn line or an empty file at the end of the current file: noted, with what it means where it is. */
  private endFile(newest: boolean): void {
    if (this.file === '') return;
    const tear = this.tear ?? (this.lineNo === 0 ? { line: 0, bytes: 0 } : undefined);
    this.tear = undefined;
    if (!tear) return;
    const what =
      tear.line === 0
        ? 'the file is empty: its first line was never written'
        : `the last line is cut short (${tear.bytes} bytes, no newline)`;
    const why = newest
      ? 'a crash (or a failed write) stopped the chain here, or the line is being written; it is not part of the chain'
      : 'a write that failed (a full disk?); the next file goes on from the line before it';
    this.torn.push({ file: this.file, line: tear.line, message: `${what}: ${why}` });
  }

  private fail(line: number, message: string): void {
    this.breaks.push({ file: this.file, line, message });
  }
}
