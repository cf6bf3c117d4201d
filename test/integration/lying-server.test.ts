import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { GenericContainer, Wait, type StartedTestContainer } from 'testcontainers';
import { LABEL_CLASS, LABEL_SERVER, LABEL_SESSION } from '../../src/engine/sandbox-labels.js';
import {
  CANARY_IMAGE,
  defaultBridgeGateway,
  containersOf,
  docker,
  ensureTestImages,
  eventually,
  LIAR_IMAGE,
} from './support/docker.js';
import {
  hintboxCommand,
  outcomeOf,
  runHintbox,
  sandboxFolder,
  writeProfile,
  type RunningHintbox,
} from './support/hintbox-process.js';

const CANARY_PORT = 7070;
const CANARY_SERVER = `require('net').createServer((s) => s.end('canary\\n')).listen(${CANARY_PORT}, () => console.log('canary listening'))`;

/**
 * A server whose every annotated tool claims { readOnlyHint: true, openWorldHint: false } and
 * then tries to write, to reach the network, to escalate. Each attempt must fail, and the state
 * it aimed at must be unchanged. Positive controls (the unannotated tools, which get the
 * profile's whole ceiling) show that the same attempts succeed where the sandbox allows them,
 * so the failures are the sandbox's doing.
 */
integrationSuite('a lying server under hintbox run', { timeout: 240_000, images: [ensureTestImages] }, (suite) => {
  let canary: StartedTestContainer;
  let canaryIp: string;
  let canaryPort: number;
  let workspace: string;
  let profile: string;
  let hintbox: RunningHintbox;
  const precious = 'bytes the liar must not change\n';

  before(async () => {
    canary = await new GenericContainer(CANARY_IMAGE)
      .withCommand(['node', '-e', CANARY_SERVER])
      .withLabels({ 'hintbox-test': 'canary' })
      .withExposedPorts(CANARY_PORT)
      .withWaitStrategy(Wait.forLogMessage('canary listening'))
      .start();
    suite.defer(() => canary.stop());
    // An open sandbox reaches no other container by its address (its session's network is its
    // own), but the host's published port, as it would a service outside.
    canaryIp = await defaultBridgeGateway(canary.getId());
    canaryPort = canary.getMappedPort(CANARY_PORT);
    workspace = sandboxFolder();
    writeFileSync(path.join(workspace, 'precious.txt'), precious);
    profile = writeProfile({
      name: `liar-${process.pid}`,
      server: { image: LIAR_IMAGE },
      trust: 'trusted',
      mounts: [{ source: workspace, target: '/data' }],
      // The ceiling allows network, so only the hints decide who gets it.
      network: 'open',
      limits: { pids: 64, memory: '128m' },
    });
    hintbox = suite.use(await runHintbox(profile));
  });

  const call = async (name: string, args: Record<string, unknown> = {}) =>
    outcomeOf(await hintbox.client.callTool({ name, arguments: args }));

  it('plans the lying tools into a read-only, network-less sandbox and the unannotated ones at the ceiling', async () => {
    const { code, stdout, stderr } = await hintboxCommand(['plan', profile, '--json']);
    assert.equal(code, 0, stderr);
    const plan = JSON.parse(stdout) as {
      tools: { name: string; sandbox: string; effective: Record<string, boolean>; enforced: boolean }[];
      sandboxes: { id: string; network: string; mounts: { readOnly: boolean; target: string }[] }[];
    };
    const sandboxOf = (tool: string) => {
      const id = plan.tools.find((t) => t.name === tool)?.sandbox;
      return plan.sandboxes.find((s) => s.id === id);
    };
    const liar = sandboxOf('write_mounted');
    assert.equal(liar?.network, 'none');
    assert.deepEqual(
      liar?.mounts.map((m) => m.readOnly),
      [true],
    );
    const unannotated = sandboxOf('unannotated_write');
    assert.equal(unannotated?.network, 'bridge', 'no annotations: the ceiling (open) exactly');
    assert.deepEqual(
      unannotated?.mounts.map((m) => [m.target, m.readOnly]),
      [['/data', false]],
    );
    assert.equal(plan.sandboxes.length, 2);
  });

  // proves: RO-MOUNTS
  it('cannot write to its read-only mount, and the file is byte-identical', async () => {
    const result = await call('write_mounted', { path: '/data/precious.txt', content: 'overwritten' });
    assert.equal(result.ok, false);
    assert.equal(result.error, 'EROFS');
    assert.equal(readFileSync(path.join(workspace, 'precious.txt'), 'utf8'), precious);
    const created = await call('write_mounted', { path: '/data/new.txt', content: 'x' });
    assert.equal(created.ok, false);
    assert.equal(existsSync(path.join(workspace, 'new.txt')), false);
  });

  // proves: RO-ROOTFS
  it('cannot write to the root file system', async () => {
    const result = await call('write_root');
    assert.equal(result.ok, false);
    assert.match(String(result.error), /EROFS|EACCES/);
  });

  // proves: CLOSED-WORLD
  it('cannot reach a canary TCP server that an unannotated tool of the same server reaches', async () => {
    const control = await call('unannotated_connect', { host: canaryIp, port: canaryPort });
    assert.deepEqual(control, { ok: true, value: 'canary' }, 'the canary must be reachable where the ceiling allows');
    const result = await call('connect', { host: canaryIp, port: canaryPort });
    assert.equal(result.ok, false);
    assert.match(String(result.error), /ENETUNREACH|EHOSTUNREACH|ECONNREFUSED|ETIMEDOUT/);
  });

  // proves: CLOSED-WORLD
  it('cannot resolve a host name', async () => {
    const result = await call('resolve', { name: 'canary.hintbox.test' });
    assert.equal(result.ok, false);
    assert.match(String(result.error), /EAI_AGAIN|ENOTFOUND|ECONNREFUSED/);
  });

  // proves: NO-ROOT
  it('runs as a non-root user with no effective capabilities and no new privileges', async () => {
    const result = await call('identity');
    assert.equal(result.ok, true);
    const identity = result.value as { uid: number; capEff: string; noNewPrivs: string };
    assert.notEqual(identity.uid, 0);
    assert.equal(BigInt(`0x${identity.capEff}`), 0n);
    assert.equal(identity.noNewPrivs, '1');
  });

  // proves: LIMITS
  it('is stopped by the pids limit when it forks without end, and the test process stays responsive', async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 20);
    const started = Date.now();
    const result = await call('fork_bomb');
    clearInterval(timer);
    assert.equal(result.ok, true);
    const bomb = result.value as { spawned: number; stoppedBy: string };
    assert.ok(bomb.spawned < 64, `spawned ${bomb.spawned} processes under a pids limit of 64`);
    assert.match(bomb.stoppedBy, /EAGAIN/);
    // The event loop kept turning during the call (a tick every 20 ms, allowing for noise).
    assert.ok(ticks >= Math.floor((Date.now() - started) / 20 / 4), `only ${ticks} ticks`);
    assert.equal((await call('identity')).ok, true, 'the sandbox still answers after the fork bomb');
  });

  // proves: CEILING
  it('gives a tool without annotations exactly the ceiling: it may write the mount', async () => {
    const result = await call('unannotated_write', { path: '/data/by-unannotated.txt', content: 'ceiling' });
    assert.deepEqual(result, { ok: true, value: 'written' });
    assert.equal(readFileSync(path.join(workspace, 'by-unannotated.txt'), 'utf8'), 'ceiling');
  });

  // proves: STDIO
  it("logs the server's stderr on hintbox's stderr, never in the MCP stream", () => {
    // The liar writes "liar: ready" to stderr; had it reached stdout, the client would have seen junk.
    assert.match(hintbox.stderr(), /\[liar-\d+\/ro-offline\]: liar: ready/);
  });

  // proves: HARDENING
  it('hardens every sandbox container (inspect)', async () => {
    const { docker: d } = await docker();
    const containers = await containersOf(hintbox.pid, false);
    assert.equal(containers.length, 2);
    for (const c of containers) {
      const info = await d.getContainer(c.Id).inspect();
      const host = info.HostConfig;
      assert.deepEqual(host.CapDrop, ['ALL']);
      assert.ok(host.SecurityOpt?.includes('no-new-privileges:true'), 'no-new-privileges');
      assert.equal(host.ReadonlyRootfs, true);
      assert.equal(host.Privileged, false);
      // No engine init: the gate is the sandbox's first process (PID 1), which the server cannot signal.
      assert.equal(host.Init ?? false, false);
      const first = readFileSync(`/proc/${info.State.Pid}/cmdline`, 'latin1').split('\0')[0];
      assert.equal(first, '/run/hintbox/gate', "the container's first process is hintbox's gate");
      assert.equal(host.PidsLimit, 64);
      assert.equal(host.Memory, 128 * 1024 * 1024);
      assert.equal(host.MemorySwap, host.Memory);
      assert.ok((host.NanoCpus ?? 0) > 0, 'a CPU limit');
      assert.ok(
        !/^0(:|$)/.test(info.Config.User) && info.Config.User !== '' && info.Config.User !== 'root',
        `user ${info.Config.User} is not root`,
      );
      assert.ok(
        info.Mounts.every((m) => !m.Source.includes('docker.sock')),
        'no Docker socket',
      );
      assert.ok(c.Labels[LABEL_SESSION] && c.Labels[LABEL_SERVER] && c.Labels[LABEL_CLASS], 'the three labels');
      if (c.Labels[LABEL_CLASS] === 'ro-offline') {
        assert.equal(host.NetworkMode, 'none');
        assert.deepEqual(
          info.Mounts.map((m) => m.RW),
          [false, false, false],
          'the workspace, the gate and its socket folder: all read-only',
        );
      }
    }
  });

  // proves: CLEANUP
  it('removes every container when the client disconnects', async () => {
    const pid = hintbox.pid;
    await hintbox.client.close();
    await hintbox.exited;
    await eventually(async () => (await containersOf(pid)).length === 0, 15_000, 'no containers of the session');
  });
});

integrationSuite('a server whose ceiling is no network', { timeout: 120_000 }, () => {
  // proves: CEILING
  it('gives an unannotated tool no network either', async () => {
    await ensureTestImages();
    const canary = await new GenericContainer(CANARY_IMAGE)
      .withCommand(['node', '-e', CANARY_SERVER])
      .withWaitStrategy(Wait.forLogMessage('canary listening'))
      .start();
    try {
      const profile = writeProfile({
        name: `liar-closed-${process.pid}`,
        server: { image: LIAR_IMAGE },
        trust: 'trusted',
        network: 'none',
      });
      await using hintbox = await runHintbox(profile);
      const result = outcomeOf(
        await hintbox.client.callTool({
          name: 'unannotated_connect',
          arguments: { host: canary.getIpAddress('bridge'), port: CANARY_PORT },
        }),
      );
      assert.equal(result.ok, false);
    } finally {
      await canary.stop();
    }
  });
});
