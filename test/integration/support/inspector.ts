import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
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
