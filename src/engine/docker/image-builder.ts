import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { hintboxEnvironment } from '../../config/environment.js';
import type { Logger } from '../../util/logger.js';
import { packagePath } from '../../util/package-root.js';
import { HintboxError } from '../../util/hintbox-error.js';
import { monotonicMs } from '../../util/clock.js';
import { contextHash } from './context-hash.js';
import { digestProblem, imageDigest } from './image-digest.js';
import { runTool } from './run-tool.js';

/**
 * Images hintbox builds itself. Dockerfiles are standard (`FROM ${BASE_IMAGE}`); where the
 * Debian base is neither present nor pullable (no registry), it is seeded from Debian's
 * archive with debootstrap. Node packages are installed on the host and copied in, because
 * npm's registry need not be reachable from inside a build.
 */

/** The folder of hintbox's own Dockerfiles (`images/` in the package). */
export const IMAGES_DIR = packagePath('images');

/**
 * The Debian releases hintbox builds on: trixie (Debian's stable: Node.js 20, Python 3.13) for the
 * server bases and its own image; bookworm only for the tests' Postgres 15.
 */
export type DebianSuite = 'bookworm' | 'trixie';
/** The release of the server bases (and the one HINTBOX_BASE_IMAGE replaces). */
export const SERVER_SUITE: DebianSuite = 'trixie';
/** The registry's Debian image of a suite, used when present or pullable. */
export const debianImage = (suite: DebianSuite): string => `debian:${suite}-slim`;
/** What `debootstrap --variant=minbase <suite>` seeds where the registry's image cannot be had. */
export const seededDebianImage = (suite: DebianSuite): string => `hintbox/debian-seed:${suite}`;
export const NODE_SERVER_IMAGE = 'hintbox/node-server:trixie';
export const PYTHON_SERVER_IMAGE = 'hintbox/python-server:trixie';
/** The server bases, by the build arg that names each in the Dockerfiles built on it. */
export const SERVER_BASES = {
  NODE_SERVER_IMAGE: { image: NODE_SERVER_IMAGE, folder: 'node-server' },
  PYTHON_SERVER_IMAGE: { image: PYTHON_SERVER_IMAGE, folder: 'python-server' },
} as const;
export type ServerBase = keyof typeof SERVER_BASES;
const LABEL_CONTEXT_HASH = 'hintbox.context-hash';

export interface EnsureOptions {
  /** The server base the context builds on (its build arg is set). Default the Node one. */
  base?: ServerBase;
  /** Fills the staged context before a build (default: `npm ci` where a package.json is). */
  install?: (dir: string) => Promise<void>;
}

export class ImageError extends HintboxError {
  constructor(message: string) {
    super(message);
    this.name = 'ImageError';
  }
}

export interface ImageBuilderOptions {
  docker: Docker;
  log: Logger;
  /** Base image override (HINTBOX_BASE_IMAGE), for the server suite. */
  baseImage?: string;
  /** Rebuild even when an image with the same context hash exists. */
  rebuild?: boolean;
}

export class ImageBuilder {
  private readonly baseImages = new Map<DebianSuite, Promise<string>>();
  private readonly building = new Map<string, Promise<void>>();

  constructor(private readonly options: ImageBuilderOptions) {}

  /**
   * Makes sure `image` exists: present and up to date with `context` (if given), else built
   * from `context` on a server base (default the Node one), else pulled. `install` fills the
   * staged copy of the context before the build (default: `npm ci` where a package.json is), and
   * only when the image is out of date. Throws an ImageError saying what was tried.
   */
  async ensure(image: string, context?: string, options: EnsureOptions = {}): Promise<void> {
    const base = options.base ?? 'NODE_SERVER_IMAGE';
    const pinned = imageDigest(image);
    if (pinned && context) {
      throw new ImageError(
        `image ${image} names a digest, which a build here cannot give: drop server.build or the digest`,
      );
    }
    if (context)
      return this.buildOnce(image, context, { [base]: SERVER_BASES[base].image }, SERVER_SUITE, options.install);
    if ((await this.exists(image)) || (await this.tryPull(image))) {
      if (pinned) await this.verifyDigest(image);
      return;
    }
    throw new ImageError(
      pinned
        ? `image ${image} is not present with that digest and cannot be pulled (an image built or loaded here carries no ` +
            'registry digest, so it cannot stand for one): pull it by digest where a registry is reachable'
        : `image ${image} is not present, cannot be pulled, and the profile gives no server.build folder to build it from`,
    );
  }

