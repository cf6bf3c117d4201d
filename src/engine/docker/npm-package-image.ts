import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { processVariables } from '../../config/environment.js';
import type { PackageSource } from '../../packages/package-source.js';
import type { Logger } from '../../util/logger.js';
import { ImageError, type ImageBuilder } from './image-builder.js';
import { runTool } from './run-tool.js';
import { lockHostPath, NPM_ALLOW_ARGS, NPM_GUARD_PROOF_VARIABLE, NPM_GUARD_SCRIPT, npmGuardLine } from './npm-guard.js';
import { chooseCommand } from './package-commands.js';

/**
 * A server given as an npm package (`server.npm`): resolved on the host into a package lock
 * beside the profile (written once, then only read: `npm ci` checks every tarball against it),
 * installed on the host without install scripts, and copied onto the Node base. The image's
 * entry point is the package's own command (`bin`), run with the base's Node. No dependency may
 * name a path of this host (npm-guard.ts): refused while resolving, and in the lock before `npm ci`.
 */

/** The package.json hintbox installs from: one dependency, the profile's package. */
function manifest(source: PackageSource): { name: string; private: true; dependencies: Record<string, string> } {
  return { name: 'hintbox-npm-server', private: true, dependencies: { [source.name]: source.version } };
}

const execFileAsync = promisify(execFile);

interface NpmLock {
  packages?: Record<string, Parameters<typeof lockHostPath>[0][string] & { bin?: Record<string, string> }>;
}

/** The lock, once no entry of it names a path of this host (npm-guard.ts). */
function checkedLock(lock: NpmLock, source: PackageSource, lockFile: string): NpmLock {
  const refused = lockHostPath(lock.packages ?? {}, source, lockFile);
  if (refused) throw new ImageError(`${source.spec}: ${refused}`);
  return lock;
}

/** Resolves the lock in `work` with npm under the guard; npm's own allow-* settings behind it. */
async function resolveLock(source: PackageSource, work: string, log: Logger): Promise<void> {
  const failed = (error: Error): ImageError => {
    const refused = npmGuardLine(error.message);
    return new ImageError(
      `resolving the npm package ${source.spec}${refused ? `: ${refused}` : ` failed: ${error.message}`}`,
    );
  };
  // An npm that does not know allow-file prints "undefined": the preload alone then guards it,
  // and must show that it did (npm 10, which Node 20 and 22 ship, has no allow-* settings).
  const known = await execFileAsync('npm', ['config', 'get', 'allow-file'], { cwd: work }).catch((error: Error) => {
    throw failed(error);
  });
  const fenced = ['all', 'root', 'none'].includes(known.stdout.trim());
  const guard = path.join(work, 'hintbox-npm-guard.cjs');
  writeFileSync(guard, NPM_GUARD_SCRIPT);
  const proof = path.join(work, 'hintbox-npm-guard.proof');
  const variables = processVariables();
  const env = {
    ...variables,
    NODE_OPTIONS: `${variables.NODE_OPTIONS ?? ''} --require ${JSON.stringify(guard)}`,
    [NPM_GUARD_PROOF_VARIABLE]: proof,
  };
  const args = ['install', '--package-lock-only', '--ignore-scripts', '--omit=dev', '--no-audit', '--no-fund'];
  const fence = fenced ? NPM_ALLOW_ARGS : [];
  await runTool('npm', [...args, ...fence, '--loglevel=error'], work, log, env).catch((error: Error) => {
    throw failed(error);
  });
  if (!fenced && !existsSync(proof)) {
    throw new ImageError(
      `resolving the npm package ${source.spec}: this npm has no allow-file setting and hintbox's guard could not wrap its resolver (arborist), so nothing keeps a dependency from reading this host's files: refused (use npm 11.14 or later)`,
    );
  }
}

