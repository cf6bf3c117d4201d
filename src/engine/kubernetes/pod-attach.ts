import { timingSafeEqual } from 'node:crypto';
import { Duplex, PassThrough, Writable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node/dist/config.js';
// Not re-exported by the package's index; the attach channels' one implementation there.
import { WebSocketHandler } from '@kubernetes/client-node/dist/web-socket-handler.js';
import { NdjsonTransport } from '../../mcp/ndjson-transport.js';
import { HintboxError } from '../../util/hintbox-error.js';
import { GateControl } from '../gate-control.js';
import { dataFrame, GateFrameDecoder } from '../gate-frames.js';

/**
 * hintbox's channel to a sandbox Pod's gate over the API's attach (a WebSocket, the
 * `channel.k8s.io` subprotocols: one byte of stream number, then the bytes; 0 stdin, 1 stdout,
 * 2 stderr, 3 the API's status). The gate, run with `HINTBOX_GATE_SOCKET=-`, waits for one
 * byte, `?`, on stdin, answers with its token line on stdout, and waits for one byte, `G`, before
 * it executes the server: the same hold/release handshake as over the Docker engine's socket,
 * with no pod network involved. The gate speaks only when asked because an attach carries only
 * what a container writes after it: a token written at start, before hintbox attached, is lost.
 * After the release both directions are framed (gate-frames.ts), so that the same attach also
 * carries the freeze, on bytes the server cannot write.
 */

/** What hintbox sends the gate once attached: its token is wanted now. */
export const GATE_ASK = '?';

export class AttachError extends HintboxError {
  constructor(message: string) {
    super(message);
    this.name = 'AttachError';
  }
}

/** A sandbox Pod whose gate answered: nothing of the image has run yet. */
export interface AttachedGate {
  /** Lets the server run: its stdio becomes an MCP transport (NDJSON), beside the gate's freeze. */
  release(): ReleasedGate;
  /** Closes the attach: a held gate then exits and the server never runs. */
  close(): void;
  /** Resolves when the attach ends, with the API's status message when it sent one. */
  readonly ended: Promise<string | undefined>;
}

/** A released gate's two channels over the one attach (framed: gate-frames.ts). */
export interface ReleasedGate {
  transport: NdjsonTransport;
  /** Freezes and thaws the sandbox: the gate, PID 1 of the Pod's container, stops every other process. */
  control: GateControl;
}

export interface AttachOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  pod: string;
  container?: string;
  /** What the gate must print first (its HINTBOX_GATE_TOKEN). */
  token: string;
  timeoutMs: number;
  /** Each chunk the server (or the gate) writes to stderr. */
  onStderr?: (text: string) => void;
}

const STDIN = 0;

/** Attaches to the Pod's gate and waits for its token; on any failure the attach is closed. */
export async function attachToGate(options: AttachOptions): Promise<AttachedGate> {
  const where = `pod ${options.namespace}/${options.pod}`;
  const stdout = new PassThrough();
  let status: string | undefined;
  let ws: Awaited<ReturnType<WebSocketHandler['connect']>>;
  try {
    const path =
      `/api/v1/namespaces/${encodeURIComponent(options.namespace)}/pods/${encodeURIComponent(options.pod)}/attach` +
      `?container=${encodeURIComponent(options.container ?? 'server')}&stdin=true&stdout=true&stderr=true&tty=false`;
    ws = await new WebSocketHandler(options.kubeConfig).connect(path, null, (stream: number, data: Buffer) => {
      if (stream === WebSocketHandler.StdoutStream) stdout.write(data);
      else if (stream === WebSocketHandler.StderrStream) options.onStderr?.(data.toString('utf8'));
      else if (stream === WebSocketHandler.StatusStream) status = statusMessage(data);
      return true;
    });
  } catch (error) {
    throw new AttachError(`cannot attach to ${where}: ${(error as Error).message}`);
  }
  const ended = new Promise<string | undefined>((resolve) =>
    ws.addEventListener('close', () => {
      stdout.end();
      resolve(status);
    }),
  );
  const close = (): void => ws.close();
  const stdin = new Writable({
    write(chunk: Buffer, _encoding, done) {
      ws.send(Buffer.concat([Buffer.from([STDIN]), chunk]), done);
    },
  });
  // A send on an attach that closed meanwhile: the closing says so (`ended`), nothing more to do.
  stdin.on('error', close);
  try {
    stdin.write(GATE_ASK);
    await expectToken(stdout, options.token, options.timeoutMs, ended, where);
  } catch (error) {
    close();
    throw error;
  }
  return {
    release() {
      stdin.write('G');
      const released = framedChannels(stdout, stdin, close);
      // Paused since the token: the server says nothing before the client's first message.
      stdout.resume();
      return released;
    },
    close,
    ended,
  };
}

