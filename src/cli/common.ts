import type { HintboxConsole } from '../console/console-server.js';
import { sweepSocketDirs } from '../util/sweep-socket-dirs.js';
import { sweepPreviewDirs } from '../sandbox/preview.js';
import { loadProfile, type LoadProfileOptions, type Profile } from '../profile/load-profile.js';
import { DockerEngine } from '../engine/docker/docker-engine.js';
import type { SandboxEngine } from '../engine/sandbox-engine.js';
import { hintboxEnvironment, processVariables, readEnvironment } from '../config/environment.js';
import { createLogger, type Logger } from '../util/logger.js';
import { UsageError } from '../util/hintbox-error.js';
import { defaultSandboxUser, unwritableMounts } from '../sandbox/mount-owners.js';
import { sandboxUserIds } from '../engine/sandbox-engine.js';
import { formatProblem } from '../profile/profile-problems.js';

/** The CLI's log. A level or format it cannot use counts as the default here; main refuses it before any command runs. */
const { logLevel, logFormat } = readEnvironment(processVariables()).environment;
export const cliLogFormat = logFormat;
let current: Logger = createLogger(logLevel, undefined, { format: logFormat });
export const cliLog: Logger = {
  debug: (message, fields) => current.debug(message, fields),
  info: (message, fields) => current.info(message, fields),
  warn: (message, fields) => current.warn(message, fields),
  error: (message, fields) => current.error(message, fields),
  child: (prefix) => current.child(prefix),
};

/** `--verbose`: the CLI's log takes debug lines too (every line of a build, among others), from now on. */
export function verboseLog(): void {
  current = createLogger('debug', undefined, { format: logFormat });
}

/** The one profile argument of run, plan and images build. */
export function profileArg(
  command: string,
  positionals: string[],
  options: Pick<LoadProfileOptions, 'unsetEnv'> = {},
): Profile {
  if (positionals.length !== 1) {
    throw new UsageError(
      `${command}: expected one profile file, got ${positionals.length} (see hintbox ${command} --help)`,
    );
  }
  return loadProfile(positionals[0] as string, options);
}

/**
 * approve and plan list the tools in a read-only sandbox: they need neither a workspace the
 * sandbox user may write nor a token only the run gives the server. The profile as such a
 * command loads it (an unset `env` variable left out), and the lines saying what a run will
 * still need.
 */
export function profileForListing(command: string, positionals: string[]): Profile {
  const profile = profileArg(command, positionals, { unsetEnv: 'leave-out' });
  for (const { name, variable } of profile.envLeftOut ?? []) {
    cliLog.warn(
      `env.${name}: environment variable ${variable} is not set: the server is listed without it (hintbox run will need it)`,
    );
  }
  const user = sandboxUserIds(profile, defaultSandboxUser(profile));
  for (const problem of unwritableMounts(profile, user))
    cliLog.warn(`hintbox run will refuse: ${formatProblem(problem)}`);
  return profile;
}

/**
 * Connects to the sandbox engine (`--engine`, else HINTBOX_ENGINE: Docker unless it says
 * kubernetes) and sweeps what crashed runs left behind.
 */
export async function engineReady(log: Logger = cliLog, engineArg?: unknown): Promise<SandboxEngine> {
  const engine = await connectEngine(log, engineArg);
  await engine.sweepOrphans(log);
  for (const dir of sweepSocketDirs()) log.debug(`swept socket folder ${dir} (its run is gone)`);
  for (const dir of await sweepPreviewDirs()) log.debug(`swept preview copy ${dir} (its run is gone)`);
  return engine;
}

/** The engine `--engine` (else HINTBOX_ENGINE, else docker) names, connected; nothing swept. */
export async function connectEngine(log: Logger = cliLog, engineArg?: unknown): Promise<SandboxEngine> {
  const env = hintboxEnvironment();
  const kind = engineArg ?? env.engine;
  if (kind !== 'docker' && kind !== 'kubernetes') {
    throw new UsageError(`--engine: expected docker or kubernetes, got ${JSON.stringify(kind)}`);
  }
  // Loaded only when chosen: its client library is not compiled at every start.
  const engine: SandboxEngine =
    kind === 'kubernetes'
      ? await (
          await import('../engine/kubernetes/kubernetes-engine.js')
        ).KubernetesEngine.connect({ log, ...(env.gateImage ? { gateImage: env.gateImage } : {}) })
      : await DockerEngine.connect({ log, ...(env.baseImage ? { baseImage: env.baseImage } : {}) });
  log.debug(engine.description);
  return engine;
}

/** At the end of a run or serve, after its sessions: the engine's shared network goes; a failure is logged, not thrown. */
export async function closeEngine(engine: SandboxEngine, log: Logger = cliLog): Promise<void> {
  await engine.close().catch((error: Error) => log.error(`removing the open sandboxes' network: ${error.message}`));
}

/** `--console-port`: a port number (1–65535); absent: none given. */
export function consolePortArg(command: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const port = Number(value);
  if (typeof value !== 'string' || !/^\d+$/.test(value) || port < 1 || port > 65535) {
    throw new UsageError(`${command}: --console-port: expected a port number (1–65535), got ${JSON.stringify(value)}`);
  }
  return port;
}

/** The console, listening; its link (the console's token) goes to stderr, for the person. */
export async function startConsole(command: string, port: number | undefined): Promise<HintboxConsole> {
  try {
    // Loaded only when a console is asked for: a run without one never reads its pages' code.
    const { HintboxConsole } = await import('../console/console-server.js');
    const hub = await HintboxConsole.start({
      log: cliLog,
      auditDir: hintboxEnvironment().auditDir,
      ...(port !== undefined ? { port } : {}),
    });
    cliLog.info(`console: ${hub.link} (open it in a browser; the link is the key: do not share it)`);
    return hub;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(
      code === 'EADDRINUSE'
        ? `${command}: --console-port ${port}: the port is in use`
        : `${command}: the console could not start: ${(error as Error).message}`,
    );
  }
}
