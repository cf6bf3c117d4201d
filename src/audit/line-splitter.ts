/**
 * Splits bytes into lines at `\n`. Pure framing: whoever reads the file feeds it chunks (which
 * it may reuse: the splitter copies what it keeps). A line that spans chunks is kept as a list
 * of parts and joined once, when its newline comes, so a line of any length costs linear time.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private partBytes = 0;

  /** The whole lines that `chunk` completes, each without its newline; `bytes` counts the newline. */
  *push(chunk: Buffer): Generator<{ line: Buffer; bytes: number }> {
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
      const piece = chunk.subarray(start, nl);
      const line = this.parts.length ? Buffer.concat([...this.parts, piece], this.partBytes + piece.length) : piece;
      const bytes = this.partBytes + piece.length + 1;
      this.parts = [];
      this.partBytes = 0;
      start = nl + 1;
      yield { line, bytes };
    }
    if (start < chunk.length) {
      this.parts.push(Buffer.from(chunk.subarray(start)));
      this.partBytes += chunk.length - start;
    }
  }

  /** What follows the last newline: a line not ended (yet); empty when there is none. */
  rest(): Buffer {
    return Buffer.concat(this.parts, this.partBytes);
  }
}
