import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { engineKind } from '../../src/engine/docker/docker-connection.js';
import { networkRefusal } from '../../src/engine/docker/engine-networks.js';
import { tmpfsOwner } from '../../src/engine/docker/container-spec.js';

/** `/version` answers as the two engines give them here (abridged). */
const DOCKER_VERSION = {
  Components: [{ Name: 'Engine' }, { Name: 'containerd' }, { Name: 'runc' }],
  ApiVersion: '1.41',
};
const PODMAN_VERSION = {
  Components: [{ Name: 'Podman Engine' }, { Name: 'Conmon' }, { Name: 'OCI Runtime (runc)' }],
  ApiVersion: '1.41',
};

describe('Podman behind the Docker API', () => {
  it('is told from Docker by the component its /version names', () => {
    assert.equal(engineKind(DOCKER_VERSION), 'docker');
    assert.equal(engineKind(PODMAN_VERSION), 'podman');
    assert.equal(engineKind({}), 'docker');
    assert.equal(engineKind({ Components: null }), 'docker');
  });

  // proves: PODMAN-NETWORKS
  it('starts network-less and egress sandboxes on Podman (egress is no network: the relay); refuses an open one', () => {
    for (const network of ['none', 'egress', 'bridge'] as const) {
      assert.equal(networkRefusal('docker', network, 'c'), undefined);
    }
    assert.equal(networkRefusal('podman', 'none', 'c'), undefined);
    assert.equal(networkRefusal('podman', 'egress', 'nomounts-egress'), undefined);
    assert.equal(
      networkRefusal('podman', 'bridge', 'open'),
      "sandbox open: its open network is refused on Podman, whose networks do not keep a sandbox from the host (an internal network's gateway is the host); run it on Docker, or list its hosts (network: {allow: [...]})",
    );
  });

  it("owns a tmpfs as each engine spells it: Docker's uid=/gid=, Podman's U", () => {
    assert.equal(tmpfsOwner(undefined, 10001, 10002), 'uid=10001,gid=10002');
    assert.equal(tmpfsOwner('docker', 10001, 10002), 'uid=10001,gid=10002');
    assert.equal(tmpfsOwner('podman', 10001, 10002), 'U');
  });
});
