import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, it } from 'node:test';
import { GenericContainer, Wait, type StartedTestContainer } from 'testcontainers';
import type {
  HeldSandbox,
  PreparedImage,
  SandboxEngine,
  SandboxSpec,
  SessionIdentity,
  StartedSandbox,
} from '../../../src/engine/sandbox-engine.js';
import type { SandboxGrant } from '../../../src/policy/plan-sandboxes.js';
import { loadProfile } from '../../../src/profile/load-profile.js';
import { createLogger } from '../../../src/util/logger.js';
import { newSessionId, sessionIdentity } from '../../../src/util/session-identity.js';
import {
  CANARY_IMAGE,
  defaultBridgeGateway,
  ensureTestImages,
  HOSTNAME,
  LIAR_IMAGE,
  ownHintboxProcess,
} from './docker.js';
import { outcomeOf, sandboxFolder, writeProfile } from './hintbox-process.js';
import { integrationSuite } from './suite.js';

/**
 * What every sandbox engine must do (the port's JSDoc, src/engine/sandbox-engine.ts), asked
 * through the port alone: `engineContract('Docker', () => DockerEngine.connect(…))`, and the same
 * suite for any engine that comes later. The server is the liar fixture (it attempts what its
 * tools are asked to); every promise is shown by an attempt that fails and a state that did not
 * change, beside a control that the same attempt works where it is granted.
 */
