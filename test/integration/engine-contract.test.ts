import { DockerEngine } from '../../src/engine/docker/docker-engine.js';
import { createLogger } from '../../src/util/logger.js';
import { engineContract } from './support/engine-contract.js';

// The Docker engine keeps the engine contract (test/integration/support/engine-contract.ts); a
// later engine adds its own line here, or a file of its own, with the same suite.
engineContract('Docker', () => DockerEngine.connect({ log: createLogger('warn') }));
