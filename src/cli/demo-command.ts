import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { relocatedProfileText } from '../profile/relocate-profile.js';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { DockerEngine } from '../engine/docker/docker-engine.js';
import type { SandboxEngine } from '../engine/sandbox-engine.js';
import { cliLog } from './common.js';
import { packagePath } from '../util/package-root.js';
import { VERSION } from '../version.js';
import type { CommandSpec } from './command-spec.js';
import { processVariables, type Variables } from '../config/environment.js';
import { UsageError } from '../util/hintbox-error.js';

const HELP = `Usage: hintbox demo

Runs the real @modelcontextprotocol/server-filesystem under "hintbox run" on a scratch folder,
as an MCP client would, and shows what hintbox did: the approval of its tool definitions, the
sandboxes and their mounts, confirmations (the demo plays the person: it approves a read and a
write, and declines a move), the cleanup, and the audit trail. Its profile, lock file and audit
log are kept in a scratch folder. Builds the images it needs on first use (the
progress goes to stderr). Needs a running Docker engine.`;

const PROFILE = packagePath('profiles', 'filesystem.yaml');
/** The running CLI (the bundle, or dist/cli/main.js): the demo launches `hintbox run` with it. */
const MAIN = process.argv[1] ?? packagePath('dist', 'hintbox.mjs');

export const demoCommand: CommandSpec = {
  help: HELP,
  options: {},
  async run({ positionals }) {
    if (positionals.length) throw new UsageError(`demo: unexpected argument ${positionals[0]}`);
    const say = (line = ''): void => void process.stdout.write(line + '\n');
    const engine = await DockerEngine.connect({ log: cliLog });
    const workspace = mkdtempSync(path.join(os.tmpdir(), 'hintbox-demo-'));
    // The demo's profile, lock file and audit log live in a scratch state folder, not in yours
    // (nor beside the shipped profile, where "approve" would write a lock file).
    const state = mkdtempSync(path.join(os.tmpdir(), 'hintbox-demo-state-'));
    const profile = path.join(state, 'filesystem.yaml');
    writeFileSync(profile, relocatedProfileText(PROFILE));
    writeFileSync(path.join(workspace, 'notes.txt'), 'written on the host before the demo\n');
    // Run as root, hintbox gives its sandboxes uid 10001 (never root): let that uid use the folder.
    if (process.getuid?.() === 0)
      for (const p of [workspace, path.join(workspace, 'notes.txt')]) chownSync(p, 10001, 10001);
    const env = {
      ...stringEnv(processVariables()),
      WORKSPACE: workspace,
      HINTBOX_STATE_DIR: state,
    };
    const cli = (args: string[]): string => execFileSync(process.execPath, [MAIN, ...args], { env, encoding: 'utf8' });

    let ownerPid: number | null = null;
    try {
      say(`1. the filesystem server is untrusted: its tools are served only once approved (pinned)`);
      const approved = cli(['approve', profile, '--all', '--yes'])
        .split('\n')
        .filter((l) => / approved \(/.test(l));
      say(
        `   hintbox approve ${path.relative(process.cwd(), PROFILE)} --all -> ${approved.length} tools approved into the lock file`,
      );

      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [MAIN, 'run', profile],
        env,
        stderr: 'inherit',
      });
      // A client that can be asked (MCP elicitation): the demo plays the person, and says so.
      const client = new Client({ name: 'hintbox-demo', version: VERSION }, { capabilities: { elicitation: {} } });
      client.setRequestHandler(ElicitRequestSchema, (request) => {
        const lines = request.params.message.split('\n');
        const approve = !lines[0]?.includes('move_file');
        // What the person sees, but the arguments (the demo printed those itself).
        const args = lines.findIndex((l) => l.startsWith('Arguments'));
        const preview = lines.findIndex((l) => /^(No preview|Preview)/.test(l));
        const shown = [...lines.slice(0, Math.max(1, args)), ...(preview >= 0 ? lines.slice(preview) : [])];
        say(`   ┌ confirmation asked through MCP elicitation`);
        for (const line of shown) say(`   │ ${line}`);
        say(`   [the demo ${approve ? 'approves' : 'declines'}]`);
        // A person who declines says so (a form submitted unticked is a denial too, but a silent one).
        return approve ? { action: 'accept', content: { approve } } : { action: 'decline' };
      });
      try {
        say(`2. hintbox run ${path.relative(process.cwd(), PROFILE)} with WORKSPACE=${workspace}`);
        await client.connect(transport);
        ownerPid = transport.pid;
        const { tools } = await client.listTools();
        say(`   the client sees ${tools.length} tools: ${tools.map((t) => t.name).join(', ')}`);

        say(`3. sandboxes (one container per class of tools):`);
        for (const sandbox of await engine.sandboxesOf(ownerPid ?? -1)) {
          const mounts = sandbox.mounts.map((m) => `${m.target} ${m.readOnly ? 'read-only' : 'read-write'}`).join(', ');
          say(
            `   ${sandbox.sandboxClass}: network ${sandbox.network}, ${mounts}, ` +
              `user ${sandbox.user}, capabilities dropped: ${sandbox.capabilitiesDropped.join(',')}`,
          );
        }

        say(`4. read_text_file (read-only sandbox):`);
        const read = await client.callTool({ name: 'read_text_file', arguments: { path: '/workspace/notes.txt' } });
        say(`   -> ${JSON.stringify(firstText(read))}`);
        say(`5. write_file (read-write sandbox):`);
        await client.callTool({
          name: 'write_file',
          arguments: { path: '/workspace/hello.txt', content: 'written by the server\n' },
        });
        say(`   -> on the host: ${JSON.stringify(readFileSync(path.join(workspace, 'hello.txt'), 'utf8'))}`);
        say(`6. move_file, declined by the person:`);
        const moved = await client.callTool({
          name: 'move_file',
          arguments: { source: '/workspace/notes.txt', destination: '/workspace/gone.txt' },
        });
        say(
          `   -> ${firstText(moved).split('\n')[0]}; notes.txt is ${existsSync(path.join(workspace, 'notes.txt')) ? 'still there' : 'GONE'}`,
        );
      } finally {
        await client.close();
      }
      const left = await waitForNoSandboxes(engine, ownerPid);
      say(`7. client disconnected: ${left} container(s) of the session left`);
      say(`8. hintbox audit:`);
      for (const line of cli(['audit']).trimEnd().split('\n')) say(`   ${line}`);
      return left === 0 ? 0 : 1;
    } finally {
      rmSync(workspace, { recursive: true, force: true });
      rmSync(state, { recursive: true, force: true });
    }
  },
};

async function waitForNoSandboxes(engine: SandboxEngine, ownerPid: number | null): Promise<number> {
  let left = 0;
  for (let i = 0; i < 100; i++) {
    left = (await engine.sandboxesOf(ownerPid ?? -1)).length;
    if (left === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return left;
}

function stringEnv(env: Variables): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
}

function firstText(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.find((c) => c.type === 'text')?.text ?? '';
}
