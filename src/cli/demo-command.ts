import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { LABEL_CLASS, LABEL_OWNER_PID } from '../sandbox/container-spec.js';
import { connectDocker } from '../sandbox/docker-connection.js';
import { packagePath } from '../util/package-root.js';
import { VERSION } from '../version.js';
import type { CommandSpec } from './main.js';

const HELP = `Usage: hintbox demo

Runs the real @modelcontextprotocol/server-filesystem under "hintbox run" on a scratch folder,
as an MCP client would, and shows what hintbox did: the sandboxes and their mounts, a read, a
write that lands on the host, and the cleanup. Builds the images it needs on first use (the
progress goes to stderr). Needs a running Docker engine.`;

const PROFILE = packagePath('profiles', 'filesystem.yaml');
/** The running CLI (the bundle, or dist/cli/main.js): the demo launches `hintbox run` with it. */
const MAIN = process.argv[1] ?? packagePath('dist', 'hintbox.mjs');

export const demoCommand: CommandSpec = {
  help: HELP,
  options: {},
  async run() {
    const say = (line = ''): void => void process.stdout.write(line + '\n');
    const { docker } = await connectDocker();
    const workspace = mkdtempSync(path.join(os.tmpdir(), 'hintbox-demo-'));
    writeFileSync(path.join(workspace, 'notes.txt'), 'written on the host before the demo\n');
    // Run as root, hintbox gives its sandboxes uid 10001 (never root): let that uid use the folder.
    if (process.getuid?.() === 0)
      for (const p of [workspace, path.join(workspace, 'notes.txt')]) chownSync(p, 10001, 10001);
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [MAIN, 'run', PROFILE],
      env: { ...stringEnv(process.env), WORKSPACE: workspace },
      stderr: 'inherit',
    });
    const client = new Client({ name: 'hintbox-demo', version: VERSION });
    try {
      say(`1. hintbox run ${path.relative(process.cwd(), PROFILE)} with WORKSPACE=${workspace}`);
      await client.connect(transport);
      const { tools } = await client.listTools();
      say(`   the client sees ${tools.length} tools: ${tools.map((t) => t.name).join(', ')}`);

      const containers = await docker.listContainers({ filters: { label: [`${LABEL_OWNER_PID}=${transport.pid}`] } });
      say(`2. sandboxes (one container per class of tools):`);
      for (const c of containers) {
        const info = await docker.getContainer(c.Id).inspect();
        const mounts = info.Mounts.map((m) => `${m.Destination} ${m.RW ? 'read-write' : 'read-only'}`).join(', ');
        const capDrop = (info.HostConfig.CapDrop as string[] | undefined) ?? [];
        say(
          `   ${c.Labels[LABEL_CLASS]}: network ${info.HostConfig.NetworkMode}, ${mounts}, ` +
            `user ${info.Config.User}, capabilities dropped: ${capDrop.join(',')}`,
        );
      }

      const read = await client.callTool({ name: 'read_text_file', arguments: { path: '/workspace/notes.txt' } });
      say(`3. read_text_file (read-only sandbox) -> ${JSON.stringify(firstText(read))}`);
      await client.callTool({
        name: 'write_file',
        arguments: { path: '/workspace/hello.txt', content: 'written by the server\n' },
      });
      say(
        `4. write_file (read-write sandbox) -> on the host: ${JSON.stringify(readFileSync(path.join(workspace, 'hello.txt'), 'utf8'))}`,
      );
      const unknown = await client.callTool({ name: 'no_such_tool', arguments: {} }).catch((e: Error) => e.message);
      say(`5. an unknown tool -> ${typeof unknown === 'string' ? unknown : JSON.stringify(unknown)}`);
    } finally {
      await client.close();
      rmSync(workspace, { recursive: true, force: true });
    }
    const left = await docker.listContainers({
      all: true,
      filters: { label: [`${LABEL_OWNER_PID}=${transport.pid ?? -1}`] },
    });
    say(`6. client disconnected: ${left.length} container(s) of the session left`);
    return left.length === 0 ? 0 : 1;
  },
};

function stringEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
}

function firstText(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.find((c) => c.type === 'text')?.text ?? '';
}
