import { DockerEngine } from '../../src/engine/docker/docker-engine.js';
import { connectDocker } from '../../src/engine/docker/docker-connection.js';
import { createLogger } from '../../src/util/logger.js';
import { engineContract } from './support/engine-contract.js';

// The Docker engine keeps the engine contract (test/integration/support/engine-contract.ts); a
// later engine adds its own line here, or a file of its own, with the same suite. The same
// engine over Podman's compatible API (DOCKER_HOST at its socket) keeps it too, refusing networks.
const podman = (await connectDocker()).kind === 'podman';
engineContract(
  podman ? 'Podman' : 'Docker',
  () => DockerEngine.connect({ log: createLogger('warn') }),
  podman ? 'refused' : 'kept',
);
