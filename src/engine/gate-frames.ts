/**
 * The frames a gate in stdio mode (native/hintbox-gate.c, `HINTBOX_GATE_SOCKET=-`, used over
 * Kubernetes' attach) speaks after the release, in both directions:
 *
 *   'D' LEN (4 bytes, big-endian) BYTES   data: to the server's stdin / from its stdout
 *   'S', 'C'                              hintbox's commands / the gate's answers
 *   'F'                                   the gate could not obey (answer only)
 *   'B'                                   the sandbox ran while frozen; the gate killed it (unasked)
 *
 * The server's stdin and stdout are pipes to the gate, which wraps every byte the server writes
 * in a 'D' frame: nothing the server prints can be read as an answer, and nothing it writes
 * reaches the gate's input. Pure.
 */

const DATA = 0x44; // 'D'
const ANSWERS = new Set(['S', 'C', 'F', 'B']);

/** One 'D' frame carrying `bytes` (empty input: no frame, the gate would read it as nothing). */
export function dataFrame(bytes: Buffer): Buffer {
  if (bytes.length === 0) return bytes;
  const head = Buffer.alloc(5);
  head[0] = DATA;
  head.writeUInt32BE(bytes.length, 1);
  return Buffer.concat([head, bytes]);
}

export class GateFrameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GateFrameError';
  }
}

/**
 * Splits what the gate writes into the server's data and the gate's answers, across chunk
 * boundaries. A byte that starts no known frame throws (the stream is then not the gate's).
 */
export class GateFrameDecoder {
  private head = Buffer.alloc(0);
  private left = 0;

  constructor(
    private readonly onData: (bytes: Buffer) => void,
    private readonly onAnswer: (answer: string) => void,
  ) {}

  push(chunk: Buffer): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.left > 0) {
        const n = Math.min(this.left, chunk.length - i);
        this.onData(chunk.subarray(i, i + n));
        this.left -= n;
        i += n;
      } else if (this.head.length > 0) {
        const n = Math.min(5 - this.head.length, chunk.length - i);
        this.head = Buffer.concat([this.head, chunk.subarray(i, i + n)]);
        i += n;
        if (this.head.length === 5) {
          this.left = this.head.readUInt32BE(1);
          this.head = Buffer.alloc(0);
        }
      } else if (chunk[i] === DATA) {
        this.head = Buffer.from([DATA]);
        i += 1;
      } else {
        const answer = String.fromCharCode(chunk[i] as number);
        if (!ANSWERS.has(answer)) throw new GateFrameError(`the gate sent a byte that starts no frame (${chunk[i]})`);
        this.onAnswer(answer);
        i += 1;
      }
    }
  }
}
