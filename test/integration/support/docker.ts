import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import type Docker from 'dockerode';
import { connectDocker, type DockerConnection } from '../../../src/engine/docker/docker-connection.js';
import { IMAGES_DIR, NODE_SERVER_IMAGE } from '../../../src/engine/docker/image-builder.js';
import { buildFromFolder, onTestEngine } from './engine-images.js';
import { EGRESS_PROXY_IMAGE } from '../../../src/engine/squid-config.js';
import { ensureEgressProxyImage } from '../../../src/engine/docker/egress-proxy.js';
import { LABEL_CLASS, LABEL_OWNER_HOST, LABEL_OWNER_PID, LABEL_SESSION } from '../../../src/engine/sandbox-labels.js';
import { openCgroupFreezer } from '../../../src/engine/cgroup-freezer.js';
import { isProcessAlive, makeIsOwnerAlive } from '../../../src/util/process-alive.js';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const FIXTURES = fileURLToPath(new URL('../../fixtures/', import.meta.url));
export const REPO = fileURLToPath(new URL('../../../', import.meta.url));
export const FILESYSTEM_IMAGE = 'hintbox/server-filesystem:2026.8.31';
/** The reference "everything" server (images/server-everything), for what passes through besides tools. */
export const EVERYTHING_IMAGE = 'hintbox/server-everything:2026.8.31';
export const LIAR_IMAGE = 'hintbox-test/liar:latest';
export const DBLIAR_IMAGE = 'hintbox-test/dbliar:latest';
export const SNEAK_IMAGE = 'hintbox-test/sneak:latest';
export const DBLINGER_IMAGE = 'hintbox-test/dblinger:latest';
export const TEXTLIAR_IMAGE = 'hintbox-test/textliar:latest';
export const ASKER_IMAGE = 'hintbox-test/asker:latest';
export const EGRESS_IMAGE = 'hintbox-test/egress:latest';
export const FAULTY_IMAGE = 'hintbox-test/faulty:latest';
export const KEEPER_IMAGE = 'hintbox-test/keeper:latest';
export const SQUATTER_IMAGE = 'hintbox-test/squatter:latest';
export const FLOOD_IMAGE = 'hintbox-test/flood:latest';
export const WAKER_IMAGE = 'hintbox-test/waker:latest';
export const CANARY_IMAGE = NODE_SERVER_IMAGE;

export const HOSTNAME = os.hostname();

let connection: Promise<DockerConnection> | undefined;
export function docker(): Promise<DockerConnection> {
  connection ??= connectDocker();
  return connection;
}

/**
 * Whether every process of a sandbox but its gate is held: stopped (state T, from the host's ps
 * through the engine: what the gate's freeze promises), or frozen by the kernel (its cgroup
 * freezer says so, and ps shows none of them running); false when one is not; undefined when the
 * container no longer runs.
 */
export async function sandboxFrozen(container: Docker.Container): Promise<boolean | undefined> {
  type Top = { Titles?: string[]; Processes?: string[][] } | undefined;
  // Docker passes ps's own options; Podman takes its format descriptors (its title is STATE).
  let top = (await container.top({ ps_args: '-e -o pid,stat,args' }).catch(() => undefined)) as Top;
  if (!top?.Titles) top = (await container.top({ ps_args: 'pid,state,args' }).catch(() => undefined)) as Top;
  if (!top?.Titles || !top.Processes) return undefined;
  const stat = Math.max(top.Titles.indexOf('STAT'), top.Titles.indexOf('STATE'));
  const args = top.Titles.indexOf('COMMAND');
  const others = top.Processes.filter((p) => !p[args]?.startsWith('/run/hintbox/gate'));
  if (others.length === 0) return false;
  if (others.every((p) => p[stat]?.startsWith('T') || p[stat]?.startsWith('Z'))) return true;
  return (await cgroupFreezerState(container)) === 'frozen' && others.every((p) => !p[stat]?.startsWith('R'));
}

