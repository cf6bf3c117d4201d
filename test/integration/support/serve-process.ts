import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { stringify } from 'yaml';
import { LABEL_SERVER } from '../../../src/engine/sandbox-labels.js';
import { hashToken } from '../../../src/serve/bearer-tokens.js';
import { scratchFolder } from '../../support/scratch-folder.js';
import { containersOf, eventually, LIAR_IMAGE, ownHintboxProcess } from './docker.js';
import { HINTBOX_BIN, hintboxTestEnv } from './hintbox-process.js';

/** `hintbox serve` as a test runs it, and real SDK clients of it over streamable HTTP. */

/** A running `hintbox serve`; disposing it stops it ({@link stop}). */
export interface Serving extends AsyncDisposable {
  child: ChildProcess;
  url: string;
  stderr(): string;
  exited: Promise<number | null>;
}

/**
 * `hintbox serve` on a free port; resolves once it listens and `/readyz?verified` says ready:
 * every server verified, its sandboxes up (`until: 'serving'`: plain `/readyz`, servers may still
 * be serving from their lock files; `'listening'`: once it listens). `spawned` is told of the
 * process at once (a test that signals it while it starts).
 */
export async function serve(
  args: string[],
  env: Record<string, string> = {},
  spawned?: (child: ChildProcess) => void,
  until: 'verified' | 'serving' | 'listening' = 'verified',
): Promise<Serving> {
  const child = spawn(HINTBOX_BIN, ['serve', ...args, '--port', '0'], {
    env: { ...env, ...hintboxTestEnv() },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  ownHintboxProcess(child.pid);
  spawned?.(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
    if (process.env.HINTBOX_TEST_VERBOSE) process.stderr.write(chunk);
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let url = '';
  await eventually(
    async () => {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`serve exited ${child.exitCode ?? child.signalCode}: ${stderr}`);
      }
      url = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr)?.[1] ?? '';
      if (url === '' || until === 'listening') return url !== '';
      const probe = until === 'verified' ? '/readyz?verified' : '/readyz';
      return (await fetch(`${url}${probe}`).catch(() => undefined))?.status === 200;
    },
    120_000,
    'serve to be ready',
  );
  const serving: Serving = { child, url, stderr: () => stderr, exited, [Symbol.asyncDispose]: () => stop(serving) };
  return serving;
}

/** The liar as serve's tests serve it: trusted, a host folder at /data, no network. */
export function liarProfile(name: string, workspace: string): Record<string, unknown> {
  return {
    name,
    server: { image: LIAR_IMAGE },
    trust: 'trusted',
    mounts: [{ source: workspace, target: '/data' }],
    network: 'none',
    limits: { pids: 64, memory: '128m' },
  };
}

/** A tokens file of these entries (each token given in clear: the file keeps its SHA-256). */
export function tokensFile(entries: ({ name: string; token: string } & Record<string, unknown>)[]): string {
  const file = path.join(scratchFolder('hintbox-serve-tokens-'), 'tokens.yaml');
  writeFileSync(file, stringify(entries.map(({ token, ...entry }) => ({ ...entry, sha256: hashToken(token) }))));
  return file;
}

export async function stop(serving: Serving | undefined): Promise<void> {
  if (!serving || serving.child.exitCode !== null) return;
  serving.child.kill('SIGTERM');
  await serving.exited;
}

/**
 * A real SDK client over streamable HTTP that approves every confirmation (with `approveIf`,
 * those whose message it matches; it declines the others). `asked` keeps each message.
 * `fetch`: the transport's own (e.g. one that refuses the GET stream, as some clients never open it).
 */
export async function connect(
  url: string,
  token?: string,
  approveIf?: RegExp,
  options: { fetch?: FetchLike } = {},
): Promise<Client & { asked: number; messages: string[] }> {
  const client = Object.assign(
    new Client({ name: 'serve-test', version: '1.0.0' }, { capabilities: { elicitation: {} } }),
    { asked: 0, messages: [] as string[] },
  );
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    client.asked++;
    const message = (request.params as { message?: string }).message ?? '';
    client.messages.push(message);
    if (approveIf && !approveIf.test(message)) return { action: 'decline' };
    return { action: 'accept', content: { approve: true } };
  });
  const headers = token ? { Authorization: `Bearer ${token}` } : undefined;
  const transportOptions = { ...(headers ? { requestInit: { headers } } : {}), ...options };
  await client.connect(new StreamableHTTPClientTransport(new URL(url), transportOptions));
  return client;
}

export const textOf = (result: unknown): string => (result as { content: { text?: string }[] }).content[0]?.text ?? '';

/** The containers of one server among those of a serve process. */
export async function containersOfServer(pid: number | undefined, server: string) {
  return (await containersOf(pid)).filter((c) => c.Labels[LABEL_SERVER] === server);
}

export async function leave(client: Client): Promise<void> {
  await (client.transport as StreamableHTTPClientTransport).terminateSession().catch(() => undefined);
  await client.close();
}
