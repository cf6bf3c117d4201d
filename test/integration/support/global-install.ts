import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { PassThrough } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema, type ElicitRequest } from '@modelcontextprotocol/sdk/types.js';
import { ownHintboxProcess, REPO } from './docker.js';
import { scratchFolder } from '../../support/scratch-folder.js';

const run = promisify(execFile);

/**
 * hintbox as a user installs it: the repository packed (the tarball `npm publish` would upload;
 * dist/ is built already) and installed globally into a prefix of its own. Returns the bin.
 */
export async function installGlobally(): Promise<string> {
  const packed = scratchFolder('hintbox-pack-');
  await run('npm', ['pack', '--ignore-scripts', '--pack-destination', packed], { cwd: REPO });
  const tarball = path.join(packed, readdirSync(packed).find((f) => f.endsWith('.tgz')) ?? 'none.tgz');
  const prefix = scratchFolder('hintbox-global-');
  await run(
    'npm',
    ['install', '--global', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', tarball],
    { cwd: packed },
  );
  return path.join(prefix, 'bin', 'hintbox');
}

/** A client's server entry: what `hintbox install` prints under the server's name. */
export interface EntryAsPrinted {
  command: string;
  args: string[];
  env?: Record<string, string>;
}

/**
 * An MCP client that starts `entry` as a client does: in `cwd`, with the SDK's default
 * environment (HOME, PATH, USER, …) plus the entry's env and nothing else, confirming every call
 * it is asked about. Close it with `await using`.
 */
export async function clientOfEntry(
  entry: EntryAsPrinted,
  cwd: string,
  /** false: a client that can be asked nothing (no elicitation), as Inspector's CLI or a script. */
  elicitation = true,
): Promise<AsyncDisposable & { client: Client; asked: ElicitRequest['params'][]; stderr(): string }> {
  const transport = new StdioClientTransport({ ...entry, cwd, stderr: 'pipe' });
  let stderr = '';
  (transport.stderr as PassThrough | null)?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const asked: ElicitRequest['params'][] = [];
  const client = new Client(
    { name: 'hintbox-test', version: '1.0.0' },
    { capabilities: elicitation ? { elicitation: {} } : {} },
  );
  if (elicitation) {
    client.setRequestHandler(ElicitRequestSchema, (request) => {
      asked.push(request.params);
      return { action: 'accept', content: { approve: true } };
    });
  }
  await client.connect(transport).catch((error: Error) => {
    throw new Error(`${error.message}\n${stderr}`);
  });
  const pid = transport.pid ?? undefined;
  ownHintboxProcess(pid);
  return {
    client,
    asked,
    stderr: () => stderr,
    [Symbol.asyncDispose]: async () => {
      await client.close();
      // hintbox removes its sandboxes before it exits: wait for that, as a client that quits does not.
      for (let waited = 0; pid !== undefined && waited < 15_000 && isAlive(pid); waited += 100) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
  };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