  /**
   * A digest-pinned image runs only when the engine shows that digest for that repository: the
   * digest it verified when it pulled the image. Docker 20.10 finds no image for a digest it did
   * not pull; this check holds the same on an engine that resolves such a name otherwise.
   */
  private async verifyDigest(image: string): Promise<void> {
    const info = await this.options.docker.getImage(image).inspect();
    const problem = digestProblem(image, info.RepoDigests ?? []);
    if (problem) throw new ImageError(problem);
  }

  /**
   * The Debian base of a suite: for the server suite the override (HINTBOX_BASE_IMAGE) if given; else
   * `debian:<suite>-slim` if present or pullable; else `hintbox/debian-seed:<suite>`, seeded.
   */
  resolveBase(suite: DebianSuite = SERVER_SUITE): Promise<string> {
    let base = this.baseImages.get(suite);
    if (!base) {
      base = this.findBase(suite);
      this.baseImages.set(suite, base);
    }
    return base;
  }

  private async findBase(suite: DebianSuite): Promise<string> {
    const override = suite === SERVER_SUITE ? this.options.baseImage : undefined;
    if (override) {
      if (!(await this.exists(override)) && !(await this.tryPull(override))) {
        throw new ImageError(`base image ${override} (HINTBOX_BASE_IMAGE) is not present and cannot be pulled`);
      }
      return override;
    }
    const image = debianImage(suite);
    if ((await this.exists(image)) || (await this.tryPull(image))) return image;
    const seeded = seededDebianImage(suite);
    if (!(await this.exists(seeded)) || this.options.rebuild) await this.seedDebian(suite);
    return seeded;
  }

  /**
   * Builds `image` from a folder made for it (hintbox's own image: see hintbox-image.ts) on the
   * Debian `suite`, unless an image of the same folder, args and base exists.
   */
  buildOn(suite: DebianSuite, image: string, context: string, extraArgs: Record<string, string> = {}): Promise<void> {
    return this.buildOnce(image, context, extraArgs, suite);
  }

  private buildOnce(
    image: string,
    context: string,
    extraArgs: Record<string, string>,
    suite: DebianSuite = SERVER_SUITE,
    install?: (dir: string) => Promise<void>,
  ): Promise<void> {
    let pending = this.building.get(image);
    if (!pending) {
      pending = this.build(image, context, extraArgs, suite, install);
      this.building.set(image, pending);
      // Shared while it runs; a later ensure checks the image again (its folder may have changed).
      const settled = pending;
      void settled.then(
        () => this.building.get(image) === settled && this.building.delete(image),
        () => this.building.get(image) === settled && this.building.delete(image),
      );
    }
    return pending;
  }

