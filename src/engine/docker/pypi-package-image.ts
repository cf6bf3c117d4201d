import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { normalizePypiName, type PackageSource } from '../../packages/package-source.js';
import type { Logger } from '../../util/logger.js';
import { ImageError, type ImageBuilder } from './image-builder.js';
import { runTool } from './run-tool.js';
import { chooseCommand } from './package-commands.js';
import { guardedPipArgs, pipGuardLine } from './pip-guard.js';

/**
 * A server given as a PyPI package (`server.pypi`): its wheels (and its dependencies') are
 * resolved on the host with pip for the Python base's interpreter and platform, pinned by hash
 * in a lock beside the profile, installed on the host with `pip install --target` (no build,
 * no install code: wheels only) and copied onto the Python base, which has no pip. Every pip run
 * goes through the guard (pip-guard.ts): a requirement that is not a wheel from the index (a
 * direct URL, VCS, sdist, local path) is refused before pip prepares it, so no package code runs
 * on the host; nothing is ever built, here or in a sandbox. The index is pip's own setting on
 * the host (PIP_INDEX_URL, PIP_FIND_LINKS, pip.conf).
 */

/** The Python base's interpreter (Debian trixie). */
const PYTHON_VERSION = '3.13';
const LOCK_HEADER = '# hintbox PyPI lock for: ';

/** pip's options that pick wheels for the base image, whatever Python the host has. */
function targetOptions(): string[] {
  const arch = process.arch === 'arm64' ? 'aarch64' : 'x86_64';
  // trixie's glibc is 2.41: every manylinux wheel up to that runs on it.
  const platforms = Array.from({ length: 41 - 5 + 1 }, (_, i) => `manylinux_2_${i + 5}_${arch}`);
  const abi = `cp${PYTHON_VERSION.replace('.', '')}`;
  return [
    '--only-binary=:all:',
    '--python-version',
    PYTHON_VERSION,
    '--implementation',
    'cp',
    ...[abi, 'abi3', 'none'].flatMap((a) => ['--abi', a]),
    ...platforms.flatMap((p) => ['--platform', p]),
    '--disable-pip-version-check',
    '--no-input',
  ];
}

/** Runs pip under the guard (pip-guard.ts): it never prepares anything but a wheel from the index. */
function pip(args: string[], cwd: string, log: Logger, what: string): Promise<void> {
  return runTool('python3', guardedPipArgs(args), cwd, log).catch((error: NodeJS.ErrnoException) => {
    const missing = error.code === 'ENOENT' || /No module named pip/.test(error.message);
    const refused = pipGuardLine(error.message);
    throw new ImageError(
      missing
        ? `${what} needs Python's pip on this host (apt-get install python3-pip)`
        : refused
          ? `${what}: ${refused}`
          : `${what} failed: ${error.message}`,
    );
  });
}

/** `mcp_server_fetch-2025.4.7-py3-none-any.whl` → name and version (PEP 427). */
function wheelNameVersion(file: string): [string, string] | undefined {
  const parts = file.replace(/\.whl$/, '').split('-');
  return parts.length >= 5 ? [normalizePypiName(parts[0]!), parts[1]!] : undefined;
}

/** The requirement lines of a lock: `name==version --hash=sha256:…`, one per wheel. */
function lockLines(wheels: string): string[] {
  return readdirSync(wheels)
    .filter((file) => file.endsWith('.whl'))
    .sort()
    .map((file) => {
      const nameVersion = wheelNameVersion(file);
      if (!nameVersion) throw new ImageError(`pip downloaded ${file}, which is not a wheel's name`);
      const digest = createHash('sha256')
        .update(readFileSync(path.join(wheels, file)))
        .digest('hex');
      return `${nameVersion[0]}==${nameVersion[1]} --hash=sha256:${digest}`;
    });
}

/**
 * The lock beside the profile if it is for this requirement; else resolved now (the wheels
 * downloaded into `wheels`) and written there. Returns the lock's text.
 */
export async function pypiLock(source: PackageSource, lockFile: string, wheels: string, log: Logger): Promise<string> {
  if (existsSync(lockFile)) {
    const text = readFileSync(lockFile, 'utf8');
    const forSpec = text.split('\n', 1)[0]!.startsWith(LOCK_HEADER)
      ? text.split('\n', 1)[0]!.slice(LOCK_HEADER.length)
      : '';
    if (forSpec === source.spec) return text;
    log.info(
      `${lockFile} is for ${forSpec || 'another requirement'}, the profile asks for ${source.spec}: resolving again`,
    );
  }
  log.info(`resolving ${source.spec} with pip on the host (wheels for Python ${PYTHON_VERSION})`);
  await pip(['download', '--dest', wheels, ...targetOptions(), source.spec], wheels, log, `resolving ${source.spec}`);
  const text = [
    `${LOCK_HEADER}${source.spec}`,
    '# Written by hintbox: every wheel hintbox installs, pinned by its hash. Delete it to resolve again.',
    ...lockLines(wheels),
    '',
  ].join('\n');
  writeFileSync(lockFile, text);
  log.info(`wrote ${lockFile}`);
  return text;
}

