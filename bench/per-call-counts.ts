/**
 * What one tool call costs hintbox's own process, counted rather than timed (the figures do not
 * move with the machine's load): bytes allocated, promises and other async resources made,
 * `JSON.parse` / `JSON.stringify` calls, and (with `--strace`) system calls, per call.
 *
 *   node --import tsx bench/per-call-counts.ts                    # this checkout's dist/
 *   node --import tsx bench/per-call-counts.ts --repo /tmp/base   # another checkout's build
 *   … --calls 3000 --warmup 300 --in-flight 1,8,32 --strace --top 25 --json
 *   … --serve                                 # hintbox serve (a bearer token on each request), a lean node:http client
 *   … --serve --client sdk                    # … the SDK's streamable HTTP client instead
 *
 * The hintbox bin of `--repo` runs the cheap read tool of the filesystem server (as
 * `run-bench.ts` does: `list_allowed_directories`, trusted profile, audited) with
 * `count-hooks.ts` loaded (compiled beside its state); each window of calls is counted after `--warmup` calls.
 * `--top N` lists the N places in hintbox's sources (source maps of the bundle) that allocate
 * most, a library's or builtin's allocation charged to the hintbox code that called it.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync, chownSync } from 'node:fs';
import { SourceMap, type SourceMapPayload } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';
import { relocatedProfileText } from '../src/profile/relocate-profile.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LeanHttpClient } from './lean-http-client.js';
import { benchToken } from './serve-processes.js';
import { spawnServer } from './spawn-server.js';
import { toolArgs } from './tool-args.js';

const HOOKS = fileURLToPath(new URL('./count-hooks.ts', import.meta.url));
const { values } = toolArgs(
  'per-call-counts',
  "What one tool call costs hintbox's own process, counted: bytes allocated, promises, JSON calls, system calls (--strace).",
  {
    options: {
      repo: { type: 'string', default: fileURLToPath(new URL('../', import.meta.url)) },
      calls: { type: 'string', default: '3000' },
      warmup: { type: 'string', default: '300' },
      'in-flight': { type: 'string', default: '1,8,32' },
      strace: { type: 'boolean', default: false },
      top: { type: 'string', default: '0' },
      json: { type: 'boolean', default: false },
      serve: { type: 'boolean', default: false },
      client: { type: 'string', default: 'lean' },
    },
  },
);
if (values.client !== 'lean' && values.client !== 'sdk') {
  process.stderr.write(`per-call-counts: --client: expected lean or sdk, got '${values.client}'\n`);
  process.exit(2);
}
const repo = path.resolve(values.repo);
const calls = Number(values.calls);
const inFlight = values['in-flight'].split(',').map(Number);

/** The counted process and a client's call of the cheap read tool. */
interface Counted {
  call: () => Promise<unknown>;
  pid: number;
  close(): Promise<void>;
}

async function run(counted: Counted, n: number, concurrency: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < n) await counted.call();
    }),
  );
}

/** Sends `command` to the counted process and waits for its answer number `n`. */
async function command(out: string, pid: number, cmd: string, n: number): Promise<Record<string, unknown>> {
  writeFileSync(`${out}.cmd`, cmd);
  process.kill(pid, 'SIGUSR2');
  const file = `${out}.${n}.json`;
  for (let i = 0; i < 600 && !existsSync(file); i++) await new Promise((r) => setTimeout(r, 50));
  const answer = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  unlinkSync(file);
  return answer;
}

/** Syscalls of every thread of `pid` while `work` runs (strace -c). */
async function syscalls(pid: number, work: () => Promise<void>): Promise<Record<string, number>> {
  const out = path.join(os.tmpdir(), `hintbox-strace-${pid}`);
  const tids = execFileSync('ls', [`/proc/${pid}/task`], { encoding: 'utf8' })
    .trim()
    .split(/\s+/);
  const strace = spawn('strace', ['-c', '-o', out, ...tids.flatMap((t) => ['-p', t])], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 1000));
  await work();
  strace.kill('SIGINT');
  await new Promise((r) => strace.on('exit', r));
  const counts: Record<string, number> = {};
  for (const line of readFileSync(out, 'utf8').split('\n')) {
    const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$/.exec(line);
    if (m && m[2] !== 'total') counts[m[2]!] = Number(m[1]);
  }
  rmSync(out, { force: true });
  return counts;
}