  private async build(
    image: string,
    context: string,
    extraArgs: Record<string, string>,
    suite: DebianSuite,
    install?: (dir: string) => Promise<void>,
  ): Promise<void> {
    const { docker, log } = this.options;
    // The staleness key: the build folder, the build args, and the id of the parent image we
    // build (so a rebuilt node-server rebuilds its dependents). Not the Debian base's name:
    // resolving it may try a registry, which a start that builds nothing must not wait for.
    let parentId: string | undefined;
    const parent = (Object.keys(SERVER_BASES) as ServerBase[]).find((arg) => arg in extraArgs);
    if (parent && image !== SERVER_BASES[parent].image) {
      const { image: parentImage, folder } = SERVER_BASES[parent];
      await this.buildOnce(parentImage, path.join(IMAGES_DIR, folder), {});
      parentId = await this.idOf(parentImage);
    }
    const hash = contextHash(context, { ...extraArgs, ...(parentId ? { PARENT_IMAGE_ID: parentId } : {}) });
    const built = await this.labelOf(image, LABEL_CONTEXT_HASH);
    if (!this.options.rebuild && built === hash) return;
    // Said at once: a client waiting on this start sees why (a first build takes minutes).
    log.info(
      `image ${image} ${this.options.rebuild ? 'is to be rebuilt' : built === undefined ? 'is not built yet' : 'is out of date with ' + context}: ` +
        'building it now (minutes the first time; "hintbox install <profile>" builds beforehand)',
    );
    const started = monotonicMs();
    const buildargs = { BASE_IMAGE: await this.resolveBase(suite), ...extraArgs };

    const staged = mkdtempSync(path.join(os.tmpdir(), 'hintbox-build-'));
    try {
      cpSync(context, staged, { recursive: true, filter: (src) => path.basename(src) !== 'node_modules' });
      if (install) await install(staged);
      else if (existsSync(path.join(staged, 'package.json'))) await this.npmInstall(staged, image);
      log.info(`building image ${image} from ${context}`);
      const stream = await docker.buildImage(await packContext(staged), {
        t: image,
        buildargs: declaredArgs(buildargs, readFileSync(path.join(staged, 'Dockerfile'), 'utf8')),
        labels: { [LABEL_CONTEXT_HASH]: hash },
        rm: true,
        forcerm: true,
      });
      await followBuild(docker, stream, log.child(image));
      log.info(`built image ${image} in ${Math.round((monotonicMs() - started) / 1000)} s`);
    } catch (error) {
      throw new ImageError(`building image ${image} from ${context} failed: ${(error as Error).message}`);
    } finally {
      rmSync(staged, { recursive: true, force: true });
    }
  }

  private async npmInstall(dir: string, image: string): Promise<void> {
    const ci = existsSync(path.join(dir, 'package-lock.json'));
    const args = [
      ci ? 'ci' : 'install',
      '--omit=dev',
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
      '--loglevel=error',
    ];
    this.options.log.info(`installing Node packages for ${image} on the host (npm ${args.join(' ')})`);
    await runTool('npm', args, dir, this.options.log).catch((error: NodeJS.ErrnoException) => {
      // hintbox's own image has no npm: such images are built where npm is.
      throw error.code === 'ENOENT'
        ? new Error(`npm is not installed here: ${dir} needs it (apt-get install npm)`)
        : error;
    });
  }

