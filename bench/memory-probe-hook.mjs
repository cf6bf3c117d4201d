// Preloaded into a measured process by bench/memory-breakdown.ts (NODE_OPTIONS=--import …): on
// SIGUSR2 it writes what V8 and Node say of the process's memory to $HINTBOX_MEMORY_PROBE_OUT,
// and a heap snapshot beside it when $HINTBOX_MEMORY_PROBE_SNAPSHOT names a file. With
// $HINTBOX_MEMORY_PROBE_LIVE=1 it then collects all garbage and adds the live heap (which
// changes what a later reading sees). Not part of hintbox; its own cost (one small module, a
// signal handler) is in every variant alike.
import { renameSync, writeFileSync } from 'node:fs';
import process from 'node:process';
import v8 from 'node:v8';
import vm from 'node:vm';

const out = process.env.HINTBOX_MEMORY_PROBE_OUT;
const snapshot = process.env.HINTBOX_MEMORY_PROBE_SNAPSHOT;
const live = process.env.HINTBOX_MEMORY_PROBE_LIVE === '1';
// The hook is for the process measured, not for what it starts.
delete process.env.NODE_OPTIONS;
if (live) v8.setFlagsFromString('--expose-gc');
const gc = live ? vm.runInNewContext('gc') : undefined;
if (out) {
  process.on('SIGUSR2', () => {
    if (snapshot) v8.writeHeapSnapshot(snapshot);
    const stats = {
      memoryUsage: process.memoryUsage(),
      heap: v8.getHeapStatistics(),
      spaces: v8.getHeapSpaceStatistics(),
      code: v8.getHeapCodeStatistics(),
      // Node's own modules (NativeModule …) and bindings the process has loaded.
      builtins: process.moduleLoadList,
    };
    if (gc) {
      gc();
      stats.liveHeap = v8.getHeapStatistics().used_heap_size;
    }
    // Whole or not at all: the reader waits for the name.
    writeFileSync(`${out}.tmp`, JSON.stringify(stats));
    renameSync(`${out}.tmp`, out);
  });
}
