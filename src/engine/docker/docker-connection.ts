import Docker from 'dockerode';
import { hintboxEnvironment, type HintboxEnvironment } from '../../config/environment.js';
import { HintboxError, type ExitCode } from '../../util/hintbox-error.js';

/** A reachable Docker engine and what it can do. */
export interface DockerConnection {
  docker: Docker;
  /** Engine API version, e.g. `1.41`. */
  apiVersion: string;
  /** Where the engine was found, for messages: `unix:///var/run/docker.sock`. */
  endpoint: string;
  /**
   * Engine API ≥ 1.44: read-only bind mounts can be made recursive. Never on Podman, whatever API
   * version it reports: its compatible API does not make read-only binds recursive.
   */
  recursiveReadOnly: boolean;
  /** Which engine answers the Docker API: Docker, or Podman through its compatible service (see engineKind). */
  kind: EngineKind;
}

/** The engines that speak the Docker API and that hintbox tells apart (they differ in a few options). */
export type EngineKind = 'docker' | 'podman';

/**
 * Which engine a `/version` answer comes from: Podman names its component "Podman Engine"
 * (Docker's is "Engine"). Pure.
 */
export function engineKind(version: { Components?: readonly { Name?: string }[] | null }): EngineKind {
  return (version.Components ?? []).some((c) => c.Name === 'Podman Engine') ? 'podman' : 'docker';
}

export class DockerUnavailableError extends HintboxError {
  constructor(message: string, exitCode: ExitCode = 1) {
    super(message, { exitCode });
    this.name = 'DockerUnavailableError';
  }
}

const DEFAULT_SOCKET = '/var/run/docker.sock';

/** Compares dotted versions: `1.41` < `1.44`. */
export function apiAtLeast(version: string, minimum: string): boolean {
  const a = version.split('.').map(Number);
  const b = minimum.split('.').map(Number);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d > 0;
  }
  return true;
}

/**
 * Connects to the engine named by DOCKER_HOST, else the default Unix socket, and checks that it
 * answers. The error says where it looked and what to do.
 */
export async function connectDocker(
  env: Pick<HintboxEnvironment, 'dockerHost'> = hintboxEnvironment(),
): Promise<DockerConnection> {
  const host = env.dockerHost;
  const endpoint = host ? `${host} (from DOCKER_HOST)` : `unix://${DEFAULT_SOCKET} (default; DOCKER_HOST is not set)`;
  if (host && !host.startsWith('unix://')) {
    // The gate binary, its sockets, relay sockets and preview copies are host files bound into
    // sandboxes: an engine on another machine would not see them.
    throw new DockerUnavailableError(
      `DOCKER_HOST=${host}: hintbox needs a Docker engine on this host (unix://…), because it binds its own files and sockets into every sandbox`,
      2,
    );
  }
  let docker: Docker;
  try {
    docker = host ? new Docker() : new Docker({ socketPath: DEFAULT_SOCKET });
  } catch (error) {
    throw new DockerUnavailableError(`Docker is not reachable at ${endpoint}: ${(error as Error).message}`);
  }
  try {
    const version = await withTimeout(docker.version(), 10_000);
    const apiVersion = String(version.ApiVersion);
    const kind = engineKind(version);
    return {
      docker,
      apiVersion,
      endpoint,
      kind,
      recursiveReadOnly: kind === 'docker' && apiAtLeast(apiVersion, '1.44'),
    };
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new DockerUnavailableError(
      `Docker is not reachable at ${endpoint}: ${reason}. Start the Docker engine, or set DOCKER_HOST to where it listens.`,
    );
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
    promise.then(
      (v) => (clearTimeout(timer), resolve(v)),
      (e: unknown) => (clearTimeout(timer), reject(e instanceof Error ? e : new Error(String(e)))),
    );
  });
}