/** `[console_scripts]` of an installed distribution: command name → `module:attr`. */
function consoleScripts(site: string, source: PackageSource): Record<string, string> {
  const wanted = normalizePypiName(source.name);
  const distInfo = readdirSync(site).find(
    (dir) => dir.endsWith('.dist-info') && normalizePypiName(dir.replace(/-[^-]+\.dist-info$/, '')) === wanted,
  );
  if (!distInfo) throw new ImageError(`pip installed no distribution named ${source.name}`);
  const file = path.join(site, distInfo, 'entry_points.txt');
  const scripts: Record<string, string> = {};
  if (!existsSync(file)) return scripts;
  let section = '';
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const line = raw.trim();
    const header = /^\[(.+)\]$/.exec(line);
    if (header) section = header[1]!;
    const entry = /^([^=\s]+)\s*=\s*([A-Za-z_][\w.]*):([A-Za-z_][\w.]*)\s*(\[.*\])?$/.exec(line);
    if (section === 'console_scripts' && entry) scripts[entry[1]!] = `${entry[2]}:${entry[3]}`;
  }
  return scripts;
}

/** Starts a console script as its generated wrapper would: argv[0] its name, exit with its result. */
const LAUNCHER = `import importlib, json, sys
entry = json.load(open("/app/entry.json"))
target = importlib.import_module(entry["module"])
for part in entry["attr"].split("."):
    target = getattr(target, part)
sys.argv[0] = entry["name"]
sys.exit(target())
`;

/** Builds (or keeps, while its lock is unchanged) the image of a PyPI package. */
export async function ensurePypiImage(
  builder: ImageBuilder,
  image: string,
  source: PackageSource,
  options: { lockFile: string; bin?: string | undefined; log: Logger },
): Promise<void> {
  const { log, lockFile } = options;
  const work = mkdtempSync(path.join(os.tmpdir(), 'hintbox-pypi-'));
  try {
    const wheels = path.join(work, 'wheels');
    mkdirSync(wheels);
    const lock = await pypiLock(source, lockFile, wheels, log);
    const context = path.join(work, 'context');
    mkdirSync(context);
    writeFileSync(path.join(context, 'pip-lock.txt'), lock);
    // What is built follows from the lock and the command asked for: both are in the context.
    writeFileSync(path.join(context, 'command.json'), `${JSON.stringify({ bin: options.bin ?? null })}\n`);
    writeFileSync(path.join(context, 'entry.py'), LAUNCHER);
    writeFileSync(
      path.join(context, 'Dockerfile'),
      [
        `# ${source.spec}, built by hintbox from the PyPI lock (wheels installed on the host, no pip in the image).`,
        'ARG PYTHON_SERVER_IMAGE',
        'FROM ${PYTHON_SERVER_IMAGE}',
        'COPY --chown=0:0 site /app/site',
        'COPY --chown=0:0 entry.py entry.json /app/',
        'ENTRYPOINT ["/usr/bin/tini", "--", "python3", "/app/entry.py"]',
        '',
      ].join('\n'),
    );
    await builder.ensure(image, context, {
      base: 'PYTHON_SERVER_IMAGE',
      install: async (staged) => {
        const what = `installing ${source.spec} from ${lockFile}`;
        const pinned = ['--no-deps', '--require-hashes', '-r', path.join(staged, 'pip-lock.txt'), ...targetOptions()];
        if (readdirSync(wheels).length === 0) await pip(['download', '--dest', wheels, ...pinned], staged, log, what);
        log.info(`installing ${source.spec} on the host (pip install --target, wheels only)`);
        const site = path.join(staged, 'site');
        const local = ['--no-index', '--find-links', wheels, '--no-compile', '--target', site];
        await pip(['install', ...local, ...pinned], staged, log, what);
        // Console-script wrappers pip wrote for the host's Python: the launcher replaces them.
        rmSync(path.join(site, 'bin'), { recursive: true, force: true });
        const [name, target] = chooseCommand(source, consoleScripts(site, source), options.bin);
        const [module, attr] = target.split(':');
        writeFileSync(path.join(staged, 'entry.json'), `${JSON.stringify({ name, module, attr })}\n`);
      },
    });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
