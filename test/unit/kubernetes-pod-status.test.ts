import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { podProgress, runningImageId } from '../../src/engine/kubernetes/pod-status.js';
import type { KubeObject } from '../../src/engine/kubernetes/kubernetes-objects.js';

const pod = (status: Record<string, unknown>): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'p' },
  status,
});
const server = (state: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  name: 'server',
  image: 'registry.example/liar:1',
  state,
  ...extra,
});

describe("a sandbox Pod's progress, read from its status", () => {
  it('is running only when the Pod runs and its server container does', () => {
    assert.deepEqual(podProgress(pod({ phase: 'Running', containerStatuses: [server({ running: {} })] }), 'server'), {
      state: 'running',
    });
    assert.equal(
      podProgress(pod({ phase: 'Pending', containerStatuses: [server({ running: {} })] }), 'server').state,
      'pending',
    );
    assert.equal(podProgress(pod({}), 'server').state, 'pending');
  });

  it('says at once, in one line, what never comes up: an unpullable image, a failed gate copy, an ended Pod', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [
        {
          phase: 'Pending',
          containerStatuses: [server({ waiting: { reason: 'ImagePullBackOff', message: 'Back-off\npulling' } })],
        },
        /^image registry\.example\/liar:1 cannot start: ImagePullBackOff: Back-off pulling \(is it in a registry the cluster can pull from\?\)$/,
      ],
      [
        {
          phase: 'Pending',
          initContainerStatuses: [{ name: 'gate', state: { terminated: { exitCode: 1, reason: 'Error' } } }],
        },
        /^its gate \(the initContainer\) ended with code 1: Error$/,
      ],
      [
        { phase: 'Failed', reason: 'Evicted', message: 'low on memory' },
        /^it ended \(Failed: Evicted: low on memory\)$/,
      ],
      [
        { phase: 'Running', containerStatuses: [server({ terminated: { exitCode: 0 } })] },
        /^image .* ended with code 0$/,
      ],
    ];
    for (const [status, why] of cases) {
      const progress = podProgress(pod(status), 'server');
      assert.equal(progress.state, 'failed', JSON.stringify(status));
      assert.match((progress as { why: string }).why, why);
    }
  });

  it('waits, saying why, for what the cluster may still resolve (scheduling, a container being created)', () => {
    const unscheduled = podProgress(
      pod({
        phase: 'Pending',
        conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/3 nodes' }],
      }),
      'server',
    );
    assert.deepEqual(unscheduled, { state: 'pending', why: 'not scheduled: Unschedulable: 0/3 nodes' });
    const creating = podProgress(
      pod({ phase: 'Pending', containerStatuses: [server({ waiting: { reason: 'ContainerCreating' } })] }),
      'server',
    );
    assert.deepEqual(creating, { state: 'pending', why: 'waiting: ContainerCreating' });
    // An initContainer that copied the gate and ended well is done, not a failure.
    const copied = podProgress(
      pod({ phase: 'Pending', initContainerStatuses: [{ name: 'gate', state: { terminated: { exitCode: 0 } } }] }),
      'server',
    );
    assert.equal(copied.state, 'pending');
  });

  it('reads the image the runtime resolved, for pinning later Pods', () => {
    const id = `registry.example/liar@sha256:${'a'.repeat(64)}`;
    assert.equal(runningImageId(pod({ containerStatuses: [server({ running: {} }, { imageID: id })] }), 'server'), id);
    assert.equal(runningImageId(pod({}), 'server'), undefined);
  });
});
