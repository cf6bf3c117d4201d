import { spawn } from 'node:child_process';
import { chownSync, copyFileSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { PassThrough } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  ElicitRequestSchema,
  type ClientCapabilities,
  type ElicitRequest,
  type ElicitResult,
} from '@modelcontextprotocol/sdk/types.js';
import { stringify } from 'yaml';
import { FIXTURES, ownHintboxProcess, REPO } from './docker.js';
import { relocatedProfileText } from '../../../src/profile/relocate-profile.js';
import { scratchFolder } from '../../support/scratch-folder.js';

/** The shipped CLI: the one-file bundle that the `hintbox` bin runs. */
export const HINTBOX_BIN = path.join(REPO, 'dist', 'hintbox.mjs');

/**
 * This test process's own state folder (audit log, known tools): tests never touch the user's,
 * and test processes never share one.
 */
export const STATE_DIR = scratchFolder('hintbox-test-state-');

/** How the test client answers hintbox's confirmations: approve, deny, or never answer. */
export type Confirmations = 'approve' | 'deny' | 'never' | 'unsupported';

/** A temp folder the sandbox user (uid 10001 when tests run as root) may use. */
export function sandboxFolder(prefix = 'hintbox-test-'): string {
  const dir = scratchFolder(prefix);
  if (process.getuid?.() === 0) chownSync(dir, 10001, 10001);
  return dir;
}

/**
 * A copy of a shipped profile (`profiles/<name>.yaml`) in a fresh temp folder, with the package
 * lock shipped beside it if there is one (`<name>.npm-lock.json`): `approve` writes its lock file
 * beside the copy, never into the repository, and the package is built from the shipped lock.
 */
export function copyOfShippedProfile(name: string): string {
  const folder = scratchFolder('hintbox-profile-');
  const file = path.join(folder, `${name}.yaml`);
  writeFileSync(file, relocatedProfileText(path.join(REPO, 'profiles', `${name}.yaml`)));
  const npmLock = path.join(REPO, 'profiles', `${name}.npm-lock.json`);
  if (existsSync(npmLock)) copyFileSync(npmLock, path.join(folder, `${name}.npm-lock.json`));
  return file;
}

/**
 * A copy of a fixture profile (`test/fixtures/<file>`) in a fresh temp folder, for the same
 * reason as {@link copyOfShippedProfile}.
 */
export function copyOfFixtureProfile(file: string): string {
  const copy = path.join(scratchFolder('hintbox-profile-'), path.basename(file));
  writeFileSync(copy, relocatedProfileText(path.join(FIXTURES, file)));
  return copy;
}

/** Writes a profile YAML into a fresh temp folder and returns its path. */
export function writeProfile(profile: Record<string, unknown>): string {
  const dir = scratchFolder('hintbox-profile-');
  const file = path.join(dir, 'profile.yaml');
  writeFileSync(file, stringify(profile));
  return file;
}

export interface RunningHintbox extends AsyncDisposable {
  client: Client;
  transport: StdioClientTransport;
  pid: number;
  stderr(): string;
  /** Resolves with the exit code when the hintbox process ends. */
  exited: Promise<number | null>;
}

/** How a test runs `hintbox run`: every field has the default a plain MCP client would have. */
export interface RunOptions {
  /** More environment of the hintbox process (beside {@link hintboxTestEnv}). */
  env?: Record<string, string>;
  /** How the client answers hintbox's confirmations (default `approve`). */
  confirmations?: Confirmations;
  /** Client capabilities besides elicitation (sampling, roots): the test sets their handlers. */
  capabilities?: ClientCapabilities;
  /** More arguments of `hintbox run` (after the profile), e.g. `--console`. */
  args?: string[];
  /**
   * The client's own answer to an `elicitation/create` (instead of `confirmations`); `extra.signal`
   * aborts when hintbox cancels the request. Give `capabilities.elicitation` to declare the modes
   * (e.g. `{ url: {} }`); without it the client declares `elicitation: {}` (form mode).
   */
  onElicit?: (params: ElicitRequest['params'], extra: { signal: AbortSignal }) => ElicitResult | Promise<ElicitResult>;
}