/** What the kernel's cgroup freezer says of a container (read from the host), or undefined when it has none here. */
export async function cgroupFreezerState(container: Docker.Container): Promise<'frozen' | 'thawed' | undefined> {
  const info = await container.inspect().catch(() => undefined);
  if (!info?.State.Pid) return undefined;
  const found = openCgroupFreezer(info.State.Pid, info.Id);
  if ('problem' in found) return undefined;
  const { version, dir } = found.cgroup;
  const text = readFileSync(path.join(dir, version === 1 ? 'freezer.state' : 'cgroup.events'), 'utf8');
  return (version === 1 ? text.trim() === 'FROZEN' : /^frozen 1$/m.test(text)) ? 'frozen' : 'thawed';
}

/**
 * Builds the fixture image of `test/fixtures/<folder>` (its Dockerfile) under `tag`. The context is test/fixtures itself, so that every fixture's image can take
 * the files the fixtures share (test/fixtures/shared: their stdio loop) without a copy in git.
 */
export async function buildFixture(folder: string, tag: string, buildArgs: Record<string, string>): Promise<void> {
  // Built where the tests' images are (Docker's store; on Podman, copied over after).
  await onTestEngine(await docker(), [tag], (_, store) =>
    buildFromFolder(store, FIXTURES, `${folder}/Dockerfile`, tag, buildArgs),
  );
}

let images: Promise<void> | undefined;
/**
 * Builds the images the integration tests use, once per process: hintbox's own (through the
 * image builder the CLI uses) and the lying fixture (through testcontainers).
 */
export function ensureTestImages(): Promise<void> {
  images ??= (async () => {
    await onTestEngine(await docker(), [NODE_SERVER_IMAGE, FILESYSTEM_IMAGE], (builder) =>
      builder.ensure(FILESYSTEM_IMAGE, path.join(IMAGES_DIR, 'server-filesystem')),
    );
    await buildFixture('liar', LIAR_IMAGE, { NODE_SERVER_IMAGE });
  })();
  return images;
}

let everything: Promise<void> | undefined;
/**
 * The reference "everything" server's image (images/server-everything), once per process,
 * through the image builder the CLI uses; only the suites that use it build it.
 */
export function ensureEverythingImage(): Promise<void> {
  everything ??= (async () => {
    await onTestEngine(await docker(), [EVERYTHING_IMAGE], (builder) =>
      builder.ensure(EVERYTHING_IMAGE, path.join(IMAGES_DIR, 'server-everything')),
    );
  })();
  return everything;
}

/**
 * A fixture image from `test/fixtures/<folder>` (built through testcontainers), once per
 * process, after the images it is built on.
 */
function fixtureImage(
  folder: string,
  tag: string,
  buildArgs: Record<string, string>,
  after: () => Promise<void>,
): () => Promise<void> {
  let built: Promise<void> | undefined;
  return () =>
    (built ??= (async () => {
      await after();
      await buildFixture(folder, tag, buildArgs);
    })());
}

/** The database fixture (test/fixtures/dbliar: Node base + Debian's psql). */
export const ensureDatabaseFixtureImage = fixtureImage('dbliar', DBLIAR_IMAGE, { NODE_SERVER_IMAGE }, ensureTestImages);

/** The fixture whose read tool leaves a database session behind (test/fixtures/dblinger). */
export const ensureDblingerImage = fixtureImage(
  'dblinger',
  DBLINGER_IMAGE,
  { DBLIAR_IMAGE },
  ensureDatabaseFixtureImage,
);

/** The fixture that acts outside calls (test/fixtures/sneak). */
export const ensureSneakImage = fixtureImage('sneak', SNEAK_IMAGE, { NODE_SERVER_IMAGE }, ensureTestImages);

/** The text fixture (test/fixtures/textliar: tool names, instructions and errors that attack readers). */
export const ensureTextFixtureImage = fixtureImage('textliar', TEXTLIAR_IMAGE, { NODE_SERVER_IMAGE }, ensureTestImages);

/** The fixture that offers prompts and resources and asks its client (test/fixtures/asker). */
export const ensureAskerImage = fixtureImage('asker', ASKER_IMAGE, { NODE_SERVER_IMAGE }, ensureTestImages);

/** The fixture that reaches hosts through the egress proxy and around it (test/fixtures/egress). */
export const ensureEgressImage = fixtureImage('egress', EGRESS_IMAGE, { NODE_SERVER_IMAGE }, async () => {
  await ensureTestImages();
  // hintbox would build the proxy's image itself; on Podman it is copied from Docker's store instead.
  await onTestEngine(await docker(), [EGRESS_PROXY_IMAGE], (builder) => ensureEgressProxyImage(builder));
});

