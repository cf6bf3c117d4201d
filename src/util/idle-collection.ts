import v8 from 'node:v8';

/**
 * One full garbage collection when a process that serves bursts of calls has gone quiet.
 *
 * A burst of calls (an agent's turn) promotes the short-lived objects of calls in flight into
 * V8's old space, where they stay as garbage until the next full collection: `hintbox run`'s
 * resident memory read after the bench's load swung between 63.6 and 68.5 MB with where the load
 * ended in V8's collection cycle, and V8's own memory reducer gives it back only ~8 s after (58
 * MB at rest; docs/benchmarks.md, session 24). Collected once the client has sent nothing for
 * `quietMs`, the process is at rest within about twice that.
 *
 * Cheap while busy: a call only counts; one timer runs while messages come, none at rest, and
 * the collection runs once per quiet spell, never while calls keep coming. A call that outlasts
 * the quiet spell (its client sends nothing meanwhile) may see it: ~20 ms of the main thread, as
 * the heap is small then ({@link LARGEST_COLLECTED_HEAP}).
 */
export class IdleCollection {
  /** Activity seen so far, and at the timer's arming. */
  private seen = 0;
  private seenAtArming = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly collect: () => void,
    private readonly quietMs: number,
  ) {}

  /** Notes a message from the client. */
  activity(): void {
    this.seen++;
    if (this.timer === undefined && !this.stopped) this.arm();
  }

  /** No collection after this (the process is ending). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(): void {
    this.seenAtArming = this.seen;
    this.timer = setTimeout(() => this.check(), this.quietMs);
    // Never what keeps the process alive.
    this.timer.unref();
  }

  private check(): void {
    this.timer = undefined;
    if (this.seen !== this.seenAtArming) return this.arm();
    this.collect();
  }
}

/** How long the client is quiet before the collection. */
export const QUIET_MS = 1000;

/**
 * Above this much heap in use, no idle collection: a large message is being handled (a 64 MB
 * line parses to up to ~1.4 GB), and a full collection of that, all on the main thread, would
 * pause the process for up to a second; V8's own collector deals with it.
 */
export const LARGEST_COLLECTED_HEAP = 64 * 1024 * 1024;

/** What a collection needs of V8 (injected in tests). */
export interface Collector {
  gc: () => void;
  setFlags: (flags: string) => void;
  heapUsed: () => number;
}

/**
 * One compacting full collection: a plain one frees the garbage but keeps every page that still
 * holds a live object, so nothing goes back to the system (measured: heap in use 19 → 12 MB,
 * resident memory unchanged). Compaction moves the live objects together and empties those
 * pages; it is switched on for this collection alone.
 */
export function collectCompacting({ gc, setFlags, heapUsed }: Collector): void {
  if (heapUsed() > LARGEST_COLLECTED_HEAP) return;
  setFlags('--compact-on-every-full-gc');
  try {
    gc();
  } finally {
    setFlags('--no-compact-on-every-full-gc');
  }
}

/**
 * The idle collection of this process, or undefined when V8's `gc` is not exposed (the bin's
 * `--expose-gc`; `node dist/hintbox.mjs` without it runs as before, V8 alone collecting).
 */
export function idleCollection(quietMs = QUIET_MS): IdleCollection | undefined {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (typeof gc !== 'function') return undefined;
  const collector: Collector = {
    gc,
    setFlags: (flags) => v8.setFlagsFromString(flags),
    heapUsed: () => v8.getHeapStatistics().used_heap_size,
  };
  return new IdleCollection(() => collectCompacting(collector), quietMs);
}
