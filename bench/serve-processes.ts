/**
 * The processes and folders of the serve bench (serve-bench.ts): `hintbox serve` of a folder
 * of profiles (with a tokens file or without), the folder itself, its lock files, and the SDK's
 * own streamable HTTP server as the transport's baseline.
 */
import { createHash } from 'node:crypto';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';

export interface Serving {
  child: ChildProcess;
  url: string;
  stop(): Promise<void>;
}

/** What `hintbox serve` and `hintbox approve` are run with. */
export interface HintboxCommand {
  hintboxBin: string;
  env: Record<string, string>;
  /** serve only: run it as `launcher… serve …` instead (another build, node flags: http-front's variants). */
  launcher?: [string, ...string[]];
}

/**
 * A tokens file (in a folder of its own: serve reads every `*.yaml` of its profiles folder) with
 * one token, `bench`; its text and the file.
 */
export function benchToken(): { token: string; file: string; folder: string } {
  const folder = mkdtempSync(path.join(os.tmpdir(), 'hintbox-bench-tokens-'));
  const token = 'bench-token-' + createHash('sha256').update(folder).digest('hex').slice(0, 16);
  const file = path.join(folder, 'tokens.json');
  writeFileSync(file, JSON.stringify([{ name: 'bench', sha256: createHash('sha256').update(token).digest('hex') }]));
  return { token, file, folder };
}

/** `hintbox serve` of `folder` on an ephemeral loopback port, until /readyz is 200 (300 s at most). */
export async function startServe(options: HintboxCommand, folder: string, tokensFile?: string): Promise<Serving> {
  const [command, ...before] = options.launcher ?? [options.hintboxBin];
  const args = [...before, 'serve', folder, '--port', '0', ...(tokensFile ? ['--tokens', tokensFile] : [])];
  const child = spawn(command, args, {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...options.env, HINTBOX_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  // A command that cannot be spawned (a launcher's typo) is an error event, and no exit follows.
  let spawnError: Error | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', (error) => {
      spawnError = error;
      if (child.pid === undefined) resolve();
    });
  });
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.pid !== undefined) child.kill('SIGTERM');
    await exited;
  };
  const deadline = Date.now() + 300_000;
  for (;;) {
    if (spawnError) throw new Error(`${command} could not be started: ${spawnError.message}`);
    if (child.exitCode !== null) throw new Error(`hintbox serve exited ${child.exitCode}:\n${stderr}`);
    const url = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr)?.[1];
    if (url && (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200) return { child, url, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`hintbox serve was not ready within 300 s:\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `hintbox approve --all` of fs-1 (not timed), its lock file copied for the others (the same tools). */
export function approveEach(options: HintboxCommand, folder: string, servers: number): void {
  execFileSync(options.hintboxBin, ['approve', path.join(folder, 'fs-1.yaml'), '--all', '--yes'], {
    env: { ...process.env, ...options.env },
    stdio: 'ignore',
  });
  const lock = JSON.parse(readFileSync(path.join(folder, 'fs-1.lock.json'), 'utf8')) as { server: string };
  for (let n = 2; n <= servers; n++) {
    writeFileSync(path.join(folder, `fs-${n}.lock.json`), JSON.stringify({ ...lock, server: `fs-${n}` }, null, 2));
  }
}

/** Until /readyz names every server `ready` (verified against its lock file), within 300 s. */
export async function allVerified(url: string): Promise<void> {
  const deadline = Date.now() + 300_000;
  for (;;) {
    const answer = await fetch(`${url}/readyz`).catch(() => undefined);
    const body = (await answer?.json().catch(() => undefined)) as { servers?: Record<string, string> } | undefined;
    const states = Object.values(body?.servers ?? {});
    if (states.length > 0 && states.every((s) => s === 'ready')) return;
    if (Date.now() > deadline) throw new Error(`not every server was verified within 300 s: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A folder of `n` copies of the profile (fs-1 … fs-n). `readOnly`: the mount read-only, so each
 * server needs one sandbox (the memory figure is serve's own, not the engine's).
 */
export function profilesFolder(profileText: string, n: number, readOnly = false): string {
  const folder = mkdtempSync(path.join(os.tmpdir(), 'hintbox-bench-serve-'));
  const profile = parse(profileText) as { name: string; mounts?: { mode?: string }[] };
  for (let i = 1; i <= n; i++) {
    const copy = { ...profile, name: `fs-${i}` };
    if (readOnly) copy.mounts = (profile.mounts ?? []).map((m) => ({ ...m, mode: 'ro' }));
    writeFileSync(path.join(folder, `fs-${i}.yaml`), stringify(copy));
  }
  return folder;
}

export function residentMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

/** The transport baseline (`http-echo-server.ts`) in a process of its own. */
export async function startBareHttp(): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'http-echo-server.ts')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    let text = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const found = /listening on (\S+)/.exec(text)?.[1];
      if (found) resolve(found);
    });
    child.once('exit', (code) => reject(new Error(`the HTTP baseline exited ${code}: ${text}`)));
  });
  return {
    url,
    pid: child.pid ?? -1,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}
