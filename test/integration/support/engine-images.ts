import Docker from 'dockerode';
import { pack } from 'tar-fs';
import type { DockerConnection } from '../../../src/engine/docker/docker-connection.js';
import { ImageBuilder } from '../../../src/engine/docker/image-builder.js';
import { createLogger, type Logger } from '../../../src/util/logger.js';

/**
 * Images for the engine the tests run on (DOCKER_HOST). On Docker they are built there. On
 * Podman (the Podman suites: DOCKER_HOST=unix:///run/podman/podman.sock) they are built in
 * Docker's store (the default socket, where the seeded Debian bases are and the builds are
 * cached) and copied into Podman's through the two engines' APIs (save, load), each once per
 * process and only when Podman does not hold that same image id. Nothing of Docker's store is
 * changed by a copy, and Podman's images of other tags are left alone.
 */

const log: Logger = createLogger(process.env.HINTBOX_TEST_VERBOSE ? 'debug' : 'info');
let builder: Promise<ImageBuilder> | undefined;
let dockerStore: Docker | undefined;
const copies = new Map<string, Promise<void>>();

/** Where the images are built: the tests' engine, or Docker's store when that engine is Podman. */
export function testImageBuilder(engine: DockerConnection): Promise<ImageBuilder> {
  builder ??= Promise.resolve(
    new ImageBuilder({ docker: engine.kind === 'podman' ? buildStore() : engine.docker, log }),
  );
  return builder;
}

function buildStore(): Docker {
  dockerStore ??= new Docker({ socketPath: '/var/run/docker.sock' });
  return dockerStore;
}

/**
 * Makes `images` present on the tests' engine after `build` made them in the builder's store
 * (nothing more on Docker). On Podman each is copied unless Podman has that id already.
 */
export async function onTestEngine(
  engine: DockerConnection,
  images: readonly string[],
  build: (builder: ImageBuilder, store: Docker) => Promise<void>,
): Promise<void> {
  await build(await testImageBuilder(engine), engine.kind === 'podman' ? buildStore() : engine.docker);
  if (engine.kind !== 'podman') return;
  for (const image of images) {
    let copy = copies.get(image);
    if (!copy) {
      copy = copyToPodman(buildStore(), engine.docker, image);
      copies.set(image, copy);
    }
    await copy;
  }
}

async function copyToPodman(from: Docker, to: Docker, image: string): Promise<void> {
  const id = (await from.getImage(image).inspect()).Id;
  const present = await to
    .getImage(image)
    .inspect()
    .then(
      (info) => info.Id,
      () => undefined,
    );
  if (present === id || present === id.replace(/^sha256:/, '')) return;
  const started = Date.now();
  log.info(`copying image ${image} from Docker's store into Podman's`);
  const tar = await from.getImage(image).get();
  const loaded = await to.loadImage(tar, { quiet: true });
  await new Promise<void>((resolve, reject) => {
    to.modem.followProgress(loaded, (error: Error | null) => (error ? reject(error) : resolve()));
  });
  // Podman names what it loaded `localhost/<name>`; Docker's names resolve to it.
  await to.getImage(image).inspect();
  log.info(`copied image ${image} into Podman in ${Math.round((Date.now() - started) / 1000)} s`);
}

/** Builds `dockerfile` (a path inside `context`) as `tag` in `store`, with the whole folder as its context. */
export async function buildFromFolder(
  store: Docker,
  context: string,
  dockerfile: string,
  tag: string,
  buildargs: Record<string, string>,
): Promise<void> {
  const stream = await store.buildImage(pack(context) as unknown as NodeJS.ReadableStream, {
    t: tag,
    dockerfile,
    buildargs,
    rm: true,
    forcerm: true,
  });
  await new Promise<void>((resolve, reject) => {
    let failed: string | undefined;
    store.modem.followProgress(
      stream,
      (error: Error | null) => (error ? reject(error) : failed ? reject(new Error(failed)) : resolve()),
      (event: { error?: string }) => (failed ??= event.error),
    );
  });
}
