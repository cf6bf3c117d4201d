import type { Duplex } from 'node:stream';

/**
 * hintbox's end of the gate's control connection (native/hintbox-gate.c): the gate, as the
 * sandbox's first process, stops every other process of the sandbox on `S` and continues them
 * on `C`, and answers each command with one byte, in order (`S`, `C`, or `F` when it could
 * not). While frozen it keeps watching: should anything of the sandbox run all the same (woken
 * by a signal not from hintbox: a POSIX timer's SIGCONT, F_SETSIG), it kills the sandbox whole,
 * sends `B` unasked and exits; every command then fails, and {@link GateControl.onWoken} hears of it. A freeze then costs one round trip over a Unix socket and a few system calls in the
 * sandbox, where the engine's pause API cost two round trips through the engine.
 *
 * Engine-neutral: any engine whose sandboxes start with the gate can freeze them so, whatever
 * the engine offers (a Kubernetes pod has no pause).
 */

/** How long the gate may take to answer (it gives up on a stop itself after 2 s). */
export const GATE_ANSWER_TIMEOUT_MS = 5000;

/** What the gate's unasked `B` means. */
export const WOKEN_MESSAGE = 'ran while frozen: woken by a signal not from hintbox; its sandbox was killed';

export class GateControlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GateControlError';
  }
}

interface Waiting {
  command: string;
  resolve(): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
}

export class GateControl {
  private readonly waiting: Waiting[] = [];
  private ended: Error | undefined;
  private woken: ((error: GateControlError) => void) | undefined;

  constructor(
    private readonly socket: Duplex,
    private readonly timeoutMs = GATE_ANSWER_TIMEOUT_MS,
  ) {
    socket.on('data', (chunk: Buffer) => {
      for (const answer of chunk.toString('latin1')) this.answered(answer);
    });
    const end = (why: string) => () => this.fail(new GateControlError(`the sandbox's gate ${why}`));
    socket.once('close', end('closed its control connection'));
    socket.once('end', end('closed its control connection'));
    socket.on('error', (error: Error) =>
      this.fail(new GateControlError(`the gate's connection failed: ${error.message}`)),
    );
    socket.resume();
  }

  /** Stops every process of the sandbox but the gate; resolves once the gate has seen them all stopped. */
  freeze(): Promise<void> {
    return this.send('S');
  }

  /** Lets them run again. */
  thaw(): Promise<void> {
    return this.send('C');
  }

  /** Calls `listener` (once) when the gate says the sandbox ran while frozen and it killed it. */
  onWoken(listener: (error: GateControlError) => void): void {
    this.woken = listener;
  }

  /** Closes the connection: the gate then kills every process of the sandbox and exits. */
  close(): void {
    this.fail(new GateControlError('the control connection was closed'));
    this.socket.destroy();
  }

  private send(command: 'S' | 'C'): Promise<void> {
    if (this.ended) return Promise.reject(this.ended);
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => this.fail(new GateControlError(`the sandbox's gate did not answer ${command} in ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
      this.waiting.push({ command, resolve, reject, timer });
      this.socket.write(command);
    });
  }

  private answered(answer: string): void {
    if (answer === 'B') {
      // Not an answer, whatever is waiting: the sandbox is dead, and so is every command.
      const error = new GateControlError(WOKEN_MESSAGE);
      const first = this.ended === undefined;
      this.fail(error);
      if (first) this.woken?.(error);
      return;
    }
    const first = this.waiting.shift();
    if (!first) return this.fail(new GateControlError(`the sandbox's gate sent ${JSON.stringify(answer)} unasked`));
    clearTimeout(first.timer);
    if (answer === first.command) return first.resolve();
    const what = first.command === 'S' ? 'stop every process of the sandbox' : 'continue the sandbox';
    first.reject(new GateControlError(`the sandbox's gate could not ${what} (it answered ${JSON.stringify(answer)})`));
  }

  /** Every command waiting and every later one fails with `error` (the first reason wins). */
  private fail(error: Error): void {
    this.ended ??= error;
    for (const w of this.waiting.splice(0)) {
      clearTimeout(w.timer);
      w.reject(this.ended);
    }
  }
}