/** The fixture that fails as servers do: out of memory, stops reading, and answers load (test/fixtures/faulty). */
export const ensureFaultyImage = fixtureImage('faulty', FAULTY_IMAGE, { NODE_SERVER_IMAGE }, ensureTestImages);

/** The server that keeps a call alive with progress and writes in place (test/fixtures/keeper). */
export const ensureKeeperImage = fixtureImage('keeper', KEEPER_IMAGE, { NODE_SERVER_IMAGE }, ensureTestImages);

/** The fixture with a writable image VOLUME that listens for and connects to neighbours (test/fixtures/squatter). */
export const ensureSquatterImage = fixtureImage('squatter', SQUATTER_IMAGE, { NODE_SERVER_IMAGE }, ensureTestImages);

/**
 * The held server that wakes itself with SIGCONT timers (test/fixtures/waker). Its waker is
 * compiled here, statically (as scripts/build-gate.mjs compiles the gate), into the fixture's
 * folder (git-ignored), then copied into the image.
 */
export const ensureWakerImage = fixtureImage('waker', WAKER_IMAGE, { NODE_SERVER_IMAGE }, async () => {
  await ensureTestImages();
  const folder = path.join(FIXTURES, 'waker');
  execFileSync(
    process.env.CC || 'cc',
    ['-static', '-O2', '-o', path.join(folder, 'waker'), path.join(folder, 'waker.c')],
    {
      stdio: 'inherit',
    },
  );
});

/** The fixture whose lists hold a million items, made page by page (test/fixtures/flood). */
export const ensureFloodImage = fixtureImage('flood', FLOOD_IMAGE, { NODE_SERVER_IMAGE }, ensureTestImages);

/**
 * The host's address on the engine's default bridge, as a container there sees it. A canary
 * container on that bridge is not reachable by its own address from an open sandbox (each
 * open sandbox is on its hintbox's own bridge); its published port is, at this address, as any service of the
 * host's on every address is.
 */
export async function defaultBridgeGateway(containerId: string): Promise<string> {
  const { docker: d } = await docker();
  // Podman's compatible API names its default network `podman`.
  const networks = (await d.getContainer(containerId).inspect()).NetworkSettings.Networks;
  const gateway = (networks.bridge ?? networks.podman)?.Gateway;
  assert.ok(gateway, 'the container is on the default bridge');
  return gateway;
}

/** Containers labelled by hintbox whose owner is the given hintbox process. */
export async function containersOf(ownerPid: number | null | undefined, all = true) {
  const { docker: d } = await docker();
  return d.listContainers({ all, filters: { label: [LABEL_SESSION, `${LABEL_OWNER_PID}=${ownerPid ?? -1}`] } });
}

/** The running sandbox of one class of a hintbox process (not hintbox's own container), as the engine inspects it. */
export async function sandboxOfClass(pid: number, sandboxClass: string) {
  const container = (await containersOf(pid, false)).find((c) => c.Labels[LABEL_CLASS] === sandboxClass);
  assert.ok(container, `a sandbox of class ${sandboxClass} runs`);
  const { docker: d } = await docker();
  return d.getContainer(container.Id).inspect();
}

/** The sandbox of one class of a hintbox process once it exists (waits up to 15 s), as a container to act on. */
export async function awaitSandboxOfClass(pid: number, sandboxClass: string): Promise<Docker.Container> {
  let id: string | undefined;
  await eventually(
    async () => (id = (await containersOf(pid)).find((c) => c.Labels[LABEL_CLASS] === sandboxClass)?.Id) !== undefined,
    15_000,
    `the sandbox of class ${sandboxClass}`,
  );
  return (await docker()).docker.getContainer(id!);
}

/** The read-only flag of each of the profile's mounts in the sandbox of one class, as the engine reports it. */
export async function mountsOfClass(pid: number, sandboxClass: string): Promise<Record<string, boolean>> {
  const info = await sandboxOfClass(pid, sandboxClass);
  return Object.fromEntries(
    info.Mounts.filter((m) => m.Type === 'bind' && !m.Destination.startsWith('/run/hintbox/')).map((m) => [
      m.Destination,
      !m.RW,
    ]),
  );
}

