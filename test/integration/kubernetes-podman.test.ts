import assert from 'node:assert/strict';
import { chownSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { integrationSuite } from './support/suite.js';
import { podman, podmanGateImage, podmanImageFromDocker, podmanMissing } from './support/podman.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { docker } from './support/docker.js';
import { copyOfShippedProfile, hintboxCommand, sandboxFolder } from './support/hintbox-process.js';
import { schemaProblems } from '../unit/support/kubernetes-schema.js';
import { restrictedViolations } from '../../src/engine/kubernetes/pod-security.js';
import { planSandboxes } from '../../src/policy/plan-sandboxes.js';
import { serverCommand } from '../../src/engine/sandbox-process.js';
import { gateBinary, openGateSocket, releaseGate } from '../../src/engine/docker/gate.js';
import { renderSandboxPod } from '../../src/engine/kubernetes/sandbox-pod.js';
import { sandboxUserIds } from '../../src/engine/sandbox-engine.js';
import { NdjsonTransport } from '../../src/mcp/ndjson-transport.js';
import { newSessionId, sessionIdentity } from '../../src/util/session-identity.js';

/**
 * The Pods the Kubernetes renderer makes, run for real under `podman kube play` (no cluster
 * can be had here): the real gate and the real filesystem server answer MCP in them, and the
 * read-only class refuses writes. Podman has no attach to a kube Pod's stdin, so the Pod is
 * rendered with the gate's socket channel: hintbox's socket in a host folder bound read-only at
 * /run/hintbox/io (hostPath), exactly as the Docker engine binds it. Podman honours the
 * securityContext, hostPath readOnly, limits and initContainers; not emptyDir's medium Memory,
 * pids or NetworkPolicy (docs/engines.md).
 */

const IMAGE = 'hintbox/server-filesystem:2026.8.31';
const tools = (
  JSON.parse(readFileSync(new URL('../fixtures/filesystem-tools.json', import.meta.url), 'utf8')) as {
    tools: { name: string; annotations?: unknown }[];
  }
).tools;

integrationSuite(
  'rendered Kubernetes Pods under podman kube play',
  { skip: podmanMissing() ?? false, timeout: 240_000 },
  (suite) => {
    // proves: K8S-READONLY-MOUNTS
    it("runs the filesystem server's read-only class: the read tool answers, the write tool gets EROFS, the file is unchanged", async () => {
      const workspace = scratchFolder('hintbox-k8s-ws-');
      const file = path.join(workspace, 'notes.txt');
      writeFileSync(file, 'kept as it was\n');
      const profile = {
        name: 'filesystem',
        server: { image: IMAGE, args: ['${sandbox:mount.workspace}'] },
        env: {},
        limits: { memory: '256m', cpus: 1, pids: 128, tmpfs: '16m' },
        mounts: [
          { name: 'workspace', source: workspace, target: '/workspace', mode: 'rw' as const, allowSensitive: [] },
        ],
      };
      const defaultUser = { uid: 10001, gid: 10001 };
      const user = sandboxUserIds(profile, defaultUser);
      chownSync(workspace, user.uid, user.gid);
      chownSync(file, user.uid, user.gid);
      const plan = planSandboxes(tools, {
        mounts: [{ source: workspace, target: '/workspace', mode: 'rw' }],
        network: 'none',
        split: true,
        overrides: {},
      });
      const sandbox = plan.sandboxes.find((s) => s.id === 'ro-offline');
      assert.ok(sandbox, 'the plan has a read-only class');

      await podmanImageFromDocker(IMAGE);
      const gateImage = await podmanGateImage(gateBinary(), `localhost/${IMAGE}`);
      const { docker: d } = await docker();
      const command = serverCommand(profile.server, (await d.getImage(IMAGE).inspect()).Config);

      const gate = await openGateSocket({ sandboxUser: user, baseDir: scratchFolder('hintbox-k8s-io-') });
      suite.defer(() => gate.close());
      const session = sessionIdentity(newSessionId());
      const [pod] = renderSandboxPod({
        session,
        profile,
        sandboxId: sandbox.id,
        grant: { network: sandbox.network, mounts: sandbox.mounts },
        command,
        defaultUser,
        target: {
          namespace: 'default',
          gate: gateImage,
          channel: { kind: 'socket', hostDir: gate.hostDir, sandboxPath: gate.sandboxPath, token: gate.token },
          volumes: { kind: 'hostPath' },
          userNamespaces: false,
        },
      });
      const manifest = path.join(scratchFolder('hintbox-k8s-pod-'), 'pod.json');
      writeFileSync(manifest, JSON.stringify(pod));
      // Registered first: a play that fails half-way leaves its pod behind.
      suite.defer(async () => {
        await podman('pod', 'rm', '--force', '--ignore', pod!.metadata.name);
      });
      await podman('kube', 'play', '--quiet', manifest);

      const { stdio: socket, control } = await gate.connection;
      suite.defer(() => void control.destroy());
      const transport = new NdjsonTransport(socket, socket);
      const client = new Client({ name: 'hintbox-k8s-test', version: '1' });
      releaseGate(socket);
      socket.resume();
      await client.connect(transport, { timeout: 20_000 });
      suite.defer(() => client.close());
      const listed = await client.listTools();
      assert.ok(listed.tools.some((t) => t.name === 'read_text_file'));

      const read = await client.callTool({ name: 'read_text_file', arguments: { path: '/workspace/notes.txt' } });
      assert.equal(read.isError ?? false, false, JSON.stringify(read));
      assert.match(JSON.stringify(read.content), /kept as it was/);

      const write = await client.callTool({
        name: 'write_file',
        arguments: { path: '/workspace/notes.txt', content: 'overwritten by a read-only class' },
      });
      assert.equal(write.isError, true, JSON.stringify(write));
      assert.match(JSON.stringify(write.content), /EROFS|read-only file system/i);
      assert.equal(readFileSync(file, 'utf8'), 'kept as it was\n', 'the file is byte-identical');

      // The Pod's user and hardening as Podman applied them.
      const [info] = JSON.parse(await podman('container', 'inspect', `${pod!.metadata.name}-server`)) as {
        Config: { User: string };
        HostConfig: { ReadonlyRootfs: boolean; CapDrop: string[]; CapAdd: string[] };
      }[];
      assert.equal(info!.Config.User, `${user.uid}:${user.gid}`);
      assert.equal(info!.HostConfig.ReadonlyRootfs, true);
    });
  },
);

integrationSuite('hintbox plan --engine kubernetes', { timeout: 120_000 }, () => {
  // proves: K8S-SCHEMA
  it("prints the filesystem server's Pods and NetworkPolicies as one List that passes the API schemas and the restricted level", async () => {
    const profile = copyOfShippedProfile('filesystem');
    const env = { WORKSPACE: sandboxFolder('hintbox-k8s-plan-ws-') };
    const { code, stdout, stderr } = await hintboxCommand(['plan', profile, '--engine', 'kubernetes', '--json'], env);
    assert.equal(code, 0, stderr);
    const list = JSON.parse(stdout) as {
      kind: string;
      items: { kind: string; metadata: { name: string }; spec: Record<string, unknown> }[];
    };
    assert.equal(list.kind, 'List');
    assert.deepEqual(
      list.items.map((o) => o.kind),
      ['Pod', 'NetworkPolicy', 'Pod', 'NetworkPolicy'],
    );
    for (const object of list.items) {
      assert.deepEqual(schemaProblems(object as never), [], object.metadata.name);
      if (object.kind === 'Pod') assert.deepEqual(restrictedViolations(object.spec), [], object.metadata.name);
    }
    const wrong = await hintboxCommand(['plan', profile, '--engine', 'nomad'], env);
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /--engine nomad: expected docker or kubernetes/);
  });
});
