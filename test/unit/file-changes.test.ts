import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  asText,
  compareSnapshots,
  formatChanges,
  truncateText,
  unifiedDiff,
  type SnapshotEntry,
} from '../../src/policy/file-changes.js';

const file = (text: string | Uint8Array): SnapshotEntry => {
  const content = typeof text === 'string' ? new TextEncoder().encode(text) : text;
  return {
    kind: 'file',
    size: content.length,
    hash: createHash('sha256').update(content).digest('hex'),
    content,
  };
};
const shown = (rel: string): string => (rel ? `/workspace/${rel}` : '/workspace');

describe('compareSnapshots', () => {
  it('finds added, removed and changed entries, sorted, and ignores equal ones', () => {
    const before = new Map<string, SnapshotEntry>([
      ['', { kind: 'dir' }],
      ['same.txt', file('a\n')],
      ['gone.txt', file('x')],
      ['edit.txt', file('1\n')],
      ['link', { kind: 'symlink', target: 'same.txt' }],
    ]);
    const after = new Map<string, SnapshotEntry>([
      ['', { kind: 'dir' }],
      ['same.txt', file('a\n')],
      ['edit.txt', file('2\n')],
      ['new.txt', file('n')],
      ['link', { kind: 'symlink', target: '/etc/passwd' }],
    ]);
    assert.deepEqual(
      compareSnapshots(before, after).map((c) => [c.path, c.change]),
      [
        ['edit.txt', 'changed'],
        ['gone.txt', 'removed'],
        ['link', 'changed'],
        ['new.txt', 'added'],
      ],
    );
  });

  it('sees a file turned into a folder as changed', () => {
    const changes = compareSnapshots(new Map([['a', file('x')]]), new Map([['a', { kind: 'dir' }]]));
    assert.deepEqual(
      changes.map((c) => c.change),
      ['changed'],
    );
  });
});

describe('unifiedDiff', () => {
  it('gives diff -u hunks with three lines of context', () => {
    const numbers = Array.from({ length: 15 }, (_, i) => String(i + 1));
    const oldText = numbers.join('\n') + '\n';
    const newText = [...numbers.slice(0, 2), 'three', ...numbers.slice(3), '16'].join('\n') + '\n';
    assert.equal(
      unifiedDiff(oldText, newText, 'a/f', 'b/f'),
      [
        '--- a/f',
        '+++ b/f',
        '@@ -1,6 +1,6 @@',
        ' 1',
        ' 2',
        '-3',
        '+three',
        ' 4',
        ' 5',
        ' 6',
        '@@ -13,3 +13,4 @@',
        ' 13',
        ' 14',
        ' 15',
        '+16',
        '',
      ].join('\n'),
    );
  });

  it('joins changes closer than twice the context into one hunk', () => {
    const diff = unifiedDiff('a\nb\nc\nd\ne\n', 'A\nb\nc\nd\nE\n', 'a/f', 'b/f') ?? '';
    assert.equal(diff.match(/^@@/gm)?.length, 1, diff);
    assert.match(diff, /@@ -1,5 \+1,5 @@\n-a\n\+A\n b\n c\n d\n-e\n\+E/);
  });

  it('diffs a new file against nothing, and empty against empty', () => {
    assert.equal(unifiedDiff('', 'x\ny\n', '/dev/null', 'b/n'), '--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n+x\n+y\n');
    assert.equal(unifiedDiff('same\n', 'same\n', 'a', 'b'), '');
    assert.equal(unifiedDiff('x\n', '', 'a', 'b'), '--- a\n+++ b\n@@ -1,1 +0,0 @@\n-x\n');
  });

  it('marks a missing final newline', () => {
    assert.equal(
      unifiedDiff('a\nb', 'a\nb\n', 'a/f', 'b/f'),
      '--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n',
    );
  });

  it('finds a minimal script on interleaved edits', () => {
    const diff = unifiedDiff('a\nb\nc\na\nb\nb\na\n', 'c\nb\na\nb\na\nc\n', 'x', 'y') ?? '';
    const edits = diff.split('\n').filter((l) => /^[-+][^-+]/.test(l) || l === '-' || l === '+');
    assert.equal(edits.length, 5, diff);
  });

  it('refuses inputs beyond its limits', () => {
    const many = Array.from({ length: 100 }, (_, i) => `line ${i}`).join('\n');
    const other = Array.from({ length: 100 }, (_, i) => `other ${i}`).join('\n');
    assert.equal(unifiedDiff(many, other, 'a', 'b', { maxLines: 150 }), undefined);
    assert.equal(unifiedDiff(many, other, 'a', 'b', { maxEdits: 50 }), undefined);
    assert.ok(unifiedDiff(many, other, 'a', 'b'), 'within the default limits');
  });
});

describe('asText and formatChanges', () => {
  it('tells text from binary', () => {
    assert.equal(asText(new TextEncoder().encode('héllo')), 'héllo');
    assert.equal(asText(new Uint8Array([104, 0, 105])), undefined);
    assert.equal(asText(new Uint8Array([0xff, 0xfe, 0x41])), undefined);
  });

  it('shows added, removed, changed text as a diff, binary by size, large by hash', () => {
    const big = { kind: 'file', size: 999_999, hash: 'a'.repeat(64) } as const;
    const bigger = { kind: 'file', size: 1_000_000, hash: 'b'.repeat(64) } as const;
    const lines = formatChanges(
      [
        { path: 'new.txt', change: 'added', after: file('hello\n') },
        { path: 'old.txt', change: 'removed', before: file('bye') },
        { path: 'edit.txt', change: 'changed', before: file('one\n'), after: file('one\nnew line\n') },
        { path: 'img.bin', change: 'changed', before: file(new Uint8Array([0, 1])), after: file(new Uint8Array([0])) },
        { path: 'huge.log', change: 'changed', before: big, after: bigger },
        { path: 'sub', change: 'added', after: { kind: 'dir' } },
      ],
      shown,
    ).join('\n');
    assert.match(lines, /^added: \/workspace\/new\.txt \(6 bytes\)\n--- \/dev\/null\n\+\+\+ b\/workspace\/new\.txt/);
    assert.match(lines, /removed: \/workspace\/old\.txt \(3 bytes\)/);
    assert.match(
      lines,
      /changed: \/workspace\/edit\.txt\n--- a\/workspace\/edit\.txt\n\+\+\+ b\/workspace\/edit\.txt\n@@ -1,1 \+1,2 @@\n one\n\+new line/,
    );
    assert.match(lines, /changed: \/workspace\/img\.bin \(binary, 2 → 1 bytes\)/);
    assert.match(
      lines,
      /changed: \/workspace\/huge\.log \(too large to diff: 999999 → 1000000 bytes, sha256 aaaaaaaaaaaa → bbbbbbbbbbbb\)/,
    );
    assert.match(lines, /added: \/workspace\/sub \(directory\)/);
  });
});

describe('truncateText', () => {
  it('leaves short text alone and cuts long text at a line, saying so', () => {
    assert.equal(truncateText('short', 100), 'short');
    const long = Array.from({ length: 100 }, (_, i) => `line ${i}`).join('\n');
    const cut = truncateText(long, 200);
    assert.ok(cut.length < 300, `cut to about the limit: ${cut.length}`);
    assert.match(cut, /\n… \(preview truncated: \d+ more characters not shown\)$/);
    assert.ok(cut.startsWith('line 0\nline 1\n'), 'keeps the start');
  });
});
