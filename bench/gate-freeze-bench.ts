/**
 * The gate's freeze alone: how long a stop ('S' to its answer) and a continue ('C' to its answer)
 * take, for one or more builds of native/hintbox-gate.c side by side, over a Node process with its
 * usual threads (libuv's pool, V8's workers). No Docker: each gate runs as PID 1 of a PID
 * namespace of its own (`unshare --pid --fork --mount-proc`, so root), and the blocks of cycles
 * are interleaved gate by gate, so that the ratio is taken under the same load.
 *
 *   node --import tsx bench/gate-freeze-bench.ts [--cycles N] [--rounds N] GATE [GATE...]
 *
 * Each cycle: 'S' and its answer, 'C' and its answer, then 2 ms of the server running (a call).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { percentile } from './stats.js';
import { toolArgs } from './tool-args.js';

interface Gate {
  binary: string;
  child: ChildProcess;
  control: net.Socket;
  stdio: net.Socket;
  answers: string[];
  waiting?: () => void;
  stop: number[];
  cont: number[];
}

const SERVER = "setInterval(() => {}, 1 << 30); require('node:fs').readFile('/proc/self/stat', () => {});";

async function startGate(binary: string, dir: string, n: number): Promise<Gate> {
  const socketPath = path.join(dir, `gate-${n}.sock`);
  const token = randomBytes(16).toString('hex');
  const accepted: net.Socket[] = [];
  const server = net.createServer((s) => accepted.push(s));
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  const child = spawn('unshare', ['--pid', '--fork', '--mount-proc', '--', binary, process.execPath, '-e', SERVER], {
    env: {
      PATH: process.env.PATH ?? '',
      HINTBOX_GATE_SOCKET: socketPath,
      HINTBOX_GATE_TOKEN: token,
      GLIBC_TUNABLES: '',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (let i = 0; accepted.length < 2; i++) {
    if (i > 500) throw new Error(`${binary}: the gate did not connect`);
    await new Promise((r) => setTimeout(r, 10));
  }
  server.close();
  // The gate connects the server's connection first, then its control connection.
  const [stdio, control] = accepted as [net.Socket, net.Socket];
  const gate: Gate = { binary, child, control, stdio, answers: [], stop: [], cont: [] };
  let greeted = false; // the token line comes first
  control.on('data', (b: Buffer) => {
    let text = b.toString('latin1');
    if (!greeted && text.includes('\n')) [greeted, text] = [true, text.slice(text.indexOf('\n') + 1)];
    if (!greeted) return;
    gate.answers.push(...text);
    if (gate.answers.length) gate.waiting?.();
  });
  stdio.on('data', () => undefined);
  stdio.write('G');
  await new Promise((r) => setTimeout(r, 1000)); // node up, its threads started
  return gate;
}

function command(gate: Gate, c: 'S' | 'C'): Promise<number> {
  const start = performance.now();
  return new Promise((resolve, reject) => {
    gate.waiting = () => {
      const answer = gate.answers.shift();
      gate.waiting = undefined;
      if (answer === c) resolve(performance.now() - start);
      else reject(new Error(`${gate.binary} answered ${answer} to ${c}`));
    };
    gate.control.write(c);
  });
}

async function main(): Promise<void> {
  const { values, positionals } = toolArgs(
    'gate-freeze-bench',
    "The gate's freeze alone: a stop and a continue, for one or more builds of the gate side by side (root: unshare).",
    {
      allowPositionals: true,
      options: { cycles: { type: 'string', default: '200' }, rounds: { type: 'string', default: '5' } },
    },
  );
  if (positionals.length === 0) throw new Error('usage: gate-freeze-bench.ts [--cycles N] [--rounds N] GATE [GATE...]');
  if (process.getuid?.() !== 0) throw new Error('needs root (unshare --pid --mount-proc)');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hintbox-gate-bench-'));
  const gates: Gate[] = [];
  try {
    for (const [i, binary] of positionals.entries()) gates.push(await startGate(path.resolve(binary), dir, i));
    const cycles = Number(values.cycles);
    for (let round = 0; round < Number(values.rounds); round++) {
      for (const gate of gates) {
        for (let i = 0; i < cycles; i++) {
          gate.stop.push(await command(gate, 'S'));
          gate.cont.push(await command(gate, 'C'));
          await new Promise((r) => setTimeout(r, 2));
        }
      }
    }
    const ms = (v: number) => v.toFixed(3);
    console.log(
      `load ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}; ${cycles} × ${values.rounds} cycles each`,
    );
    console.log('gate | S p50 | S p90 | C p50 | C p90 (ms)');
    for (const g of gates) {
      console.log(
        `${g.binary} | ${ms(percentile(g.stop, 50))} | ${ms(percentile(g.stop, 90))} | ${ms(percentile(g.cont, 50))} | ${ms(percentile(g.cont, 90))}`,
      );
    }
  } finally {
    for (const g of gates) {
      g.control.destroy(); // the gate kills its namespace and exits
      g.stdio.destroy();
    }
    await new Promise((r) => setTimeout(r, 200));
    for (const g of gates) g.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: Error) => {
  console.error(error.message);
  process.exit(1);
});
