import { PassThrough } from 'node:stream';
import type { Duplex } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type Docker from 'dockerode';
import type { Logger } from '../util/logger.js';
import { visibleText } from '../util/visible-text.js';
import { VERSION } from '../version.js';
import { NdjsonTransport } from '../gateway/ndjson-transport.js';

/** A running sandbox container with an initialized MCP client on its stdio. */
export interface StartedSandbox extends AsyncDisposable {
  readonly id: string;
  readonly containerId: string;
  readonly client: Client;
  /** Resolves when the server's stdio closes (the container died or was removed). */
  readonly closed: Promise<void>;
  /** The last lines the server wrote to stderr. */
  stderrTail(): string;
  /** Removes the container (idempotent). */
  remove(): Promise<void>;
}

export class SandboxStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxStartError';
  }
}

export interface StartSandboxOptions {
  docker: Docker;
  id: string;
  spec: Docker.ContainerCreateOptions;
  log: Logger;
  /** Milliseconds to wait for the server's `initialize` answer. */
  startTimeoutMs: number;
}

const STDERR_TAIL_LINES = 20;
const STDERR_LINE_MAX = 8192;

/**
 * Creates and starts a sandbox container, attaches to its stdio through the Docker API (before
 * start, so nothing is lost) and runs the MCP handshake. On any failure the container is
 * removed before the error is thrown: nothing half started is left behind.
 */
export async function startSandbox(options: StartSandboxOptions): Promise<StartedSandbox> {
  const { docker, id, spec, log, startTimeoutMs } = options;
  const container = await docker.createContainer(spec);
  const tail: string[] = [];
  let removed: Promise<void> | undefined;
  const remove = (): Promise<void> =>
    (removed ??= container.remove({ force: true, v: true }).then(
      () => undefined,
      (error: { statusCode?: number }) => {
        // 404: already gone; 409: removal already in progress.
        if (error.statusCode !== 404 && error.statusCode !== 409) throw error;
      },
    ));

  try {
    const stream = (await container.attach({
      stream: true,
      stdin: true,
      stdout: true,
      stderr: true,
      hijack: true,
    })) as unknown as Duplex;
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    docker.modem.demuxStream(stream, stdout, stderr);
    stream.on('end', () => {
      stdout.end();
      stderr.end();
    });
    stream.on('close', () => {
      stdout.end();
      stderr.end();
    });
    collectStderr(stderr, tail, log);

    const transport = new NdjsonTransport(stdout, stream);
    const closed = new Promise<void>((resolve) => stdout.once('close', resolve).once('end', resolve));

    await container.start();
    const client = new Client({ name: 'hintbox', version: VERSION }, { capabilities: {} });
    try {
      await client.connect(transport, { timeout: startTimeoutMs });
    } catch (error) {
      // Let the last stderr lines arrive before quoting them.
      await Promise.race([closed, delay(300)]);
      const stderrText = tail.length ? `; its stderr ends with:\n${tail.join('\n')}` : '; it wrote nothing to stderr';
      throw new SandboxStartError(
        `sandbox ${id}: the server failed to initialize (${(error as Error).message})${stderrText}`,
      );
    }

    return {
      id,
      containerId: container.id,
      client,
      closed,
      stderrTail: () => tail.join('\n'),
      remove: async () => {
        await client.close().catch(() => undefined);
        await remove();
      },
      [Symbol.asyncDispose]: async () => {
        await client.close().catch(() => undefined);
        await remove();
      },
    };
  } catch (error) {
    await remove().catch((e: Error) => log.warn(`could not remove container ${container.id}: ${e.message}`));
    throw error;
  }
}

function collectStderr(stderr: PassThrough, tail: string[], log: Logger): void {
  let partial = '';
  stderr.setEncoding('utf8');
  stderr.on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) push(line);
    // A server that never ends its line must not grow hintbox's memory: cut it.
    if (partial.length > STDERR_LINE_MAX) {
      push(`${partial.slice(0, STDERR_LINE_MAX)} …(cut)`);
      partial = '';
    }
  });
  stderr.on('end', () => {
    if (partial) push(partial);
    partial = '';
  });
  function push(raw: string): void {
    // The server's text, not terminal control: no escape sequences or fake log lines.
    const line = visibleText(raw);
    tail.push(line);
    if (tail.length > STDERR_TAIL_LINES) tail.shift();
    log.info(line);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
