import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { scratchFolder } from '../../support/scratch-folder.js';

const run = promisify(execFile);

/**
 * The MCP Inspector the tests drive: the newest release whose CLI runs on Node 20 (its engines
 * field says >=22.19, which npm only warns about; docs/protocol.md says what was tried).
 */
export const INSPECTOR_VERSION = '2.12.0';

/**
 * Where it is installed: a cache folder outside the repository, kept between runs, so that
 * `npm ci` never pulls its ~120 packages into every install.
 */
const CACHE = path.join(
  process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'),
  'hintbox-test',
  `inspector-${INSPECTOR_VERSION}`,
);

/**
 * The Inspector's bin, installed from the npm registry at the first use (into a folder of its
 * own, then renamed into the cache: a run cut short leaves no half-installed cache).
 */
export async function inspectorBin(): Promise<string> {
  const bin = path.join(CACHE, 'node_modules', '.bin', 'mcp-inspector');
  if (existsSync(bin)) return bin;
  mkdirSync(path.dirname(CACHE), { recursive: true });
  const staging = `${CACHE}.${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  const spec = `@modelcontextprotocol/inspector@${INSPECTOR_VERSION}`;
  try {
    await run('npm', ['install', '--prefix', staging, '--no-audit', '--no-fund', '--loglevel=error', spec], {
      timeout: 300_000,
    });
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    // npm's first line that says what failed (`npm error FetchError: request to … failed, reason: …`).
    const said = ((error as { stderr?: string }).stderr ?? '')
      .split('\n')
      .find((line) => /Error: |^npm error 404/.test(line));
    const why = said?.replace(/^npm error /, '') ?? (error as Error).message;
    throw new Error(`cannot install ${spec} from the npm registry (this test needs it): ${why}`);
  }
  // Another test process may have won the race: its copy is as good as this one.
  if (!existsSync(bin)) renameSync(staging, CACHE);
  rmSync(staging, { recursive: true, force: true });
  return bin;
}

/** What one `mcp-inspector --cli` run printed: the answer (stdout, JSON) and how it ended. */
export interface InspectorRun {
  code: number;
  /** The answer it printed on stdout, parsed (undefined when it printed none). */
  answer: unknown;
  stdout: string;
  stderr: string;
}

/**
 * Runs `mcp-inspector --cli <args>` as a user types it. Its own state (catalog, stored OAuth
 * tokens) goes to a scratch HOME; `env` is the environment of the Inspector itself.
 */
export async function inspector(args: string[], env: Record<string, string> = {}): Promise<InspectorRun> {
  const home = scratchFolder('hintbox-inspector-home-');
  const options = {
    env: { PATH: process.env.PATH ?? '', HOME: home, MCP_CATALOG_PATH: path.join(home, 'mcp.json'), ...env },
    timeout: 240_000,
  };
  const ended = await run(await inspectorBin(), ['--cli', '--connect-timeout', '180000', ...args], options).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code?: number | string; stdout?: string; stderr?: string }) => ({
      code: typeof error.code === 'number' ? error.code : -1,
      stdout: error.stdout ?? '',
      stderr: error.stderr ?? String(error.code),
    }),
  );
  // It prints its answer as one JSON document; anything else there fails the test here, shown.
  const answer: unknown = /^\s*[{[]/.test(ended.stdout) ? JSON.parse(ended.stdout) : undefined;
  return { ...ended, answer };
}

/** A port free on 127.0.0.1 at this moment (the Inspector's web UI takes fixed ports otherwise). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The Inspector's web UI, running; disposing it stops it. */
export interface InspectorWeb extends AsyncDisposable {
  /** The page to open, with the API token it prints (its proxy refuses a page without it). */
  url: string;
}

/** `mcp-inspector --web <args>`, as a user starts it; resolves once it says where it is up. */
export async function inspectorWeb(args: string[]): Promise<InspectorWeb> {
  const home = scratchFolder('hintbox-inspector-home-');
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: home, // its catalog and state (a catalog path would refuse the ad-hoc server)
    MCP_AUTO_OPEN_ENABLED: 'false',
    MCP_INSPECTOR_SECRET_STORE: 'memory',
    CLIENT_PORT: String(await freePort()),
    MCP_SANDBOX_PORT: String(await freePort()),
  };
  const child = spawn(await inspectorBin(), ['--web', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let said = '';
  const url = await new Promise<string>((resolve, reject) => {
    const read = (chunk: Buffer) => {
      said += chunk.toString('utf8');
      const found = /(http:\/\/127\.0\.0\.1:\d+\/?\?MCP_INSPECTOR_API_TOKEN=\w+)/.exec(said)?.[1];
      if (found) resolve(found);
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => reject(new Error(`mcp-inspector --web exited ${code}: ${said}`)));
    setTimeout(() => reject(new Error(`mcp-inspector --web said no URL in 60 s: ${said}`)), 60_000).unref();
  }).catch(async (error: unknown) => {
    child.kill('SIGTERM');
    await exited;
    throw error;
  });
  return {
    url,
    [Symbol.asyncDispose]: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
