/** stdout with backpressure: a million lines must not pile up in memory. */
export class LineOutput {
  private buffer = '';
  private waiting: Promise<void> | undefined;

  /** Returns a promise when stdout wants to drain first: the caller awaits it before the next line. */
  write(line: string): Promise<void> | undefined {
    this.buffer += line + '\n';
    return this.buffer.length >= 1 << 16 ? this.flush() : undefined;
  }

  private flush(): Promise<void> | undefined {
    if (this.buffer === '') return undefined;
    const drained = process.stdout.write(this.buffer);
    this.buffer = '';
    if (drained) return undefined;
    this.waiting = new Promise((resolve) => process.stdout.once('drain', () => resolve()));
    return this.waiting;
  }

  async end(): Promise<void> {
    await this.flush();
    await this.waiting;
  }
}
