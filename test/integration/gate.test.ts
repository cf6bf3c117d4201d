import assert from 'node:assert/strict';
import { chownSync, existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { buildContainerSpec } from '../../src/engine/docker/container-spec.js';
import { LABEL_SESSION } from '../../src/engine/sandbox-labels.js';
import { sandboxUserIds } from '../../src/engine/sandbox-engine.js';
import type Docker from 'dockerode';
import { holdSandbox, SandboxStartError, type HeldSandbox } from '../../src/engine/docker/docker-sandbox.js';
import { IO_DIR_PREFIX } from '../../src/engine/docker/gate.js';
import { sessionIdentity, newSessionId } from '../../src/util/session-identity.js';
import { createLogger } from '../../src/util/logger.js';
import { GenericContainer } from 'testcontainers';
import { CANARY_IMAGE, FIXTURES, docker, ensureTestImages } from './support/docker.js';

const HEALTHCHECK_IMAGE = 'hintbox-test/healthcheck:latest';

const log = createLogger('warn');
const workspace = scratchFolder('hintbox-gate-ws-');
const ioBase = scratchFolder('hintbox-gate-io-');
const host = { uid: process.getuid!(), gid: process.getgid!() };
const profile = {
  name: 'gatecheck',
  server: { image: CANARY_IMAGE },
  env: {},
  limits: { memory: '128m', cpus: 1, pids: 64, tmpfs: '16m' },
};
const user = sandboxUserIds(profile, host);
if (host.uid === 0) chownSync(workspace, user.uid, user.gid);

/** A "server" whose first act is to write a marker into the read-write workspace. */
const MARKER = path.join(workspace, 'ran');
const command = [
  'node',
  '-e',
  "require('fs').writeFileSync('/workspace/ran', 'the image ran'); setTimeout(() => {}, 60000)",
];

integrationSuite('the sandbox gate', { images: [ensureTestImages] }, () => {
  // proves: GATE
  it('runs nothing of the image until released, and a held sandbox removed never ran', async () => {
    const { docker: d } = await docker();
    const sessionId = newSessionId();
    const held = await holdSandboxWith(d, sessionId);
    try {
      const info = await d.getContainer(held.containerId).inspect();
      assert.equal(info.State.Running, true, 'the container runs (held at the gate)');
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(existsSync(MARKER), false, 'the image wrote nothing while held');
      assert.deepEqual(
        readdirSync(ioBase).filter((n) => n.startsWith(IO_DIR_PREFIX)),
        [],
        'the socket folder is gone once the gate is connected',
      );
    } finally {
      await held.remove();
    }
    assert.equal(existsSync(MARKER), false, 'removed unreleased: the image never ran');
    const left = await d.listContainers({ all: true, filters: { label: [`${LABEL_SESSION}=${sessionId}`] } });
    assert.equal(left.length, 0, 'the container is gone');

    // The positive control: released, the same sandbox runs the image (which is no MCP server,
    // so the handshake fails and the start is undone).
    const controlSession = newSessionId();
    const control = await holdSandboxWith(d, controlSession);
    await assert.rejects(control.release(), SandboxStartError);
    assert.equal(existsSync(MARKER), true, 'once released, the image ran');
    const controlLeft = await d.listContainers({
      all: true,
      filters: { label: [`${LABEL_SESSION}=${controlSession}`] },
    });
    assert.equal(controlLeft.length, 0, 'a failed release leaves no container');
  });

  // proves: GATE
  it("does not let the image's HEALTHCHECK run code in a held sandbox", async () => {
    const { docker: d } = await docker();
    await GenericContainer.fromDockerfile(path.join(FIXTURES, 'healthcheck'))
      .withBuildArgs({ NODE_SERVER_IMAGE: CANARY_IMAGE })
      .build(HEALTHCHECK_IMAGE, { deleteOnExit: false });
    const health = path.join(workspace, 'health');
    const held = await holdSandboxWith(d, newSessionId(), HEALTHCHECK_IMAGE);
    try {
      // The image asks for a check every second; held three seconds, none ran.
      await new Promise((r) => setTimeout(r, 3000));
      assert.equal(existsSync(health), false, 'no health check ran while held');
    } finally {
      await held.remove();
    }
  });
});

/** Holds a sandbox of the marker-writing "server" over the workspace, read-write. */
function holdSandboxWith(d: Docker, sessionId: string, image = CANARY_IMAGE): Promise<HeldSandbox> {
  return holdSandbox({
    docker: d,
    id: 'rw-offline',
    sandboxUser: user,
    log,
    startTimeoutMs: 3000,
    ioBaseDir: ioBase,
    spec: (gate) =>
      buildContainerSpec({
        session: sessionIdentity(sessionId),
        profile: { ...profile, server: { image } },
        sandboxId: 'rw-offline',
        grant: { network: 'none', mounts: [{ source: workspace, target: '/workspace', readOnly: false }] },
        engine: { recursiveReadOnly: false },
        imageVolumes: [],
        defaultUser: host,
        command,
        gate,
      }),
  });
}
