import type { Socket } from 'node:net';
import { PassThrough, type Readable } from 'node:stream';
import type { ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';
import type Docker from 'dockerode';
import type { Logger } from '../../util/logger.js';
import { NdjsonTransport } from '../../mcp/ndjson-transport.js';
import type { GateMounts } from './container-spec.js';
import { gateBinary, openGateSocket, releaseGate } from './gate.js';
import { GateControl } from '../gate-control.js';
import { openCgroupFreezer } from '../cgroup-freezer.js';
import type { FreezerChoice } from '../../config/environment.js';
import { assertNoVolumes } from '../image-volumes.js';
import { delay } from '../../util/delay.js';
import { SandboxStartError, type HeldSandbox, type StartedSandbox } from '../sandbox-engine.js';
import { removeContainer } from './remove-container.js';
import { connectReleased, type ReleasedSandbox } from '../started-sandbox.js';
import { collectStderr, STDERR_LOG_MAX_BYTES } from '../stderr-log.js';

export { SandboxStartError, type HeldSandbox, type StartedSandbox } from '../sandbox-engine.js';

export interface StartSandboxOptions {
  docker: Docker;
  id: string;
  /** The container to create, given this start's gate (its socket is made anew for each start). */
  spec: (gate: GateMounts) => Docker.ContainerCreateOptions;
  /** Who the sandbox runs as: the only user that may connect to its gate socket. */
  sandboxUser: { uid: number; gid: number };
  log: Logger;
  /** Milliseconds to wait for the gate to connect, and again for the server's `initialize` answer. */
  startTimeoutMs: number;
  /** Host folder of gate sockets (default: the system's temporary folder). */
  ioBaseDir?: string;
  /** Host path of the gate binary (default: the package's). */
  gateBinary?: string;
  /** What hintbox's client declares at `initialize`. Default none. */
  clientCapabilities?: ClientCapabilities;
  /** `gate`: frozen by the gate even where the cgroup freezer could be written (HINTBOX_FREEZER). Default `auto`. */
  freezer?: FreezerChoice;
}

/** After the container's output ended, the time its last lines take to reach the tail. */
const STDERR_SETTLE_MS = 20;
/** How long a closed connection waits for the container's output to end (a server alive without its stdio). */
const STDERR_WAIT_MS = 500;

/**
 * Creates and starts a sandbox container whose first program is hintbox's gate, and waits for
 * the gate to connect: the container is up, nothing of the image has run. Stderr is attached
 * before start, so nothing is lost. On any failure the container and the socket folder are
 * removed before the error is thrown: nothing half started is left behind.
 */
export async function holdSandbox(options: StartSandboxOptions): Promise<HeldSandbox> {
  const { docker, id, log, startTimeoutMs } = options;
  const gate = await openGateSocket({
    sandboxUser: options.sandboxUser,
    ...(options.ioBaseDir ? { baseDir: options.ioBaseDir } : {}),
  });
  let container: Docker.Container | undefined;
  let socket: Socket | undefined;
  let control: GateControl | undefined;
  let removed: Promise<void> | undefined;
  const remove = (): Promise<void> =>
    (removed ??= (async () => {
      socket?.destroy();
      control?.close();
      await gate.close();
      if (container) await removeContainer(container);
    })().catch((error: unknown) => {
      removed = undefined; // a later call tries again
      throw error;
    }));
  const tail: string[] = [];
  const stderrSays = (): string =>
    tail.length ? `; its stderr ends with:\n${tail.join('\n')}` : '; it wrote nothing to stderr';

  try {
    container = await docker.createContainer(
      options.spec({
        binary: gateBinary(options.gateBinary),
        hostDir: gate.hostDir,
        sandboxPath: gate.sandboxPath,
        token: gate.token,
      }),
    );
    // Before anything runs in it: a volume the engine made anyway is refused (removed with it).
    assertNoVolumes((await container.inspect()).Mounts, `sandbox ${id}`);
    const stream = (await container.attach({ stream: true, stdout: true, stderr: true })) as unknown as Readable;
    stream.on('error', (error) => log.debug(`sandbox ${id}: log stream error: ${error.message}`));
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    docker.modem.demuxStream(stream, stdout, stderr);
    const created = container;
    const exited = new Promise<void>((resolve) => {
      let ended = false;
      const end = (): void => {
        if (ended) return;
        ended = true;
        stdout.end();
        stderr.end();
        // How it ended goes with its last words: a server killed for memory says nothing itself.
        void howItEnded(created).then((line) => {
          if (line) tail.push(line);
          resolve();
        });
      };
      stream.once('end', end).once('close', end);
    });
    // The gate has made stdout the MCP socket; anything written to the old one is shown as stderr.
    const budget = { left: STDERR_LOG_MAX_BYTES };
    collectStderr(stdout, tail, log, budget);
    collectStderr(stderr, tail, log, budget);

    await container.start();
    // Which freezer, asked of the engine while the gate connects: its first process is known once started.
    const started = container;
    const cgroupFreezer =
      options.freezer === 'gate'
        ? Promise.resolve({ problem: 'HINTBOX_FREEZER=gate' })
        : started.inspect().then(
            (info) => openCgroupFreezer(info.State.Pid, info.Id),
            (error: Error) => ({ problem: `inspect failed: ${error.message}` }),
          );
    const connected = await waitFor(gate.connection, exited, startTimeoutMs).catch(async (error: Error) => {
      void gate.connection.then(
        (late) => (late.stdio.destroy(), late.control.destroy()),
        () => undefined,
      );
      await Promise.race([exited, delay(300)]);
      // The gate could not reach its socket: the engine maps users (rootless Docker, userns-remap).
      const why = tail.some((line) => line.includes('cannot connect to hintbox'))
        ? ". The sandbox user could not reach hintbox's socket: rootless Docker and user-namespace remapping are not supported"
        : '';
      throw new SandboxStartError(`sandbox ${id}: the gate did not connect (${error.message})${why}${stderrSays()}`);
    });
    socket = connected.stdio;
    const gateControl = (control = new GateControl(connected.control));
    const chosen = await cgroupFreezer;
    const freezer =
      'problem' in chosen
        ? {
            name: 'its gate',
            // The gate stops the sandbox's processes; should it fail, the engine's pause holds
            // them while the caller removes the sandbox (a failed freeze is fatal to it).
            freeze: () => {
              warnGateFreezer(chosen.problem, options.freezer, log);
              return gateControl.freeze().catch(async (error: Error) => {
                await setPaused(docker.getContainer(started.id), true, log).catch(() => undefined);
                throw error;
              });
            },
            thaw: () => gateControl.thaw(),
          }
        : {
            name: `the cgroup freezer (v${chosen.cgroup.version})`,
            freeze: (cancel?: AbortSignal) => chosen.freeze(cancel),
            thaw: () => chosen.thaw(),
          };
    log.debug(
      `sandbox ${id}: frozen between calls by ${freezer.name}${'problem' in chosen ? ` (no cgroup freezer: ${chosen.problem})` : ` at ${chosen.cgroup.dir}`}`,
    );
    // Woken while frozen: the gate has killed every process and exits; the container goes too.
    const woken = new Promise<string>((resolve) =>
      gateControl.onWoken((error) => {
        log.error(`sandbox ${id}: ${error.message}`);
        void remove().catch((e: Error) => log.warn(`could not remove sandbox ${id}: ${e.message}`));
        resolve(error.message);
      }),
    );
    const held = socket;
    // Until the transport takes it over; a reset connection then shows as a closed sandbox.
    held.on('error', (error) => log.debug(`sandbox ${id}: connection error: ${error.message}`));
    const containerId = container.id;
    return {
      id,
      containerId,
      remove,
      release: async () => {
        try {
          return await release(held, {
            id,
            containerId,
            startTimeoutMs,
            capabilities: options.clientCapabilities ?? {},
            tail,
            remove,
            stderrSays,
            exited,
            freeze: freezer.freeze,
            thaw: freezer.thaw,
            woken,
          });
        } catch (error) {
          await remove().catch((e: Error) => log.warn(`could not remove container ${containerId}: ${e.message}`));
          throw error;
        }
      },
    };
  } catch (error) {
    await remove().catch((e: Error) => log.warn(`could not remove sandbox ${id}: ${e.message}`));
    throw error;
  }
}

let gateFreezerWarned = false;

/**
 * Once per hintbox, at the first freeze by a gate where the cgroup freezer was not forced off:
 * the gate only bounds what a woken server runs (it kills the sandbox within a watch period),
 * where the cgroup freezer prevents it (docs/engines.md).
 */
function warnGateFreezer(problem: string, choice: FreezerChoice | undefined, log: Logger): void {
  if (gateFreezerWarned || choice === 'gate') return;
  gateFreezerWarned = true;
  log.warn(
    `held sandboxes are frozen by their gate, not the cgroup freezer (${problem}): a server woken by a signal while frozen runs until the gate kills it (within 10 ms); see docs/engines.md`,
  );
}

async function release(
  socket: Socket,
  ctx: {
    id: string;
    containerId: string;
    startTimeoutMs: number;
    capabilities: ClientCapabilities;
    tail: string[];
    remove: () => Promise<void>;
    stderrSays: () => string;
    /** The container's output ended (it exited). */
    exited: Promise<void>;
    freeze: ReleasedSandbox['freeze'];
    thaw: () => Promise<void>;
    woken: Promise<string>;
  },
): Promise<StartedSandbox> {
  // Closed once the connection is; when the server died, its last stderr lines (which come
  // the other way, through the engine) are let in first, so that what quotes them has them.
  const closed = new Promise<void>((resolve) =>
    socket.once('close', () => {
      const lastWords = ctx.exited.then(() => delay(STDERR_SETTLE_MS));
      // A timer that keeps the process alive: when nothing else does (a server that died
      // during discovery, before anything else is open), an unref'd one let hintbox exit 0
      // in the middle of the wait, leaving its container.
      let bound: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((done) => (bound = setTimeout(done, STDERR_WAIT_MS)));
      void Promise.race([lastWords, waited]).then(() => {
        clearTimeout(bound);
        resolve();
      });
    }),
  );
  const stdio = new NdjsonTransport(socket, socket);
  releaseGate(socket);
  socket.resume();
  return connectReleased({
    ...ctx,
    stdio,
    closed,
    stderrTail: () => ctx.tail.join('\n'),
  });
}

/**
 * Pauses or unpauses a container. When the engine refuses because it already is as asked, that
 * is said in the log (it should not happen: only hintbox pauses its sandboxes) and the step
 * counts as done; a container that is no longer running is an error that says how it ended.
 */
async function setPaused(container: Docker.Container, paused: boolean, log: Logger): Promise<void> {
  try {
    await (paused ? container.pause() : container.unpause());
  } catch (error) {
    const state = await container.inspect().then(
      (info) => info.State,
      () => undefined,
    );
    if (state?.Running && state.Paused === paused) {
      log.warn(`sandbox was already ${paused ? 'paused' : 'running'} when hintbox ${paused ? 'froze' : 'thawed'} it`);
      return;
    }
    const how = state
      ? ` (${state.Status}${state.OOMKilled ? ', killed for memory' : ''}${state.Running ? '' : `, exit code ${state.ExitCode}`})`
      : '';
    throw new Error(`${(error as Error).message.trim()}${how}`);
  }
}

/**
 * A line on how a container ended when that is worth saying (killed for memory, a signal, an
 * exit code other than 0); undefined when it is gone (hintbox removed it) or the engine is slow.
 */
async function howItEnded(container: Docker.Container): Promise<string | undefined> {
  const state = await Promise.race([
    container.inspect().then(
      (info) => info.State,
      () => undefined,
    ),
    delay(1000).then(() => undefined),
  ]);
  if (!state || state.Running) return undefined;
  if (state.OOMKilled) return '[hintbox] the container was killed for memory: it reached its limit (limits.memory)';
  if (state.ExitCode === 0) return undefined;
  const signal = state.ExitCode > 128 ? ` (signal ${state.ExitCode - 128})` : '';
  return `[hintbox] the container exited with code ${state.ExitCode}${signal}`;
}

/** `promise`, unless the container ends or the time runs out first. */
function waitFor<T>(promise: Promise<T>, exited: Promise<void>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no connection within ${ms} ms`)), ms);
    const settled =
      <A extends unknown[]>(f: (...args: A) => void) =>
      (...args: A): void => {
        clearTimeout(timer);
        f(...args);
      };
    void exited.then(settled(() => reject(new Error('the container exited'))));
    promise.then(settled(resolve), settled(reject));
  });
}