/** `hintbox run <profile>` as an MCP client's config would launch it, driven by the SDK client. */
export async function runHintbox(
  profile: string,
  options: RunOptions = {},
): Promise<RunningHintbox & { asked: ElicitRequest['params'][] }> {
  const { env = {}, confirmations = 'approve', capabilities = {}, args = [], onElicit } = options;
  const transport = new StdioClientTransport({
    command: HINTBOX_BIN,
    args: ['run', profile, ...args],
    env: { ...hintboxTestEnv(), ...env },
    stderr: 'pipe',
    // Above the SDK's default (10 MB): tests pass servers' huge answers through, as a client may take them.
    maxBufferSize: 128 * 1024 * 1024,
  });
  let stderr = '';
  const stderrStream = transport.stderr as PassThrough | null;
  stderrStream?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
    if (process.env.HINTBOX_TEST_VERBOSE) process.stderr.write(chunk);
  });
  const asked: ElicitRequest['params'][] = [];
  const client = new Client(
    { name: 'hintbox-test', version: '1.0.0' },
    { capabilities: { ...(confirmations === 'unsupported' ? {} : { elicitation: {} }), ...capabilities } },
  );
  if (confirmations !== 'unsupported') {
    client.setRequestHandler(ElicitRequestSchema, (request, extra): Promise<ElicitResult> | ElicitResult => {
      asked.push(request.params);
      if (onElicit) return onElicit(request.params, { signal: extra.signal });
      if (confirmations === 'never') return new Promise<ElicitResult>(() => {});
      return { action: 'accept', content: { approve: confirmations === 'approve' } };
    });
  }
  try {
    await client.connect(transport);
  } catch (error) {
    throw new Error(`hintbox run failed to start: ${(error as Error).message}\n${stderr}`);
  }
  const pid = transport.pid;
  if (pid === null) throw new Error('hintbox run has no pid');
  ownHintboxProcess(pid);
  const exited = new Promise<number | null>((resolve) => {
    const check = setInterval(() => {
      try {
        process.kill(pid, 0);
      } catch {
        clearInterval(check);
        resolve(null);
      }
    }, 50);
  });
  return {
    asked,
    client,
    transport,
    pid,
    stderr: () => stderr,
    exited,
    [Symbol.asyncDispose]: async () => {
      await client.close().catch(() => undefined);
      await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
    },
  };
}

/** Runs a hintbox command to completion, capturing its output. */
export function hintboxCommand(
  args: string[],
  env: Record<string, string> = {},
  /** Another hintbox's bin (an installed one), a folder to run in. */
  options: { bin?: string; cwd?: string } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(options.bin ?? HINTBOX_BIN, args, {
      env: { ...hintboxTestEnv(), ...env },
      ...(options.cwd ? { cwd: options.cwd } : {}),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    ownHintboxProcess(child.pid);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * The environment a test's hintbox gets: this test process's state folder, and nothing else of
 * the host's but PATH, HOME, DOCKER_HOST, TMPDIR (its temp folders go where the test's do) and
 * HINTBOX_FREEZER (`HINTBOX_FREEZER=gate` runs a suite with held sandboxes frozen by their gate).
 */
export function hintboxTestEnv(): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/root',
    HINTBOX_STATE_DIR: STATE_DIR,
    ...(process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {}),
    ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}),
    ...(process.env.HINTBOX_FREEZER ? { HINTBOX_FREEZER: process.env.HINTBOX_FREEZER } : {}),
  };
}

/**
 * The audit trail of one server, newest first, read through the CLI as an operator would
 * (`hintbox audit --server … --json`, one record per line); `Row` names the fields a test reads.
 */
export async function auditOf<Row>(
  server: string,
  /** `all`: every record, not only the newest (`--all`); `events`: the events too (`--events`); `env`: e.g. another HINTBOX_AUDIT_DIR. */
  options: { all?: boolean; events?: boolean; env?: Record<string, string> } = {},
): Promise<Row[]> {
  const args = [
    'audit',
    '--server',
    server,
    ...(options.all ? ['--all'] : []),
    ...(options.events ? ['--events'] : []),
    '--json',
  ];
  const { code, stdout, stderr } = await hintboxCommand(args, options.env);
  if (code !== 0) throw new Error(`hintbox audit exited ${code}: ${stderr}`);
  return stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Row);
}

/** The JSON a liar tool answered (its structuredContent). */
export function outcomeOf(result: unknown): { ok: boolean; value?: unknown; error?: string } {
  const r = result as {
    structuredContent?: { ok: boolean; value?: unknown; error?: string };
    content?: { text?: string }[];
  };
  if (r.structuredContent) return r.structuredContent;
  throw new Error(`not a liar result: ${JSON.stringify(result)}`);
}
