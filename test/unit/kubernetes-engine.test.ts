import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import { KubernetesEngine } from '../../src/engine/kubernetes/kubernetes-engine.js';
import type { KubeObject } from '../../src/engine/kubernetes/kubernetes-objects.js';
import type { SandboxSpec } from '../../src/engine/sandbox-engine.js';
import { createLogger } from '../../src/util/logger.js';
import { delay } from '../../src/util/delay.js';
import { packagePath } from '../../src/util/package-root.js';
import { childrenOf, KubeStandIn } from './support/kube-stand-in.js';

/**
 * The Kubernetes engine behind the engine port, against a stand-in API server and kubelet
 * (support/kube-stand-in.ts: the real REST and attach wire protocol; Pods run as local
 * processes, the real gate executing the real liar fixture server). No control plane can be had
 * here: what a cluster enforces (securityContext, volumes, NetworkPolicy) is the renderer's tests,
 * `podman kube play`'s, and the real-cluster suite's (integration/kubernetes-cluster.test.ts).
 */

const GATE = packagePath('dist', 'hintbox-gate');
const LIAR = fileURLToPath(new URL('../fixtures/liar/server.mjs', import.meta.url));
const NS = 'hintbox';
const HOST = 'hintbox-test-host';
const log = createLogger('error');
const hold = { log, startTimeoutMs: 5000 };

let standIn: KubeStandIn;
let engine: KubernetesEngine;

function spec(sessionId: string, overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  return {
    session: { sessionId, ownerHost: HOST, ownerPid: process.pid },
    profile: {
      name: 'liar',
      server: { image: 'registry.example/liar:1' },
      env: {},
      limits: { memory: '256m', cpus: 1, pids: 128, tmpfs: '32m' },
    },
    sandboxId: 'ro-offline',
    grant: { network: 'none', mounts: [] },
    command: [process.execPath, LIAR],
    ...overrides,
  };
}

