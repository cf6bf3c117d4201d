import assert from 'node:assert/strict';
import { statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { before, it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { stringify } from 'yaml';
import { LABEL_CLASS, LABEL_OWNER_PID, LABEL_SESSION } from '../../src/engine/sandbox-labels.js';
import { LABEL_OPEN_NETWORK } from '../../src/engine/docker/open-network.js';
import { scratchFolder } from '../support/scratch-folder.js';
import {
  containersOf,
  docker,
  ensureSquatterImage,
  eventually,
  sandboxOfClass,
  SQUATTER_IMAGE,
} from './support/docker.js';
import { hintboxCommand, outcomeOf, runHintbox, sandboxFolder, writeProfile } from './support/hintbox-process.js';
import { connect, containersOfServer, leave, serve, type Serving } from './support/serve-process.js';

/**
 * What a sandbox shares with the engine and with other sandboxes: an image's `VOLUME` (Docker
 * would make it an unbounded, disk-backed folder, in read-only classes too) and the network of
 * open sandboxes (Docker's default bridge would let every session's open sandboxes meet).
 */

const MiB = 1024 * 1024;

/** Engine volumes whose folder holds `file` (the fixture's marker): the test runs on the engine's host. */
async function volumesHolding(file: string): Promise<{ name: string; bytes: number }[]> {
  const { docker: d } = await docker();
  const { Volumes } = await d.listVolumes();
  return (Volumes ?? []).flatMap((v) => {
    try {
      return [{ name: v.Name, bytes: statSync(path.join(v.Mountpoint, file)).size }];
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
  });
}

/**
 * Follows the engine's events: the containers a hintbox process creates (by their owner label)
 * and every volume the engine mounts into one of them, discovery sandboxes included.
 */
async function watchVolumeMounts(): Promise<{ mountedFor(pid: number): string[]; stop(): void }> {
  const { docker: d } = await docker();
  const stream = (await d.getEvents({ filters: { type: ['container', 'volume'] } })) as Readable;
  const owners = new Map<string, string>();
  const mounts: { container: string; what: string }[] = [];
  let buffered = '';
  stream.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines.filter(Boolean)) {
      const event = JSON.parse(line) as {
        Type: string;
        Action: string;
        Actor: { ID: string; Attributes: Record<string, string> };
      };
      const attributes = event.Actor.Attributes;
      if (event.Type === 'container' && event.Action === 'create' && attributes[LABEL_OWNER_PID]) {
        owners.set(event.Actor.ID, attributes[LABEL_OWNER_PID]);
      }
      if (event.Type === 'volume' && event.Action === 'mount' && attributes.container) {
        mounts.push({ container: attributes.container, what: `${event.Actor.ID} at ${attributes.destination}` });
      }
    }
  });
  return {
    mountedFor: (pid) => mounts.filter((m) => owners.get(m.container) === String(pid)).map((m) => m.what),
    stop: () => stream.destroy(),
  };
}

integrationSuite('image volumes', { timeout: 300_000, images: [ensureSquatterImage] }, () => {
  // proves: IMAGE-VOLUMES
  it("an image's VOLUME is a bounded tmpfs: a read-only, network-less server fills it at start and with a read-only tool, and no engine volume is made or left", async () => {
    const marker = `squat-${process.pid}-${Date.now()}`;
    const profile = writeProfile({
      name: `squatter-${process.pid}`,
      server: { image: SQUATTER_IMAGE },
      trust: 'trusted',
      network: 'none',
      env: { SQUAT_MB: '64', SQUAT_FILE: marker },
      limits: { pids: 64, memory: '256m', tmpfs: '16m' },
    });
    const events = await watchVolumeMounts();
    try {
      await using hintbox = await runHintbox(profile);
      const call = async (name: string, args: Record<string, unknown> = {}) =>
        outcomeOf(await hintbox.client.callTool({ name, arguments: args })).value as {
          written: number;
          error: string | null;
        };
      // The write the server made at start, in discovery, before any call.
      const squatted = await call('squatted');
      const filled = await call('fill', { dir: '/data', mb: 64 });
      const sandbox = await sandboxOfClass(hintbox.pid, 'nomounts-offline');
      const volumes = sandbox.Mounts.filter((m) => m.Type === 'volume').map((m) => m.Name);
      const holding = await volumesHolding(marker);
      assert.deepEqual(
        { squatted: squatted.error, filled: filled.error, volumes, holding },
        { squatted: 'ENOSPC', filled: 'ENOSPC', volumes: [], holding: [] },
        `the writes stop at the bound, on no engine volume (at start: ${JSON.stringify(squatted)})`,
      );
      assert.ok(squatted.written <= 16 * MiB && filled.written <= 16 * MiB, 'within the bound');
      assert.equal(sandbox.HostConfig.ReadonlyRootfs, true);
      await hintbox[Symbol.asyncDispose]();
      assert.deepEqual(events.mountedFor(hintbox.pid), [], 'no volume was mounted into any sandbox of the run');
      assert.deepEqual(await volumesHolding(marker), [], 'none is left');
    } finally {
      events.stop();
    }
  });
});

