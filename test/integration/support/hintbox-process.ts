import { spawn } from 'node:child_process';
import { chownSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { PassThrough } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { stringify } from 'yaml';
import { REPO } from './docker.js';

/** The shipped CLI: the one-file bundle that the `hintbox` bin runs. */
export const HINTBOX_BIN = path.join(REPO, 'dist', 'hintbox.mjs');

/** A temp folder the sandbox user (uid 10001 when tests run as root) may use. */
export function sandboxFolder(prefix = 'hintbox-test-'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  if (process.getuid?.() === 0) chownSync(dir, 10001, 10001);
  return dir;
}

/** Writes a profile YAML into a fresh temp folder and returns its path. */
export function writeProfile(profile: Record<string, unknown>): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hintbox-profile-'));
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

/** `hintbox run <profile>` as an MCP client's config would launch it, driven by the SDK client. */
export async function runHintbox(profile: string, env: Record<string, string> = {}): Promise<RunningHintbox> {
  const transport = new StdioClientTransport({
    command: HINTBOX_BIN,
    args: ['run', profile],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...dockerEnv(), ...env },
    stderr: 'pipe',
  });
  let stderr = '';
  const stderrStream = transport.stderr as PassThrough | null;
  stderrStream?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
    if (process.env.HINTBOX_TEST_VERBOSE) process.stderr.write(chunk);
  });
  const client = new Client({ name: 'hintbox-test', version: '1.0.0' });
  try {
    await client.connect(transport);
  } catch (error) {
    throw new Error(`hintbox run failed to start: ${(error as Error).message}\n${stderr}`);
  }
  const pid = transport.pid;
  if (pid === null) throw new Error('hintbox run has no pid');
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
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(HINTBOX_BIN, args, {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...dockerEnv(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

function dockerEnv(): Record<string, string> {
  return process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {};
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