/** The program a process runs now (its executable), or undefined when it is gone. */
function executable(pid: number | undefined): string | undefined {
  try {
    return pid === undefined ? undefined : readlinkSync(`/proc/${pid}/exe`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

function labelled(
  kind: string,
  name: string,
  labels: Record<string, string>,
  owner?: { name: string; uid: string },
): KubeObject {
  return {
    apiVersion: kind === 'NetworkPolicy' ? 'networking.k8s.io/v1' : 'v1',
    kind,
    metadata: {
      name,
      namespace: NS,
      labels: { 'hintbox.session': 'old', ...labels },
      ...(owner ? { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', ...owner }] } : {}),
    },
    spec: {},
  };
}

before(async () => {
  standIn = await KubeStandIn.start({ gate: GATE, unpullable: ['registry.example/missing:1'] });
  engine = await KubernetesEngine.connect({
    kubeConfig: standIn.kubeConfig(NS),
    log,
    gateImage: 'registry.example/hintbox:1',
    hostName: HOST,
    pollMs: 20,
  });
});

beforeEach(() => standIn.forbidden.clear());

after(async () => {
  await standIn.stop();
});

describe(
  'the Kubernetes engine (stand-in API, real gate)',
  { skip: existsSync(GATE) ? false : 'the gate is not built (npm run build)' },
  () => {
    // proves: K8S-ENGINE
    it('holds a sandbox Pod behind its NetworkPolicy, runs nothing until release, then speaks MCP; removeSession leaves nothing', async () => {
      const held = await engine.hold(spec('k8sa1'), hold);
      const pod = held.containerId;
      const pid = standIn.pid(NS, pod);
      // The policy is made before the Pod: the Pod never runs unfenced.
      const posts = standIn.requests.filter((r) => r.startsWith('POST'));
      assert.deepEqual(posts.slice(-2), [
        `POST /apis/networking.k8s.io/v1/namespaces/${NS}/networkpolicies`,
        `POST /api/v1/namespaces/${NS}/pods`,
      ]);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(executable(pid), GATE, 'while held, the Pod runs only the gate');
      assert.deepEqual(childrenOf(pid as number), [], 'and nothing else');
      const started = await held.release();
      // The gate stays the first process (to freeze the sandbox); the server is its child.
      assert.equal(executable(pid), GATE, 'released: the gate stays');
      const server = childrenOf(pid as number);
      assert.deepEqual(server.map(executable), [process.execPath], 'and runs the server');
      const { tools } = await started.client.listTools();
      assert.ok(tools.some((t) => t.name === 'identity'));
      const result = await started.client.callTool({ name: 'identity', arguments: {} });
      assert.notEqual(result.isError, true, JSON.stringify(result));
      const [listed] = await engine.sandboxesOf(process.pid);
      assert.deepEqual(
        { ...listed, mounts: listed?.mounts.filter((m) => m.target.startsWith('/run/hintbox')) },
        {
          sandboxClass: 'ro-offline',
          network: 'none (NetworkPolicy)',
          mounts: [{ target: '/run/hintbox/bin', readOnly: true }],
          user: '10001:10001',
          capabilitiesDropped: ['ALL'],
        },
      );
      assert.equal(await engine.removeSession('k8sa1'), 1);
      assert.deepEqual(standIn.names('Pod'), []);
      assert.deepEqual(standIn.names('NetworkPolicy'), []);
      await started.closed;
      assert.equal(executable(pid), undefined, 'the server process is gone');
    });

    // proves: K8S-ENGINE
    it('an image the cluster cannot pull fails the start in one line, and leaves no Pod and no NetworkPolicy', async () => {
      const missing = spec('k8sb1', {
        profile: { ...spec('x').profile, server: { image: 'registry.example/missing:1' } },
      });
      await assert.rejects(engine.hold(missing, hold), (e: Error) => {
        assert.match(
          e.message,
          /^sandbox ro-offline: pod hintbox\/\S+: image registry\.example\/missing:1 cannot start: ErrImagePull.*registry the cluster can pull from/,
        );
        assert.equal(e.message.split('\n').length, 1);
        return true;
      });
      assert.deepEqual(standIn.names('Pod'), []);
      assert.deepEqual(standIn.names('NetworkPolicy'), []);
    });

    // proves: K8S-ENGINE
    it('an API that refuses the Pod (RBAC) fails the start in one line, and the NetworkPolicy made before it is deleted', async () => {
      standIn.forbidden.add('POST Pod');
      await assert.rejects(engine.hold(spec('k8sc1'), hold), (e: Error) => {
        assert.match(
          e.message,
          /^sandbox ro-offline: cannot create Pod \S+ in namespace hintbox: HTTP 403: pods is forbidden/,
        );
        return true;
      });
      assert.deepEqual(standIn.names('NetworkPolicy'), []);
      assert.deepEqual(standIn.names('Pod'), []);
    });

    // proves: K8S-ENGINE
    it('a database grant or an open network is refused before anything is sent to the cluster', async () => {
      const before = standIn.requests.length;
      await assert.rejects(
        engine.hold(spec('k8sd1', { database: { socketDir: '/tmp/x', env: {} } }), hold),
        /sandbox ro-offline: a database grant is not rendered for Kubernetes yet/,
      );
      await assert.rejects(
        engine.hold(spec('k8sd1', { grant: { network: 'bridge', mounts: [] } }), hold),
        /sandbox ro-offline: an open network \(network: open\) is not rendered for Kubernetes/,
      );
      assert.equal(standIn.requests.length, before);
    });

    // proves: K8S-FREEZE
    it('a released sandbox freezes through its gate over the attach: its server answers nothing until thawed', async () => {
      const started = await (await engine.hold(spec('k8se1', { sandboxId: 'rw-offline' }), hold)).release();
      await started.freeze();
      const listed = started.client.listTools();
      const early = await Promise.race([listed.then(() => 'answered'), delay(700).then(() => 'silent')]);
      assert.equal(early, 'silent', 'the frozen server answered');
      await started.thaw();
      const { tools } = await listed;
      assert.ok(tools.length > 0, 'and answers once thawed');
      await started.remove();
      assert.deepEqual(standIn.names('Pod'), []);
    });

    // proves: K8S-ENGINE
    it('an egress class gets its proxy Pod, Service and policy first, and reaches it by the Service address only', async () => {
      const held = await engine.hold(
        spec('k8sf1', {
          sandboxId: 'ro-egress',
          grant: { network: 'egress', mounts: [], egress: { hosts: ['docs.example.com:443'], scope: 'allow' } },
        }),
        hold,
      );
      const sandbox = standIn.objects.get(`Pod/${NS}/${held.containerId}`) as KubeObject;
      const env = (sandbox.spec as { containers: { env: { name: string; value: string }[] }[] }).containers[0]!.env;
      const service = standIn.names('Service')[0] as string;
      const ip = (standIn.objects.get(`Service/${NS}/${service}`)?.spec as { clusterIP: string }).clusterIP;
      assert.equal(env.find((e) => e.name === 'HTTPS_PROXY')?.value, `http://${ip}:3128`);
      assert.equal(standIn.names('Pod').length, 2);
      await held.remove();
      assert.equal(await engine.removeSession('k8sf1'), 1, 'the proxy Pod was left for the session');
      assert.deepEqual([...standIn.objects.keys()], []);
    });

    // proves: K8S-ENGINE
    it('refuses to start, in one line, without a cluster or, outside a Pod, without a gate image', async () => {
      await assert.rejects(
        KubernetesEngine.connect({ kubeConfig: new KubeConfig(), log }),
        (e: Error) => e.message === 'the Kubernetes engine: no cluster found (set KUBECONFIG, or run hintbox in a Pod)',
      );
      // A Pod bearing this host's name is not taken for hintbox's own outside a Pod.
      standIn.put({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: HOST, namespace: NS },
        spec: { containers: [{ image: 'x' }] },
      });
      await assert.rejects(
        KubernetesEngine.connect({ kubeConfig: standIn.kubeConfig(NS), log, hostName: HOST }),
        (e: Error) =>
          /^HINTBOX_GATE_IMAGE: hintbox runs outside the cluster .*: name an image the cluster/.test(e.message),
      );
      standIn.objects.delete(`Pod/${NS}/${HOST}`);
    });

    // proves: K8S-SWEEP
    it('sweep removes the objects of dead hintbox processes (this host) and of owner Pods that are gone, and nothing else', async () => {
      const dead = spawnSync(process.execPath, ['-e', '']).pid;
      standIn.put({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'hintbox-replica', namespace: NS, uid: 'live-uid' },
      });
      const here = { 'hintbox.owner-host': HOST };
      const there = { 'hintbox.owner-host': 'hintbox-replica', 'hintbox.owner-pid': '1' };
      standIn.put(labelled('Pod', 'dead-here', { ...here, 'hintbox.owner-pid': String(dead) }));
      standIn.put(labelled('NetworkPolicy', 'dead-here', { ...here, 'hintbox.owner-pid': String(dead) }));
      standIn.put(labelled('Pod', 'live-here', { ...here, 'hintbox.owner-pid': String(process.pid) }));
      standIn.put(labelled('Pod', 'replica-live', there, { name: 'hintbox-replica', uid: 'live-uid' }));
      standIn.put(labelled('Pod', 'replica-replaced', there, { name: 'hintbox-replica', uid: 'old-uid' }));
      standIn.put(labelled('Service', 'replica-gone', there, { name: 'hintbox-gone', uid: 'gone-uid' }));
      standIn.put(labelled('Pod', 'unknown-owner', there));
      const swept = await engine.sweepOrphans(log);
      assert.deepEqual(swept.sort(), ['dead-here', 'replica-replaced']);
      assert.deepEqual(standIn.names('Pod').sort(), ['hintbox-replica', 'live-here', 'replica-live', 'unknown-owner']);
      assert.deepEqual(standIn.names('NetworkPolicy'), []);
      assert.deepEqual(standIn.names('Service'), []);
      for (const key of [...standIn.objects.keys()]) standIn.objects.delete(key);
    });
  },
);