/** This machine's own address on its outside network (not loopback, not an engine bridge): stands for the outside world. */
function outsideAddress(): string {
  const address = Object.entries(os.networkInterfaces())
    .filter(([name]) => !/^(docker|br-|veth|lo)/.test(name))
    .flatMap(([, list]) => list ?? [])
    .find((a) => a.family === 'IPv4' && !a.internal)?.address;
  assert.ok(address, 'the host has an outside IPv4 address');
  return address;
}

/** A TCP canary on the host that answers `text` to whoever connects: on `host`, on a free port. */
async function hostCanary(host: string, text: string): Promise<net.Server & { port: number }> {
  const server = net.createServer((socket) => socket.end(`${text}\n`));
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return Object.assign(server, { port: (server.address() as net.AddressInfo).port });
}

integrationSuite('open sandboxes apart', { timeout: 300_000, images: [ensureSquatterImage] }, (suite) => {
  const name = `squatter-open-${process.pid}`;
  const secret = `secret-of-${process.pid}`;
  let serving: Serving;
  let folder: string;
  before(async () => {
    folder = scratchFolder('hintbox-isolation-profiles-');
    const profile = {
      name,
      server: { image: SQUATTER_IMAGE },
      trust: 'trusted',
      clients: 'separate',
      network: 'open',
      // Free to run between calls, so the listener answers as a server left running would.
      hold: false,
      env: { SECRET: secret },
      limits: { pids: 64, memory: '128m' },
    };
    writeFileSync(path.join(folder, 'squatter.yaml'), stringify(profile));
    serving = suite.use(await serve([folder]));
  });
  /** The process's open network, seen by the first test: gone once serve has stopped. */
  let processNetwork: string | undefined;
  // Deferred first, so it runs last: once serve has stopped.
  suite.defer(async () => {
    if (processNetwork) {
      const gone = await (
        await docker()
      ).docker
        .getNetwork(processNetwork)
        .inspect()
        .then(
          () => false,
          (error: { statusCode?: number }) => error.statusCode === 404,
        );
      assert.ok(gone, `${processNetwork} is removed when serve ends`);
    }
  });

  // proves: SANDBOXES-APART
  it("two clients' open sandboxes of one serve cannot reach each other; both still reach the outside, and hintbox's own port no more than before", async () => {
    const url = `${serving.url}/mcp/${name}`;
    const a = await connect(url);
    const b = await connect(url);
    const outside = await hostCanary('0.0.0.0', 'the outside answers');
    const loopbackOnly = await hostCanary('127.0.0.1', 'loopback only');
    const servePort = Number(new URL(serving.url).port);
    try {
      const call = async (client: typeof a, tool: string, args: Record<string, unknown>) =>
        outcomeOf(await client.callTool({ name: tool, arguments: args }));
      const listening = await call(a, 'listen', { port: 7777 });
      assert.equal(listening.ok, true, JSON.stringify(listening));
      const [ipOfA] = (listening.value as { addresses: string[] }).addresses;
      assert.ok(ipOfA, "A's sandbox has an address");
      // A's sandbox as the engine sees it: B's target is exactly its address.
      const sandboxes = await containersOfServer(serving.child.pid, name);
      const { docker: d } = await docker();
      const infos = await Promise.all(sandboxes.map((c) => d.getContainer(c.Id).inspect()));
      const ofA = infos.find((i) => Object.values(i.NetworkSettings.Networks).some((n) => n.IPAddress === ipOfA));
      assert.ok(ofA, "the listener's address is a sandbox's");
      // The same class as A's (not a discovery sandbox on its way out), of the other session.
      const ofB = infos.find(
        (i) =>
          i.Config.Labels[LABEL_CLASS] === ofA.Config.Labels[LABEL_CLASS] &&
          i.Config.Labels[LABEL_SESSION] !== ofA.Config.Labels[LABEL_SESSION],
      );
      assert.ok(ofB, "B's sandbox is another session's");
      const [networkOfB] = Object.values(ofB.NetworkSettings.Networks);

      const reach = (host: string, port: number) => call(b, 'connect', { host, port });
      assert.deepEqual(await reach(ipOfA, 7777), { ok: false, error: 'ETIMEDOUT' }, "B does not reach A's listener");
      // Controls: the outside (a canary on the host's own address) answers the open sandbox …
      assert.deepEqual(await reach(outsideAddress(), outside.port), {
        ok: true,
        value: { connected: true, read: 'the outside answers' },
      });
      // … and what listens on the host's loopback (hintbox's own port included) does not, by any address.
      for (const host of [outsideAddress(), networkOfB!.Gateway]) {
        for (const port of [loopbackOnly.port, servePort]) {
          const result = await reach(host, port);
          assert.equal(result.ok, false, `${host}:${port}: ${JSON.stringify(result)}`);
        }
      }
      // One network for every session of the process (Docker's address pools hold about 30
      // bridges): the sessions' sandboxes share it, labelled with its owner and its own id, no session's.
      assert.notEqual(Object.keys(ofA.NetworkSettings.Networks)[0], 'bridge');
      assert.deepEqual(Object.keys(ofB.NetworkSettings.Networks), Object.keys(ofA.NetworkSettings.Networks));
      const networks = await d.listNetworks({ filters: { label: [`${LABEL_OWNER_PID}=${serving.child.pid}`] } });
      assert.deepEqual(
        networks.map((n) => n.Name),
        Object.keys(ofA.NetworkSettings.Networks),
        "the process's one network, whatever its number of sessions",
      );
      const [network] = networks;
      assert.equal(network!.Labels?.[LABEL_SESSION], undefined);
      assert.match(network!.Labels?.[LABEL_OPEN_NETWORK] ?? '', /^[0-9a-f]{8}$/);
      processNetwork = network!.Name;
      // A's session ends: the network its sandbox was on stays for B's, which still gets out.
      await leave(a);
      await eventually(
        async () => (await containersOf(serving.child.pid)).every((c) => c.Id !== ofA.Id),
        15_000,
        "A's sandbox removed",
      );
      assert.equal(
        (await d.getNetwork(processNetwork).inspect()).Name,
        processNetwork,
        "A's teardown left the network",
      );
      assert.deepEqual(await reach(outsideAddress(), outside.port), {
        ok: true,
        value: { connected: true, read: 'the outside answers' },
      });
    } finally {
      outside.close();
      loopbackOnly.close();
      for (const client of [a, b]) if (client.transport) await leave(client); // A may have left already
    }
  });

  // proves: SANDBOXES-APART
  it("two open sandboxes of one run's session cannot reach each other either; a crashed run's open network is swept", async () => {
    const profile = writeProfile({
      name: `squatter-crash-${process.pid}`,
      server: { image: SQUATTER_IMAGE },
      trust: 'trusted',
      // A writable mount splits the tools: listen in ro-online, connect_writer in rw-online.
      mounts: [{ source: sandboxFolder(), target: '/workspace' }],
      network: 'open',
      hold: false,
      limits: { pids: 64, memory: '128m' },
    });
    const hintbox = await runHintbox(profile);
    const { docker: d } = await docker();
    const networksOf = async () =>
      (await d.listNetworks({ filters: { label: [`${LABEL_OWNER_PID}=${hintbox.pid}`] } })).map((n) => ({
        name: n.Name,
        id: n.Labels?.[LABEL_OPEN_NETWORK],
      }));
    const call = async (tool: string, args: Record<string, unknown>) =>
      outcomeOf(await hintbox.client.callTool({ name: tool, arguments: args }));
    const listening = await call('listen', { port: 7777 });
    const [ipOfReader] = (listening.value as { addresses: string[] }).addresses;
    const fromWriter = await call('connect_writer', { host: ipOfReader, port: 7777 });
    assert.deepEqual(fromWriter, { ok: false, error: 'ETIMEDOUT' }, "the writer does not reach the reader's listener");
    const [reader, writer] = await Promise.all(['ro-online', 'rw-online'].map((c) => sandboxOfClass(hintbox.pid, c)));
    assert.deepEqual(Object.keys(reader!.NetworkSettings.Networks), Object.keys(writer!.NetworkSettings.Networks));
    const [network, ...more] = await networksOf();
    assert.deepEqual(more, [], "the run has one open network, its process's");
    assert.equal(network!.name, Object.keys(reader!.NetworkSettings.Networks)[0]);
    assert.equal(network!.name, `hintbox-${network!.id}-open`, 'labelled with its own id');
    process.kill(hintbox.pid, 'SIGKILL');
    await hintbox.exited;
    const swept = await hintboxCommand(['sweep']);
    assert.equal(swept.code, 0, swept.stderr);
    assert.deepEqual(await networksOf(), []);
    await eventually(async () => (await containersOf(hintbox.pid)).length === 0, 15_000, 'its sandboxes swept');
  });
});
