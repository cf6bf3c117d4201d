/**
 * The servers the benchmark measures, started as an MCP client's config starts them (a process
 * speaking MCP on stdio), and what a started hintbox holds: its sandboxes and their memory.
 */
import type Docker from 'dockerode';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { LABEL_OWNER_PID } from '../src/engine/sandbox-labels.js';
import { waitForExit } from './proc-stat.js';

/** A server started by the benchmark, connected over stdio. */
export interface Running {
  client: Client;
  /** The workspace as the server sees it (the host folder for bare, the mount target otherwise). */
  workspace: string;
  /** Process whose resident memory is the variant's own overhead (hintbox itself; the docker CLI; the bare server). */
  pid: number;
  close(): Promise<void>;
}

/**
 * Starts `command args` as an MCP server over stdio with only PATH, HOME and `env`, and connects
 * a client. `showStderr`: its stderr on ours, each line with the ms since launch (hintbox's own
 * log with `--verbose`); else ignored.
 */
export async function spawnServer(
  workspace: string,
  command: string,
  args: string[],
  env: Record<string, string> = {},
  showStderr = false,
): Promise<Running> {
  const transport = new StdioClientTransport({
    command,
    args,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...env },
    stderr: showStderr ? 'pipe' : 'ignore',
  });
  const launched = performance.now();
  transport.stderr?.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
      process.stderr.write(`${(performance.now() - launched).toFixed(0).padStart(6)} ms  ${line}\n`);
    }
  });
  const client = new Client({ name: 'hintbox-bench', version: '1.0.0' });
  await client.connect(transport);
  return {
    client,
    workspace,
    pid: transport.pid ?? -1,
    close: async () => {
      await client.close();
      await waitForExit(transport.pid ?? -1);
    },
  };
}

/**
 * Waits until the containers of `image` are gone and the engine is idle again: Docker removes a
 * container (and its mounts and namespaces) after the client has gone, and the next variant's
 * start must not pay for that.
 */
export async function settle(docker: Docker, image: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const left = await docker.listContainers({ all: true, filters: { ancestor: [image] } });
    if (left.length === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 1000));
}

/** Memory of the containers that hintbox process `pid` owns (empty for other variants). */
export async function sandboxMemory(docker: Docker, pid: number): Promise<number[]> {
  const containers = await docker.listContainers({ filters: { label: [`${LABEL_OWNER_PID}=${pid}`] } });
  return Promise.all(
    containers.map(async (c) => {
      const stats = (await docker.getContainer(c.Id).stats({ stream: false })) as {
        memory_stats?: { usage?: number; stats?: { cache?: number } };
      };
      const usage = (stats.memory_stats?.usage ?? 0) - (stats.memory_stats?.stats?.cache ?? 0);
      return usage / 1024 / 1024;
    }),
  );
}
