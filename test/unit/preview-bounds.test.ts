import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import type { FileChange, SnapshotEntry } from '../../src/policy/file-changes.js';
import { formatBounded } from '../../src/sandbox/preview.js';

const file = (text: string): SnapshotEntry => {
  const content = new TextEncoder().encode(text);
  return { kind: 'file', size: content.length, hash: createHash('sha256').update(content).digest('hex'), content };
};

/** Runs `work` while a 5 ms timer measures how late the event loop lets it fire. */
async function lagDuring<T>(work: () => Promise<T>): Promise<{ value: T; worstLagMs: number; tookMs: number }> {
  let worstLagMs = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    worstLagMs = Math.max(worstLagMs, now - last - 5);
    last = now;
  }, 5);
  const started = performance.now();
  try {
    const value = await work();
    return { value, worstLagMs, tookMs: performance.now() - started };
  } finally {
    clearInterval(timer);
  }
}

const target = { target: '/workspace' };

describe('the bounded diff of a preview', () => {
  // proves: PREVIEW-BOUNDED
  it('formats 2000 added files of 2000 lines within its limits, without stalling the event loop, and says it was cut', async () => {
    const text = Array.from({ length: 2000 }, (_, i) => `line ${i}`).join('\n') + '\n';
    const entry = file(text);
    const changes: FileChange[] = Array.from({ length: 2000 }, (_, i) => ({
      path: `out/f${String(i).padStart(5, '0')}.txt`,
      change: 'added',
      after: entry,
    }));
    const { value, worstLagMs, tookMs } = await lagDuring(() =>
      formatBounded([{ mount: target, changes }], { maxChars: 4000, diffTimeMs: 2000 }),
    );
    assert.ok(tookMs < 1000, `took ${Math.round(tookMs)} ms`);
    assert.ok(worstLagMs < 100, `the event loop stalled ${Math.round(worstLagMs)} ms`);
    assert.match(value.lines[0]!, /^added: \/workspace\/out\/f00000\.txt/);
    assert.match(value.cut ?? '', /the preview was cut: \d+ of 2000 changed entries are not shown/);
  });

  // proves: PREVIEW-BOUNDED
  it('stops diffs that take long (many changed files) when its time is up, in slices the event loop runs between', async () => {
    // Every line differs: each diff searches up to its edit limit and then gives up, showing one line.
    const old = Array.from({ length: 6000 }, (_, i) => `old ${i}`).join('\n');
    const now = Array.from({ length: 6000 }, (_, i) => `new ${i}`).join('\n');
    const changes: FileChange[] = Array.from({ length: 400 }, (_, i) => ({
      path: `f${i}.txt`,
      change: 'changed',
      before: file(`${old}\n${i}`),
      after: file(`${now}\n${i}`),
    }));
    const { value, worstLagMs, tookMs } = await lagDuring(() =>
      formatBounded([{ mount: target, changes }], { maxChars: 1_000_000, diffTimeMs: 500 }),
    );
    assert.ok(tookMs < 1500, `took ${Math.round(tookMs)} ms for a 500 ms budget`);
    assert.ok(worstLagMs < 150, `the event loop stalled ${Math.round(worstLagMs)} ms`);
    assert.match(
      value.cut ?? '',
      /the preview was cut: \d+ of 400 changed entries are not shown, as the diff work stopped after 0.5 s/,
    );
  });

  it('shows everything, uncut, when it fits', async () => {
    const value = await formatBounded(
      [{ mount: target, changes: [{ path: 'a.txt', change: 'added', after: file('x\n') }] }],
      {
        maxChars: 4000,
        diffTimeMs: 2000,
      },
    );
    assert.equal(value.cut, undefined);
    assert.deepEqual(value.lines, [
      'added: /workspace/a.txt (2 bytes)',
      '--- /dev/null\n+++ b/workspace/a.txt\n@@ -0,0 +1,1 @@\n+x',
    ]);
  });
});