  private async seedDebian(suite: DebianSuite): Promise<void> {
    const { log } = this.options;
    const [image, seeded] = [debianImage(suite), seededDebianImage(suite)];
    if (process.getuid?.() !== 0) {
      throw new ImageError(
        `${image} is not present and cannot be pulled; seeding it from Debian's archive needs root (debootstrap). ` +
          `Run "sudo hintbox images build", or load a Debian ${suite} image as ${image}` +
          (suite === SERVER_SUITE ? ' or set HINTBOX_BASE_IMAGE.' : '.'),
      );
    }
    const mirror = hintboxEnvironment().debianMirror;
    const work = mkdtempSync(path.join(os.tmpdir(), 'hintbox-seed-'));
    try {
      const rootfs = path.join(work, 'rootfs');
      log.info(
        `${image} is not present and cannot be pulled: seeding ${seeded} with debootstrap from ${mirror} (about 30 s)`,
      );
      try {
        await runTool('debootstrap', ['--variant=minbase', suite, rootfs, mirror], work, log.child('debootstrap'));
      } catch (error) {
        const hint =
          (error as NodeJS.ErrnoException).code === 'ENOENT' ? ' (install it: apt-get install debootstrap)' : '';
        throw new ImageError(`seeding the Debian ${suite} base failed: ${(error as Error).message}${hint}`);
      }
      const context = path.join(work, 'context');
      cpSync(path.join(IMAGES_DIR, 'debian-seed'), context, { recursive: true });
      for (const junk of ['var/lib/apt/lists', 'var/cache/apt', 'usr/share/doc', 'usr/share/man']) {
        rmSync(path.join(rootfs, junk), { recursive: true, force: true });
      }
      await runTool('tar', ['-C', rootfs, '-cf', path.join(context, 'rootfs.tar'), '.'], work, log);
      rmSync(rootfs, { recursive: true, force: true });
      const stream = await this.options.docker.buildImage(await packContext(context), {
        t: seeded,
        rm: true,
        forcerm: true,
      });
      await followBuild(this.options.docker, stream, log.child(seeded));
      log.info(`seeded ${seeded}`);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }

  private async exists(image: string): Promise<boolean> {
    try {
      await this.options.docker.getImage(image).inspect();
      return true;
    } catch {
      return false;
    }
  }

  private async idOf(image: string): Promise<string | undefined> {
    try {
      return (await this.options.docker.getImage(image).inspect()).Id;
    } catch {
      return undefined;
    }
  }

  private async labelOf(image: string, label: string): Promise<string | undefined> {
    try {
      const info = await this.options.docker.getImage(image).inspect();
      return info.Config.Labels?.[label];
    } catch {
      return undefined;
    }
  }

  private async tryPull(image: string): Promise<boolean> {
    const { docker, log } = this.options;
    try {
      const stream = await docker.pull(image);
      await new Promise<void>((resolve, reject) =>
        docker.modem.followProgress(stream, (error) => (error ? reject(error) : resolve())),
      );
      // Podman's compatible API can end a failed pull without an error event: the image must be there.
      if (!(await this.exists(image))) throw new Error('the engine reported no error, but has no such image');
      log.info(`pulled ${image}`);
      return true;
    } catch (error) {
      log.debug(`cannot pull ${image}: ${(error as Error).message}`);
      return false;
    }
  }
}

/**
 * The build args a Dockerfile declares (`ARG NAME`), of those hintbox has: Docker warns of
 * each arg given that no ARG consumes ("One or more build-args … were not consumed").
 */
export function declaredArgs(args: Readonly<Record<string, string>>, dockerfile: string): Record<string, string> {
  const declared = new Set([...dockerfile.matchAll(/^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)/gim)].map((m) => m[1]));
  return Object.fromEntries(Object.entries(args).filter(([name]) => declared.has(name)));
}

/** The heading of a build step in Docker's classic builder's output: `Step 3/9 : RUN …`. */
const BUILD_STEP = /^Step \d+\/\d+ : /;

function followBuild(docker: Docker, stream: NodeJS.ReadableStream, log: Logger): Promise<void> {
  return new Promise((resolve, reject) => {
    docker.modem.followProgress(
      stream,
      (error) => (error ? reject(error) : resolve()),
      (event: { stream?: string; error?: string; errorDetail?: { message?: string } }) => {
        if (event.error) reject(new Error(event.errorDetail?.message ?? event.error));
        // A step's heading is progress; what the step prints (apt, npm) goes to the debug log (--verbose).
        for (const line of event.stream?.trimEnd().split('\n') ?? []) {
          if (BUILD_STEP.test(line)) log.info(line);
          else if (line.trim() !== '') log.debug(line);
        }
      },
    );
  });
}

/**
 * A build context as a tar stream. tar-fs is loaded only for a build: a run whose image is
 * current never reads its code (nor tar-stream's and streamx's).
 */
async function packContext(folder: string): Promise<NodeJS.ReadableStream> {
  // tar-fs is CommonJS: its exports are the default export (the bundle gives no named ones).
  const { default: tarFs } = await import('tar-fs');
  return tarFs.pack(folder) as unknown as NodeJS.ReadableStream;
}
