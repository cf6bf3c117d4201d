import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import { KubeApi } from '../../src/engine/kubernetes/kube-api.js';
import { KubernetesEngine } from '../../src/engine/kubernetes/kubernetes-engine.js';
import type { SandboxSpec } from '../../src/engine/sandbox-engine.js';
import { createLogger } from '../../src/util/logger.js';
import { newSessionId } from '../../src/util/session-identity.js';

/**
 * The Kubernetes engine against a real cluster: runs whenever KUBECONFIG names one (kind, k3s,
 * a platform team's), skipped otherwise. See docs/engines.md ("the real-cluster suite") for what
 * it needs: a namespace where the kubeconfig may do what deploy/base/role.yaml grants, and two
 * images the cluster can pull (hintbox's, for the gate; one with node and the liar fixture).
 * Not an `integrationSuite`: it needs no Docker (whose leftovers that scaffold checks); what it
 * makes on the cluster it checks and removes itself, by session.
 */

const NAMESPACE = process.env.HINTBOX_TEST_NAMESPACE ?? 'hintbox-test';
const GATE_IMAGE = process.env.HINTBOX_GATE_IMAGE;
const SERVER_IMAGE = process.env.HINTBOX_TEST_SERVER_IMAGE;
const skip = !process.env.KUBECONFIG
  ? 'no cluster: set KUBECONFIG (and HINTBOX_GATE_IMAGE, HINTBOX_TEST_SERVER_IMAGE) to run it, see docs/engines.md'
  : !GATE_IMAGE || !SERVER_IMAGE
    ? 'KUBECONFIG is set, but HINTBOX_GATE_IMAGE and HINTBOX_TEST_SERVER_IMAGE must name images the cluster can pull'
    : false;
const log = createLogger('warn');

describe('the Kubernetes engine on a real cluster', { timeout: 300_000, skip }, () => {
  const kubeConfig = new KubeConfig();
  const sessions = new Set<string>();
  after(async () => {
    for (const sessionId of sessions) await engine.removeSession(sessionId);
  });
  let engine: KubernetesEngine;
  let api: KubeApi;

  function spec(sessionId: string, image = SERVER_IMAGE as string): SandboxSpec {
    return {
      session: { sessionId, ownerHost: 'hintbox-cluster-test', ownerPid: process.pid },
      profile: {
        name: 'liar',
        server: { image, command: ['node', '/app/liar/server.mjs'] },
        env: {},
        limits: { memory: '256m', cpus: 0.5, pids: 128, tmpfs: '32m' },
      },
      sandboxId: 'ro-offline',
      grant: { network: 'none', mounts: [] },
      command: ['node', '/app/liar/server.mjs'],
      defaultUser: { uid: 10001, gid: 10001 },
    };
  }

  async function leftovers(sessionId: string): Promise<string[]> {
    const kinds = ['Pod', 'Service', 'NetworkPolicy'] as const;
    const lists = await Promise.all(kinds.map((k) => api.list(k, `hintbox.session=${sessionId}`)));
    return lists.flatMap((list, i) => list.map((o) => `${kinds[i]} ${o.metadata.name}`));
  }

  it('holds a sandbox Pod, releases it, answers tools/list and a call as a non-root user on a read-only root, and leaves nothing', async () => {
    kubeConfig.loadFromDefault();
    engine = await KubernetesEngine.connect({
      kubeConfig,
      log,
      namespace: NAMESPACE,
      gateImage: GATE_IMAGE,
      hostName: 'hintbox-cluster-test',
    });
    api = new KubeApi(kubeConfig, NAMESPACE);
    const sessionId = newSessionId();
    sessions.add(sessionId);
    const held = await engine.hold(spec(sessionId), { log, startTimeoutMs: 120_000 });
    const started = await held.release();
    const { tools } = await started.client.listTools();
    assert.ok(tools.some((t) => t.name === 'identity'));
    const identity = await started.client.callTool({ name: 'identity', arguments: {} });
    assert.doesNotMatch(JSON.stringify(identity.structuredContent), /"uid":0\b/);
    const write = await started.client.callTool({ name: 'write_root', arguments: {} });
    assert.match(JSON.stringify(write.structuredContent), /EROFS|EACCES/);
    assert.equal(await engine.removeSession(sessionId), 1);
    assert.deepEqual(await leftovers(sessionId), []);
  });

  it('an image the cluster cannot pull fails the start in one line and leaves nothing', async () => {
    const sessionId = newSessionId();
    sessions.add(sessionId);
    await assert.rejects(
      engine.hold(spec(sessionId, 'registry.invalid/hintbox-missing:0'), { log, startTimeoutMs: 120_000 }),
      (e: Error) => /cannot start: (ErrImagePull|ImagePullBackOff)/.test(e.message) && !e.message.includes('\n'),
    );
    assert.deepEqual(await leftovers(sessionId), []);
  });
});