/**
 * After the release the gate speaks in frames (gate-frames.ts): the server's stdio in 'D' frames,
 * the freeze's commands and answers as single bytes. A stream that breaks the framing is not the
 * gate's: the attach is closed (the sandbox ends; fail closed).
 */
function framedChannels(stdout: PassThrough, stdin: Writable, close: () => void): ReleasedGate {
  const serverOut = new PassThrough();
  const control = new Duplex({
    read() {},
    write(command: Buffer, _encoding, done) {
      stdin.write(command, done);
    },
  });
  const decoder = new GateFrameDecoder(
    (bytes) => serverOut.write(bytes),
    (answer) => control.push(answer),
  );
  stdout.on('data', (chunk: Buffer) => {
    try {
      decoder.push(chunk);
    } catch (error) {
      control.destroy(error as Error);
      close();
    }
  });
  stdout.once('end', () => {
    serverOut.end();
    control.push(null);
  });
  const serverIn = new Writable({
    write(chunk: Buffer, _encoding, done) {
      stdin.write(dataFrame(chunk), done);
    },
  });
  return { transport: new NdjsonTransport(serverOut, serverIn), control: new GateControl(control) };
}

/** Reads the gate's first line and checks it is the token; the bytes after it stay unread. */
async function expectToken(
  stdout: PassThrough,
  token: string,
  timeoutMs: number,
  ended: Promise<string | undefined>,
  where: string,
): Promise<void> {
  const expected = Buffer.from(`${token}\n`);
  let received = Buffer.alloc(0);
  let timer: NodeJS.Timeout | undefined;
  let onData: ((chunk: Buffer) => void) | undefined;
  try {
    await Promise.race([
      new Promise<void>((resolve, reject) => {
        onData = (chunk: Buffer): void => {
          received = Buffer.concat([received, chunk]);
          if (received.length < expected.length) return;
          stdout.pause();
          const proof = received.subarray(0, expected.length);
          if (!timingSafeEqual(proof, expected)) {
            reject(new AttachError(`${where}: what answered the attach is not hintbox's gate`));
            return;
          }
          const rest = received.subarray(expected.length);
          if (rest.length > 0) stdout.unshift(rest);
          resolve();
        };
        stdout.on('data', onData);
      }),
      ended.then((status) => {
        throw new AttachError(`${where}: the attach ended before the gate answered${status ? ` (${status})` : ''}`);
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new AttachError(`${where}: the gate did not answer within ${timeoutMs} ms`)),
          timeoutMs,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
    if (onData) stdout.off('data', onData);
  }
}

/** The message of the API's `Status` object on the status channel (`Failure`: why), else undefined. */
function statusMessage(data: Buffer): string | undefined {
  try {
    const status = JSON.parse(data.toString('utf8')) as { status?: string; message?: string };
    return status.status === 'Success' ? undefined : (status.message ?? status.status ?? 'failure');
  } catch (error) {
    return `an unreadable status (${(error as Error).message})`;
  }
}