/** The lock beside the profile if it is for this package and version; else one resolved now and written there. */
export async function npmLock(source: PackageSource, lockFile: string, log: Logger): Promise<NpmLock> {
  const existing = readLock(lockFile);
  const locked = existing?.packages?.['']?.dependencies?.[source.name];
  if (existing && locked === source.version) return checkedLock(existing, source, lockFile);
  if (existing)
    log.info(
      `${lockFile} is for ${source.name}@${locked ?? '?'}, the profile asks for ${source.spec}: resolving again`,
    );
  const work = mkdtempSync(path.join(os.tmpdir(), 'hintbox-npm-lock-'));
  try {
    writeFileSync(path.join(work, 'package.json'), `${JSON.stringify(manifest(source), null, 2)}\n`);
    log.info(`resolving ${source.spec} from npm's registry on the host`);
    await resolveLock(source, work, log);
    const text = readFileSync(path.join(work, 'package-lock.json'), 'utf8');
    const lock = checkedLock(JSON.parse(text) as NpmLock, source, lockFile);
    writeFileSync(lockFile, text);
    const version = lock.packages?.[`node_modules/${source.name}`]?.version ?? '?';
    log.info(`wrote ${lockFile}: ${source.name}@${version} and its dependencies, pinned by integrity hash`);
    return lock;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function readLock(lockFile: string): NpmLock | undefined {
  if (!existsSync(lockFile)) return undefined;
  try {
    return JSON.parse(readFileSync(lockFile, 'utf8')) as NpmLock;
  } catch (error) {
    throw new ImageError(
      `${lockFile} is not an npm package lock (${(error as Error).message}): delete it to resolve again`,
    );
  }
}

/**
 * The build steps that add the profile's Debian packages (`server.debian`, names checked by the
 * profile's schema) from Debian's archive, as root, then back to the sandbox user: none without.
 */
function debianPackagesLines(packages: readonly string[]): string[] {
  if (packages.length === 0) return [];
  return [
    'USER 0:0',
    'RUN apt-get update \\',
    ` && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${packages.join(' ')} \\`,
    ' && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/*',
    'USER 10001:10001',
  ];
}

/** Builds (or keeps, while its lock is unchanged) the image of an npm package. */
export async function ensureNpmImage(
  builder: ImageBuilder,
  image: string,
  source: PackageSource,
  options: { lockFile: string; bin?: string | undefined; log: Logger; debian?: readonly string[] },
): Promise<void> {
  const lock = await npmLock(source, options.lockFile, options.log);
  const entry = lock.packages?.[`node_modules/${source.name}`];
  if (!entry) throw new ImageError(`${options.lockFile} has no entry for ${source.name}: delete it to resolve again`);
  const [, target] = chooseCommand(source, entry.bin ?? {}, options.bin);
  const script = path.posix.normalize(target.replace(/^\.\//, ''));
  if (script.startsWith('../') || path.posix.isAbsolute(script)) {
    throw new ImageError(`${source.name}'s command ${target} lies outside its package`);
  }
  const context = mkdtempSync(path.join(os.tmpdir(), 'hintbox-npm-'));
  try {
    writeFileSync(path.join(context, 'package.json'), `${JSON.stringify(manifest(source), null, 2)}\n`);
    writeFileSync(path.join(context, 'package-lock.json'), `${JSON.stringify(lock, null, 2)}\n`);
    const entrypoint = ['/usr/bin/tini', '--', 'node', path.posix.join('/app/node_modules', source.name, script)];
    writeFileSync(
      path.join(context, 'Dockerfile'),
      [
        `# ${source.spec}, built by hintbox from the package lock (npm ci on the host, no install scripts).`,
        'ARG NODE_SERVER_IMAGE',
        'FROM ${NODE_SERVER_IMAGE}',
        ...debianPackagesLines(options.debian ?? []),
        'COPY --chown=0:0 node_modules /app/node_modules',
        `ENTRYPOINT ${JSON.stringify(entrypoint)}`,
        '',
      ].join('\n'),
    );
    await builder.ensure(image, context);
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
}