export function engineContract(
  name: string,
  makeEngine: () => Promise<SandboxEngine>,
  /** `refused`: the engine refuses every sandbox with a network (Podman: see engine-networks.ts) instead of starting it. */
  networks: 'kept' | 'refused' = 'kept',
): void {
  const log = createLogger(process.env.HINTBOX_TEST_VERBOSE ? 'debug' : 'warn');
  const options = { log, startTimeoutMs: 60_000 };
  const profile = () =>
    loadProfile(
      writeProfile({
        name: `contract-${process.pid}`,
        server: { image: LIAR_IMAGE },
        limits: { memory: '128m', cpus: 1, pids: 64, tmpfs: '16m' },
      }),
    );

  integrationSuite(
    `the ${name} engine keeps the sandbox engine contract`,
    { timeout: 300_000, images: [ensureTestImages] },
    (suite) => {
      let engine: SandboxEngine;
      let image: PreparedImage;
      /** Everything the suite holds, removed at its end by session whatever failed. */
      const sessions = new Set<string>();
      const session = (identity: SessionIdentity = sessionIdentity(newSessionId())): SessionIdentity => {
        sessions.add(identity.sessionId);
        return identity;
      };
      const spec = (identity: SessionIdentity, sandboxId: string, grant: SandboxGrant, command?: string[]) => {
        const { name: server, server: s, env, limits } = profile();
        return {
          session: identity,
          profile: { name: server, server: s, env, limits },
          sandboxId,
          grant,
          command: command ?? image.command,
          imageId: image.id,
        } satisfies SandboxSpec;
      };
      const offline = (mounts: SandboxGrant['mounts'] = []): SandboxGrant => ({ network: 'none', mounts });
      const start = async (s: SandboxSpec): Promise<StartedSandbox> => (await engine.hold(s, options)).release();
      const call = async (sandbox: StartedSandbox, tool: string, args: Record<string, unknown> = {}) =>
        outcomeOf(await sandbox.client.callTool({ name: tool, arguments: args }));

      // The sandboxes this process makes carry its pid as their owner: the leftovers check answers for them.
      ownHintboxProcess(process.pid);
      suite.defer(async () => {
        for (const id of sessions) await engine?.removeSession(id);
        await engine?.close();
      });
      before(async () => {
        engine = await makeEngine();
        image = await engine.prepareImage(profile());
      });

      it('prepares the server image and resolves what it runs', () => {
        assert.ok(image.id, 'a content id');
        assert.ok(image.command.length > 0, 'a command');
      });

      it('runs nothing of the image until release, and a held sandbox removed never ran', async () => {
        const workspace = sandboxFolder();
        const marker = path.join(workspace, 'ran');
        const writeMarker = [
          'node',
          '-e',
          "require('fs').writeFileSync('/data/ran', 'ran'); setInterval(() => {}, 1e6)",
        ];
        const held: HeldSandbox = await engine.hold(
          spec(
            session(),
            'rw-offline',
            offline([{ source: workspace, target: '/data', readOnly: false }]),
            writeMarker,
          ),
          options,
        );
        await new Promise((r) => setTimeout(r, 2000));
        assert.equal(existsSync(marker), false, 'nothing of the image ran while held');
        await held.remove();
        await held.remove(); // idempotent
        assert.equal(existsSync(marker), false, 'nor after its removal');
      });

      it('mounts read-only what the grant says: a write there fails and the bytes do not change; the read-write mount takes it', async () => {
        const ro = sandboxFolder();
        const rw = sandboxFolder();
        const precious = 'bytes no sandbox may change\n';
        // Writable by anyone: only the mount's being read-only may keep the sandbox from it.
        writeFileSync(path.join(ro, 'precious.txt'), precious, { mode: 0o666 });
        chmodSync(path.join(ro, 'precious.txt'), 0o666);
        await using sandbox = await start(
          spec(
            session(),
            'ro-rw-offline',
            offline([
              { source: ro, target: '/ro', readOnly: true },
              { source: rw, target: '/rw', readOnly: false },
            ]),
          ),
        );
        const refused = await call(sandbox, 'write_mounted', { path: '/ro/precious.txt', content: 'overwritten' });
        assert.deepEqual(refused, { ok: false, error: 'EROFS' });
        const created = await call(sandbox, 'write_mounted', { path: '/ro/new.txt', content: 'x' });
        assert.equal(created.ok, false, 'nor a new file there');
        assert.equal(readFileSync(path.join(ro, 'precious.txt'), 'utf8'), precious, 'byte-identical');
        assert.equal(existsSync(path.join(ro, 'new.txt')), false);
        // Control: the same tool writes where the grant allows it.
        assert.deepEqual(await call(sandbox, 'write_mounted', { path: '/rw/out.txt', content: 'granted' }), {
          ok: true,
          value: 'written',
        });
        assert.equal(readFileSync(path.join(rw, 'out.txt'), 'utf8'), 'granted');
      });

      it('runs the server hardened: not root, no capabilities, no new privileges, a read-only root', async () => {
        await using sandbox = await start(spec(session(), 'ro-offline', offline()));
        const identity = await call(sandbox, 'identity');
        assert.equal(identity.ok, true, JSON.stringify(identity));
        const value = identity.value as { uid: number; capEff: string; noNewPrivs: string };
        assert.notEqual(value.uid, 0, 'not root');
        assert.match(value.capEff, /^0+$/, 'no effective capability');
        assert.equal(value.noNewPrivs, '1');
        assert.deepEqual(await call(sandbox, 'write_root'), { ok: false, error: 'EROFS' });
      });

      it('gives a sandbox without a network grant no way to a canary the test runs, which an open one reaches', async () => {
        let canary: StartedTestContainer | undefined;
        try {
          canary = await new GenericContainer(CANARY_IMAGE)
            .withCommand(['node', '-e', CANARY])
            .withExposedPorts(CANARY_PORT)
            .withWaitStrategy(Wait.forLogMessage('canary listening'))
            .start();
          // Its published port on the host, as a service outside would be.
          const at = { host: await defaultBridgeGateway(canary.getId()), port: canary.getMappedPort(CANARY_PORT) };
          if (networks === 'refused') {
            await assert.rejects(engine.hold(spec(session(), 'ro-open', { network: 'bridge', mounts: [] }), options));
          } else {
            await using open = await start(spec(session(), 'ro-open', { network: 'bridge', mounts: [] }));
            assert.deepEqual(
              await call(open, 'connect', at),
              { ok: true, value: 'canary' },
              'control: an open sandbox reaches it',
            );
          }
          await using sandbox = await start(spec(session(), 'ro-offline', offline()));
          const reached = await call(sandbox, 'connect', at);
          assert.equal(reached.ok, false, `the sandbox reached the canary: ${JSON.stringify(reached)}`);
        } finally {
          await canary?.stop();
        }
      });

      it('freezes every process of a sandbox until thaw: a call made meanwhile is answered only after it', async () => {
        await using sandbox = await start(spec(session(), 'ro-offline', offline()));
        await sandbox.freeze();
        let answered = false;
        const pending = call(sandbox, 'identity').then((r) => ((answered = true), r));
        await new Promise((r) => setTimeout(r, 1500));
        assert.equal(answered, false, 'a frozen server answers nothing');
        await sandbox.thaw();
        assert.equal((await pending).ok, true, 'the call is answered once thawed');
      });

      it("labels each sandbox with its session and owner: listed by its owner's pid, and removeSession removes every one of the session and no other", async () => {
        const mine = session();
        const other = session();
        const held = await engine.hold(spec(mine, 'rw-offline', offline()), options);
        const started = await start(spec(mine, 'ro-offline', offline()));
        await using survivor = await start(spec(other, 'ro-offline', offline()));
        const classes = async () => (await engine.sandboxesOf(process.pid)).map((s) => s.sandboxClass).sort();
        assert.deepEqual(await classes(), ['ro-offline', 'ro-offline', 'rw-offline']);
        assert.equal(await engine.removeSession(mine.sessionId), 2, 'both of the session, held and running');
        await started.closed; // its server's stdio ends with it
        assert.deepEqual(await classes(), ['ro-offline'], "only the other session's is left");
        assert.equal((await call(survivor, 'identity')).ok, true, 'the other session still answers');
        await held.remove(); // already gone: idempotent
      });

      it('sweeps the sandboxes of a dead owner on this host and leaves a live one alone', async () => {
        const dead = spawnSync(process.execPath, ['-e', '0']).pid;
        const orphan = await engine.hold(
          spec(session({ sessionId: newSessionId(), ownerHost: HOSTNAME, ownerPid: dead }), 'ro-offline', offline()),
          options,
        );
        const live = await engine.hold(spec(session(), 'ro-offline', offline()), options);
        try {
          const swept = await engine.sweepOrphans(log);
          assert.ok(swept.includes(orphan.containerId), "the dead owner's sandbox is swept");
          assert.equal(swept.includes(live.containerId), false, 'not the live one');
          assert.deepEqual(
            (await engine.sandboxesOf(process.pid)).map((s) => s.sandboxClass),
            ['ro-offline'],
            'the live one is still there',
          );
        } finally {
          await live.remove();
          await orphan.remove();
        }
      });

      it('close() removes what the engine kept for all sessions and refuses a later sandbox that needs it; twice is fine', async () => {
        const identity = session();
        if (networks === 'kept') {
          await using open = await start(spec(identity, 'ro-open', { network: 'bridge', mounts: [] }));
          assert.equal((await call(open, 'identity')).ok, true);
        }
        await engine.removeSession(identity.sessionId);
        await engine.close();
        await engine.close();
        await assert.rejects(engine.hold(spec(session(), 'ro-open', { network: 'bridge', mounts: [] }), options));
      });
    },
  );
}

const CANARY_PORT = 7070;
const CANARY = `require('net').createServer((s) => s.end('canary\\n')).listen(${CANARY_PORT}, () => console.log('canary listening'))`;
