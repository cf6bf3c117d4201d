/**
 * What a Node process between the client and the server costs by itself, without hintbox: the
 * bench's bare filesystem server (its host copy, `npm run bench` makes it), called as the bench
 * calls it (`list_allowed_directories`, 1 in flight), directly and through three relays, round
 * by round (p50 in ms):
 *
 *   raw    the bytes passed on as they come;
 *   parse  each line parsed and written again, the writes of a turn together (`setImmediate`);
 *   audit  as parse, and one `writeSync` of a small line per message to a file (as the audit).
 *
 *   node --import tsx bench/relay-probe.ts [rounds]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { spawnServer } from './spawn-server.js';
import { percentile } from './stats.js';

const SERVER = fileURLToPath(
  new URL(
    '../.hintbox/bench/server-filesystem/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js',
    import.meta.url,
  ),
);

/** This process as a relay: `mode`, the server's folder. */
function relay(mode: string, dir: string, audit: string): void {
  const child = spawn(process.execPath, [SERVER, dir], { stdio: ['pipe', 'pipe', 'inherit'] });
  const fd = mode === 'audit' ? openSync(audit, 'a') : -1;
  const pass = (input: Readable, output: Writable): void => {
    if (mode === 'raw') {
      input.on('data', (chunk: Buffer) => output.write(chunk));
      return;
    }
    let rest = '';
    input.on('data', (chunk: Buffer) => {
      const lines = (rest + chunk.toString('utf8')).split('\n');
      rest = lines.pop() ?? '';
      let out = '';
      for (const line of lines) {
        const message = JSON.parse(line) as { id?: unknown };
        if (fd >= 0) writeSync(fd, JSON.stringify({ time: Date.now(), id: message.id ?? null }) + '\n');
        out += JSON.stringify(message) + '\n';
      }
      if (out) setImmediate(() => output.write(out));
    });
  };
  pass(process.stdin, child.stdin);
  pass(child.stdout, process.stdout);
  process.stdin.on('end', () => child.kill());
}

async function main(rounds: number): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hintbox-relay-probe-'));
  const self = fileURLToPath(import.meta.url);
  const through = (mode: string): [string, string[]] => [
    process.execPath,
    ['--import', 'tsx', self, '--relay', mode, dir, path.join(dir, 'audit.log')],
  ];
  const variants: [string, [string, string[]]][] = [
    ['bare', [process.execPath, [SERVER, dir]]],
    ['raw', through('raw')],
    ['parse', through('parse')],
    ['audit', through('audit')],
  ];
  try {
    for (let round = 1; round <= rounds; round++) {
      const p50s: string[] = [];
      for (const [name, [command, args]] of variants) {
        const running = await spawnServer(dir, command, args);
        const call = () => running.client.callTool({ name: 'list_allowed_directories', arguments: {} });
        for (let i = 0; i < 300; i++) await call();
        const samples: number[] = [];
        for (let i = 0; i < 1000; i++) {
          const t = performance.now();
          await call();
          samples.push(performance.now() - t);
        }
        await running.close();
        p50s.push(`${name} ${percentile(samples, 50).toFixed(3)}`);
      }
      process.stdout.write(`round ${round} (load ${os.loadavg()[0]!.toFixed(1)}): p50 ms ${p50s.join(', ')}\n`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--relay') relay(process.argv[3] ?? 'raw', process.argv[4] ?? '.', process.argv[5] ?? '');
else await main(Number(process.argv[2] ?? 4));