/**
 * The hintbox processes this test process started (runs, commands, serve). The engine may be
 * shared with other hintbox runs (a user's MCP client, another test run): their containers are
 * not a test's to count.
 */
const ownHintboxPids = new Set<number>();
export function ownHintboxProcess(pid: number | undefined): void {
  if (pid !== undefined) ownHintboxPids.add(pid);
}

/** The label of the containers in which a test runs hintbox itself (hintbox-image.test.ts): the test process's pid. */
export const LABEL_TEST_HINTBOX = 'hintbox-test.image';

/**
 * Whether a thing labelled by hintbox is a test's to answer for: made by a hintbox process this
 * test process started, or by one on this machine that is dead (whoever started it, e.g. through
 * the bench: nothing may outlive its run), or by a hintbox in a container (another host name)
 * unless that container still runs and is not this test process's — a user's hintbox in its own
 * container, sharing the engine, is not a test's either.
 */
async function answeredFor(): Promise<(labels: Record<string, string> | undefined) => boolean> {
  const alive = makeIsOwnerAlive(HOSTNAME);
  const hosts = await runningContainerHosts();
  return (labels) => {
    const host = labels?.[LABEL_OWNER_HOST];
    const pid = Number(labels?.[LABEL_OWNER_PID]);
    if (host !== HOSTNAME) return hosts.get(host ?? '') !== 'foreign';
    return ownHintboxPids.has(pid) || !alive(HOSTNAME, pid);
  };
}

/** The host names of the engine's running containers: whether this test process started each. */
async function runningContainerHosts(): Promise<Map<string, 'ours' | 'foreign'>> {
  const { docker: d } = await docker();
  const hosts = new Map<string, 'ours' | 'foreign'>();
  for (const c of await d.listContainers()) {
    const info = await d
      .getContainer(c.Id)
      .inspect()
      .catch(() => undefined); // gone meanwhile
    if (!info) continue;
    hosts.set(info.Config.Hostname, c.Labels[LABEL_TEST_HINTBOX] === String(process.pid) ? 'ours' : 'foreign');
  }
  return hosts;
}

/** The hintbox containers a test answers for (see {@link answeredFor}). */
export async function allHintboxContainers() {
  const { docker: d } = await docker();
  const ours = await answeredFor();
  return (await d.listContainers({ all: true, filters: { label: [LABEL_SESSION] } })).filter((c) => ours(c.Labels));
}

/** Polls until `check` returns true, or fails after `ms`. */
export async function eventually(check: () => Promise<boolean>, ms = 15_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

/**
 * After a suite: no container, network or volume of its hintbox processes (or of a dead one)
 * may remain, and none of the hintbox processes it started may still run.
 */
export function assertNoLeftovers(): Promise<void> {
  return assertNoLeftoversWithin(15_000);
}

/** {@link assertNoLeftovers}, giving a teardown still under way `waitMs`. */
export async function assertNoLeftoversWithin(waitMs: number): Promise<void> {
  await eventually(async () => (await allHintboxContainers()).length === 0, waitMs, 'no hintbox containers left');
  // The networks (egress proxies' of a session, open sandboxes' of a process) and volumes, by the same rule as containers.
  const { docker: d } = await docker();
  const ours = await answeredFor();
  const networks = (await d.listNetworks({ filters: { label: [LABEL_OWNER_PID] } })).filter((n) => ours(n.Labels));
  assert.deepEqual(
    networks.map((n) => n.Name),
    [],
    'no hintbox networks left',
  );
  const volumes = ((await d.listVolumes({ filters: { label: [LABEL_OWNER_PID] } })).Volumes ?? []).filter((v) =>
    ours(v.Labels),
  );
  assert.deepEqual(
    volumes.map((v) => v.Name),
    [],
    'no hintbox volumes left',
  );
  // Last: a process still running here has left nothing above, but is no less a leftover.
  // (This test process itself may be an owner: the engine contract's sandboxes are its own.)
  const running = () => [...ownHintboxPids].filter((pid) => pid !== process.pid && isProcessAlive(pid));
  await eventually(() => Promise.resolve(running().length === 0), waitMs, 'no hintbox process left').catch(() =>
    assert.deepEqual(running(), [], 'no hintbox process of this test left running'),
  );
}
