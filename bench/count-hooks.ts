/**
 * Loaded into the measured hintbox process by `per-call-counts.ts` (compiled to a module beside
 * its state, then `NODE_OPTIONS=--import …`): counts what one window of calls cost the process, in units that do not
 * depend on the machine's load. The driver writes a command to `$HINTBOX_COUNT_OUT.cmd` and sends
 * SIGUSR2; the answer is written to `$HINTBOX_COUNT_OUT.<n>.json`.
 *
 * - `heap`: V8's sampling heap profiler (objects already collected included): bytes allocated,
 *   and by function (name and place in the bundle);
 * - `hooks`: `async_hooks` inits by type (PROMISE, TickObject, …) and `JSON.parse` /
 *   `JSON.stringify` calls. Kept apart from `heap`: promise hooks change what promises allocate.
 *
 * `stop` ends the window started last and writes its counts.
 */
import { createHook, type AsyncHook } from 'node:async_hooks';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

interface HeapWindow {
  mode: 'heap';
  session: Session;
}
interface HooksWindow {
  mode: 'hooks';
  inits: Record<string, number>;
  json: { parse: number; stringify: number };
  restore(): void;
  hook: AsyncHook;
}
interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

const out = process.env.HINTBOX_COUNT_OUT;
let window: HeapWindow | HooksWindow | undefined;
let answers = 0;

if (out) {
  process.on('SIGUSR2', () => {
    const command = readFileSync(`${out}.cmd`, 'utf8').trim();
    if (command === 'stop') return finish();
    if (command === 'heap') return startHeap();
    if (command === 'hooks') return startHooks();
  });
}

function write(result: unknown): void {
  // Written whole, then named: the driver reads it as soon as the name is there.
  const file = `${out}.${++answers}.json`;
  writeFileSync(`${file}.part`, JSON.stringify(result));
  renameSync(`${file}.part`, file);
}

function startHeap(): void {
  const session = new Session();
  session.connect();
  session.post('HeapProfiler.enable');
  session.post('HeapProfiler.startSampling', {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  window = { mode: 'heap', session };
  write({ started: 'heap' });
}

function startHooks(): void {
  const inits: Record<string, number> = {};
  const json = { parse: 0, stringify: 0 };
  const { parse, stringify } = JSON;
  JSON.parse = (...args: Parameters<typeof parse>): unknown => {
    json.parse++;
    return parse(...args);
  };
  JSON.stringify = ((value: unknown, replacer?: (string | number)[] | null, space?: string | number) => {
    json.stringify++;
    return stringify(value, replacer, space);
  }) as typeof JSON.stringify;
  const hook = createHook({
    init(_id, type) {
      inits[type] = (inits[type] ?? 0) + 1;
    },
  }).enable();
  window = { mode: 'hooks', inits, json, restore: () => Object.assign(JSON, { parse, stringify }), hook };
  write({ started: 'hooks' });
}

function finish(): void {
  const w = window;
  window = undefined;
  if (!w) return write({ error: 'no window' });
  if (w.mode === 'hooks') {
    w.hook.disable();
    w.restore();
    return write({ mode: 'hooks', inits: w.inits, json: w.json });
  }
  w.session.post('HeapProfiler.stopSampling', (error, result) => {
    w.session.disconnect();
    if (error) return write({ error: error.message });
    const profile = result.profile as unknown as { head: ProfileNode };
    // Self size by frame, and by the nearest frame of hintbox's own files above it (a builtin's
    // or a library's allocation is charged to the hintbox code that called it too).
    const byFrame: Record<string, number> = {};
    const own: Record<string, number> = {};
    let bytes = 0;
    const visit = (node: ProfileNode, owner: string | undefined): void => {
      const { functionName, url, lineNumber, columnNumber } = node.callFrame;
      const here = `${url}|${lineNumber}|${columnNumber}|${functionName}`;
      const mine = url.includes('/dist/') ? here : owner;
      bytes += node.selfSize;
      if (node.selfSize > 0) {
        byFrame[here] = (byFrame[here] ?? 0) + node.selfSize;
        if (mine) own[mine] = (own[mine] ?? 0) + node.selfSize;
      }
      for (const child of node.children) visit(child, mine);
    };
    visit(profile.head, undefined);
    write({ mode: 'heap', bytes, byFrame, own });
  });
}
