import { it } from 'node:test';
import assert from 'node:assert/strict';
import { chownSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { delay } from '../../src/util/delay.js';
import { packagePath } from '../../src/util/package-root.js';
import { KubeStandIn } from '../unit/support/kube-stand-in.js';
import { scratchFolder } from '../support/scratch-folder.js';
import { hintboxCommand, runHintbox, writeProfile } from './support/hintbox-process.js';
import { integrationSuite } from './support/suite.js';

/**
 * `hintbox run --engine kubernetes` as a person runs it (the built CLI, a kubeconfig file, an MCP
 * client on stdio) against the stand-in API server and kubelet of the engine's unit test: the
 * session's sandboxes become Pods whose real gate runs the real liar fixture, and what a
 * hintbox killed with SIGKILL left is swept by the next start.
 */

const GATE = packagePath('dist', 'hintbox-gate');
const LIAR = fileURLToPath(new URL('../fixtures/liar/server.mjs', import.meta.url));
const TICKER = fileURLToPath(new URL('../fixtures/kubernetes/ticker.mjs', import.meta.url));

integrationSuite(
  'hintbox run on Kubernetes (stand-in API)',
  { timeout: 120_000, skip: existsSync(GATE) ? false : 'the gate is not built (npm run build)' },
  (suite) => {
    // proves: K8S-SWEEP
    it("serves the server's tools from sandbox Pods; the Pods a killed hintbox left are swept by the next start and by hintbox sweep", async () => {
      const standIn = await KubeStandIn.start({ gate: GATE });
      suite.defer(() => standIn.stop());
      const kubeconfig = path.join(scratchFolder('hintbox-kubeconfig-'), 'config');
      writeFileSync(kubeconfig, standIn.kubeConfig('hintbox').exportConfig(), { mode: 0o600 });
      const profile = writeProfile({
        name: 'k8sliar',
        server: { image: 'registry.example/liar:1', command: [process.execPath, LIAR] },
        trust: 'trusted',
      });
      const env = { KUBECONFIG: kubeconfig, HINTBOX_GATE_IMAGE: 'registry.example/hintbox:1' };

      await using first = await runHintbox(profile, { env, args: ['--engine', 'kubernetes'] });
      const { tools } = await first.client.listTools();
      assert.ok(
        tools.some((t) => t.name === 'identity'),
        first.stderr(),
      );
      const identity = await first.client.callTool({ name: 'identity', arguments: {} });
      assert.notEqual(identity.isError, true, JSON.stringify(identity));
      const left = standIn.names('Pod');
      assert.ok(left.length > 0, 'the session runs in Pods');
      process.kill(first.pid, 'SIGKILL');
      await first.exited;
      assert.deepEqual(standIn.names('Pod'), left, 'a killed hintbox removes nothing itself');

      // The next start (HINTBOX_ENGINE this time) sweeps them before its own session.
      await using second = await runHintbox(profile, { env: { ...env, HINTBOX_ENGINE: 'kubernetes' } });
      await second.client.listTools();
      for (const pod of left) assert.ok(!standIn.names('Pod').includes(pod), `${pod} was swept`);
      assert.ok(
        left.every((pod) => !standIn.names('NetworkPolicy').includes(pod)),
        'and their NetworkPolicies',
      );
      const secondPods = standIn.names('Pod');
      assert.ok(secondPods.length > 0, 'the second session runs in Pods');

      // `hintbox sweep --engine kubernetes` sweeps a killed hintbox's Pods too, and only those.
      const third = await runHintbox(profile, { env, args: ['--engine', 'kubernetes'] });
      await third.client.listTools();
      const thirdPods = standIn.names('Pod').filter((pod) => !secondPods.includes(pod));
      assert.ok(thirdPods.length > 0, 'the third session runs in Pods');
      process.kill(third.pid, 'SIGKILL');
      await third.exited;
      await third.client.close().catch(() => undefined);
      const swept = await hintboxCommand(['sweep', '--engine', 'kubernetes'], env);
      assert.equal(swept.code, 0, swept.stderr);
      assert.match(swept.stderr, new RegExp(`swept ${thirdPods.length} sandbox\\(es\\)`));
      assert.deepEqual(standIn.names('Pod').sort(), [...secondPods].sort(), "the killed run's Pods, not the live ones");

      await second.client.close();
      await second.exited;
      assert.deepEqual(standIn.names('Pod'), [], "the second session's Pods are removed at its end");
      assert.deepEqual(standIn.names('NetworkPolicy'), []);
    });

    // proves: K8S-FREEZE
    it("keeps a held writer's Pod frozen between calls, even when its server prints the gate's answers or attacks the gate as its uid", async () => {
      const standIn = await KubeStandIn.start({ gate: GATE });
      suite.defer(() => standIn.stop());
      const dir = scratchFolder('hintbox-kubeconfig-');
      const kubeconfig = path.join(dir, 'config');
      writeFileSync(kubeconfig, standIn.kubeConfig('hintbox').exportConfig(), { mode: 0o600 });
      const data = scratchFolder('hintbox-ticker-');
      chownSync(data, 10001, 10001); // the sandbox user may write its mount
      const ticksFile = path.join(data, 'ticks.log');
      const ticks = (): number => (existsSync(ticksFile) ? readFileSync(ticksFile, 'utf8').split('\n').length - 1 : 0);
      const profile = writeProfile({
        name: 'k8sticker',
        server: { image: 'registry.example/ticker:1', command: [process.execPath, TICKER] },
        // A writable mount makes the class a held writer (the stand-in mounts nothing: the
        // server writes the host's file by its own path).
        mounts: [{ name: 'data', source: data, target: '/data' }],
        env: { TICKS_FILE: ticksFile },
        trust: 'trusted',
      });
      const env = { KUBECONFIG: kubeconfig, HINTBOX_GATE_IMAGE: 'registry.example/hintbox:1' };
      await using hintbox = await runHintbox(profile, { env, args: ['--engine', 'kubernetes'] });
      const call = async (name: string): Promise<void> => {
        const result = await hintbox.client.callTool({ name, arguments: {} });
        assert.notEqual(result.isError, true, `${name}: ${JSON.stringify(result)}\n${hintbox.stderr()}`);
      };
      /** The writer's Pod after a call: still the same one, and not one tick while no call is in flight. */
      const frozenBetweenCalls = async (pods: string[]): Promise<void> => {
        await delay(300); // the freeze after the call's answer
        const atFreeze = ticks();
        await delay(1000);
        assert.equal(ticks(), atFreeze, `not one tick while no call was in flight\n${hintbox.stderr()}`);
        assert.deepEqual(standIn.names('Pod'), pods, 'the same Pod, kept between calls');
      };

      await call('tick');
      assert.ok(ticks() > 0, 'the writer ran during its call');
      const pods = standIn.names('Pod');
      assert.equal(pods.length, 1, JSON.stringify(pods));
      await frozenBetweenCalls(pods);
      // The attack: its stdout carries the gate's answers and frames, during the call and after
      // its answer (while hintbox freezes it).
      await call('forge');
      await frozenBetweenCalls(pods);
      // The server runs as the gate's own uid (the Pod's runAsUser): it may signal, read and
      // open what is its own (the control: a child of its own), but not the gate's environment,
      // descriptors or memory (the gate is not dumpable), and its signals to PID 1 are dropped.
      const probe = await hintbox.client.callTool({ name: 'probe_gate', arguments: {} });
      const probed = probe.structuredContent as {
        uid: number;
        control: Record<string, string>;
        gate: Record<string, string>;
        gateState: string;
      };
      assert.equal(probed.uid, 10001, JSON.stringify(probed));
      assert.deepEqual(
        probed.control,
        { uid: 'ok', environ: 'ok', fds: 'ok', mem: 'ok', stop: 'ok', kill: 'ok' },
        'the same attempts succeed on a process of its own',
      );
      assert.equal(probed.gate.uid, 'ok', 'the gate runs as the same uid as the server');
      for (const what of ['environ', 'fds', 'mem'] as const) {
        assert.match(probed.gate[what] ?? '', /^E(ACCES|PERM)$/, `${what}: ${JSON.stringify(probed)}`);
      }
      assert.notEqual(probed.gateState, 'T', 'the gate was not stopped');
      await frozenBetweenCalls(pods);
      const before = ticks();
      await call('tick');
      assert.ok(ticks() > before, 'and it ran again during the call');
      await frozenBetweenCalls(pods);
      await hintbox.client.close();
      await hintbox.exited;
      assert.deepEqual(standIn.names('Pod'), []);
    });
  },
);
