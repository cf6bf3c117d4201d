import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { apiAtLeast, connectDocker, DockerUnavailableError } from '../../src/engine/docker/docker-connection.js';

describe('connectDocker', () => {
  it('refuses an engine on another host before asking it anything: sandboxes bind host files', async () => {
    for (const host of ['tcp://10.0.0.1:2375', 'ssh://builder@ci', 'npipe:////./pipe/docker_engine']) {
      await assert.rejects(
        connectDocker({ dockerHost: host }),
        (error: unknown) =>
          error instanceof DockerUnavailableError &&
          error.exitCode === 2 &&
          error.message ===
            `DOCKER_HOST=${host}: hintbox needs a Docker engine on this host (unix://…), because it binds its own files and sockets into every sandbox`,
      );
    }
  });

  it('compares API versions', () => {
    assert.equal(apiAtLeast('1.41', '1.44'), false);
    assert.equal(apiAtLeast('1.44', '1.44'), true);
    assert.equal(apiAtLeast('1.45', '1.44'), true);
    assert.equal(apiAtLeast('2.0', '1.44'), true);
  });
});