/** `url|line|column|name` of the bundle as `src/file.ts:line name`, through its source map. */
const maps = new Map<string, SourceMap | undefined>();
function place(frame: string): string {
  const [url = '', line = '0', column = '0', name = ''] = frame.split('|');
  if (!url.startsWith('file://')) return `${name || '(anonymous)'} ${url || '(builtin)'}`;
  const file = fileURLToPath(url);
  if (!maps.has(file)) {
    maps.set(
      file,
      existsSync(file + '.map')
        ? new SourceMap(JSON.parse(readFileSync(file + '.map', 'utf8')) as SourceMapPayload)
        : undefined,
    );
  }
  const found = maps.get(file)?.findEntry(Number(line), Number(column));
  const entry = found && 'originalSource' in found ? found : undefined;
  if (!entry?.originalSource) return `${name} ${path.relative(repo, file)}:${Number(line) + 1}`;
  const source = entry.originalSource.replace(/^.*?\/(src|node_modules)\//, '$1/');
  return `${name || '(anonymous)'} ${source}:${(entry.originalLine ?? 0) + 1}`;
}

/**
 * `hintbox serve` of the profile's folder with a tokens file, counted, and one client over
 * streamable HTTP: the lean node:http one (one kept-alive socket: calls in flight queue on it)
 * or the SDK's (`--client sdk`).
 */
async function startServe(bin: string, profile: string, env: Record<string, string>): Promise<Counted> {
  const tokens = benchToken();
  const child = spawn(bin, ['serve', path.dirname(profile), '--port', '0', '--tokens', tokens.file], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...env, HINTBOX_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  let url: string | undefined;
  for (let i = 0; !url; i++) {
    const found = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr)?.[1];
    if (found && (await fetch(`${found}/readyz`).catch(() => undefined))?.status === 200) url = found;
    else if (child.exitCode !== null || i > 3000) throw new Error(`hintbox serve did not get ready:\n${stderr}`);
    else await new Promise((r) => setTimeout(r, 100));
  }
  const endpoint = `${url}/mcp/filesystem`;
  const stop = async () => {
    child.kill('SIGTERM');
    if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
    rmSync(tokens.folder, { recursive: true, force: true });
  };
  if (values.client === 'lean') {
    const lean = await LeanHttpClient.connect(endpoint, tokens.token);
    return {
      call: () => lean.callTool('list_allowed_directories', {}),
      pid: child.pid ?? -1,
      close: async () => {
        await lean.close();
        await stop();
      },
    };
  }
  const client = new Client({ name: 'hintbox-counts', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(endpoint), {
    requestInit: { headers: { Authorization: `Bearer ${tokens.token}` } },
  });
  await client.connect(transport);
  return {
    call: () => client.callTool({ name: 'list_allowed_directories', arguments: {} }),
    pid: child.pid ?? -1,
    close: async () => {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
      await stop();
    },
  };
}

async function main(): Promise<void> {
  const workspace = mkdtempSync(path.join(os.tmpdir(), 'hintbox-count-'));
  const state = mkdtempSync(path.join(os.tmpdir(), 'hintbox-count-state-'));
  const out = path.join(state, 'counts');
  const bin = path.join(repo, 'dist', 'hintbox.mjs');
  const profile = path.join(state, 'filesystem-trusted.yaml');
  const text = relocatedProfileText(path.join(repo, 'profiles/filesystem.yaml'));
  writeFileSync(profile, text.replace(/^trust: untrusted$/m, 'trust: trusted'));
  writeFileSync(path.join(workspace, 'file.txt'), 'counts\n');
  if (process.getuid?.() === 0) chownSync(workspace, 10001, 10001);
  const env = { WORKSPACE: workspace, HINTBOX_LOG_LEVEL: 'warn', HINTBOX_STATE_DIR: state };
  const approve = (yes: string[]) =>
    execFileSync(bin, ['approve', profile, '--all', ...yes], { env: { ...process.env, ...env }, stdio: 'ignore' });
  // Builds before `approve --yes` approve without asking when there is no terminal.
  try {
    approve(['--yes']);
  } catch {
    approve([]);
  }
  const hooks = path.join(state, 'count-hooks.mjs');
  buildSync({ entryPoints: [HOOKS], outfile: hooks, format: 'esm', platform: 'node', logLevel: 'error' });
  const counted = { ...env, HINTBOX_COUNT_OUT: out, NODE_OPTIONS: `--import=${hooks}` };
  const running: Counted = values.serve
    ? await startServe(bin, profile, counted)
    : await (async () => {
        const stdio = await spawnServer('/workspace', bin, ['run', profile], counted);
        const call = () => stdio.client.callTool({ name: 'list_allowed_directories', arguments: {} });
        return { call, pid: stdio.pid, close: () => stdio.close() };
      })();
  const rows: Record<string, unknown>[] = [];
  let answers = 0;
  try {
    await run(running, Number(values.warmup), 1);
    for (const c of inFlight) {
      await command(out, running.pid, 'heap', ++answers);
      await run(running, calls, c);
      const heap = (await command(out, running.pid, 'stop', ++answers)) as {
        bytes: number;
        own: Record<string, number>;
      };
      await command(out, running.pid, 'hooks', ++answers);
      await run(running, calls, c);
      const hooks = (await command(out, running.pid, 'stop', ++answers)) as {
        inits: Record<string, number>;
        json: Record<string, number>;
      };
      const perCall = (o: Record<string, number>) =>
        Object.fromEntries(Object.entries(o).map(([k, v]) => [k, Math.round((v / calls) * 100) / 100]));
      const sys = values.strace ? perCall(await syscalls(running.pid, () => run(running, calls, c))) : undefined;
      const top = Object.entries(heap.own)
        .map(([frame, bytes]) => [place(frame), bytes] as const)
        .reduce((m, [k, v]) => m.set(k, (m.get(k) ?? 0) + v), new Map<string, number>());
      rows.push({
        inFlight: c,
        bytesPerCall: Math.round(heap.bytes / calls),
        asyncPerCall: perCall(hooks.inits),
        jsonPerCall: perCall(hooks.json),
        ...(sys ? { syscallsPerCall: sys } : {}),
        top: [...top]
          .sort((a, b) => b[1] - a[1])
          .slice(0, Number(values.top))
          .map(
            ([k, v]) =>
              `${Math.round(v / calls)
                .toString()
                .padStart(6)} B  ${k}`,
          ),
      });
    }
  } finally {
    await running.close();
    rmSync(workspace, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
  }
  if (values.json) return void process.stdout.write(JSON.stringify(rows, null, 2) + '\n');
  for (const row of rows) {
    const { top, ...figures } = row as { top: string[] };
    process.stdout.write(`${JSON.stringify(figures)}\n${top.map((l) => `  ${l}\n`).join('')}`);
  }
}

await main();
