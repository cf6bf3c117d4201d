import { spawn } from 'node:child_process';
import type { Variables } from '../../config/environment.js';
import type { Logger } from '../../util/logger.js';

/** Runs a build tool on the host; its output goes to the debug log, its last lines into the error. */
export function runTool(command: string, args: string[], cwd: string, log: Logger, env?: Variables): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const tail: string[] = [];
    const onData = (chunk: Buffer): void => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        tail.push(line);
        if (tail.length > 20) tail.shift();
        log.debug(line);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${command} exited with ${code}:\n${tail.join('\n')}`)),
    );
  });
}
