/**
 * Pure parts of a call's preview: compare two snapshots of a folder (what a dry run added,
 * removed and changed), a line-based unified diff of changed text files (Myers, bounded), and
 * the text shown in a confirmation (bounded, saying when it is cut).
 */

/** One entry of a snapshot, keyed by its path relative to the snapshot's root ('' is the root). */
export type SnapshotEntry =
  | {
      kind: 'file';
      size: number;
      /** SHA-256 of the content, hex. */
      hash: string;
      /** The content, when small enough to diff. */
      content?: Uint8Array;
    }
  | { kind: 'dir' }
  | { kind: 'symlink'; target: string }
  | { kind: 'other' };

export type Snapshot = ReadonlyMap<string, SnapshotEntry>;

export interface FileChange {
  path: string;
  change: 'added' | 'removed' | 'changed';
  before?: SnapshotEntry;
  after?: SnapshotEntry;
}

/** What differs between two snapshots, sorted by path. A directory's own metadata is ignored. */
export function compareSnapshots(before: Snapshot, after: Snapshot): FileChange[] {
  const changes: FileChange[] = [];
  for (const [path, entry] of before) {
    const now = after.get(path);
    if (!now) changes.push({ path, change: 'removed', before: entry });
    else if (!sameEntry(entry, now)) changes.push({ path, change: 'changed', before: entry, after: now });
  }
  for (const [path, entry] of after) {
    if (!before.has(path)) changes.push({ path, change: 'added', after: entry });
  }
  return changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

function sameEntry(a: SnapshotEntry, b: SnapshotEntry): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind === 'file' && b.kind === 'file') return a.size === b.size && a.hash === b.hash;
  if (a.kind === 'symlink' && b.kind === 'symlink') return a.target === b.target;
  return true;
}

/** The content as text, or undefined when it is binary (a NUL byte, or not UTF-8). */
export function asText(content: Uint8Array): string | undefined {
  if (content.includes(0)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(content);
  } catch {
    return undefined;
  }
}

export interface DiffLimits {
  /** Lines of context around a change (3, as diff -u). */
  context?: number;
  /** Refuse inputs with more lines than this, together (the diff would be too large to show anyway). */
  maxLines?: number;
  /** Refuse when more than this many lines differ (bounds Myers' time and memory). */
  maxEdits?: number;
  /** Give up (as when too large) once this returns true; asked every few steps of the diff. */
  expired?: () => boolean;
}

type Op = { kind: ' ' | '-' | '+'; line: string };

/** Splits keeping each line's terminator, so a missing final newline is a difference, as in diff. */
function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n').map((l) => `${l}\n`);
  const last = lines.length - 1;
  lines[last] = (lines[last] as string).slice(0, -1);
  if (lines[last] === '') lines.pop();
  return lines;
}

/** Myers' O(ND) shortest edit script over lines; undefined beyond maxEdits or once `expired`. */
function editScript(
  a: readonly string[],
  b: readonly string[],
  maxEdits: number,
  expired: () => boolean = () => false,
): Op[] | undefined {
  // Common prefix and suffix first: most edits touch a small middle.
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const x0 = a.slice(start, endA);
  const y0 = b.slice(start, endB);
  const n = x0.length;
  const m = y0.length;
  const around = (middle: Op[]): Op[] => [
    ...a.slice(0, start).map((line): Op => ({ kind: ' ', line })),
    ...middle,
    ...a.slice(endA).map((line): Op => ({ kind: ' ', line })),
  ];
  // Only added or only removed lines (a new file, say): the script is plain, no search needed.
  if (n === 0 || m === 0) {
    if (n + m > maxEdits) return undefined;
    return around([...x0.map((line): Op => ({ kind: '-', line })), ...y0.map((line): Op => ({ kind: '+', line }))]);
  }
  const max = Math.min(n + m, maxEdits);
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  let found = n + m === 0 ? 0 : -1;
  for (let d = 0; d <= max && found < 0; d++) {
    if (d % 32 === 31 && expired()) return undefined;
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let x =
        k === -d || (k !== d && (v[offset + k - 1] as number) < (v[offset + k + 1] as number))
          ? (v[offset + k + 1] as number)
          : (v[offset + k - 1] as number) + 1;
      let y = x - k;
      while (x < n && y < m && x0[x] === y0[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
  }
  if (found < 0) return undefined;
  // Walk back through the trace.
  const middle: Op[] = [];
  let x = n;
  let y = m;
  for (let d = found; d > 0; d--) {
    const vd = trace[d] as Int32Array;
    const k = x - y;
    const prevK =
      k === -d || (k !== d && (vd[offset + k - 1] as number) < (vd[offset + k + 1] as number)) ? k + 1 : k - 1;
    const prevX = vd[offset + prevK] as number;
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      x--;
      middle.push({ kind: ' ', line: y0[--y] as string });
    }
    if (x === prevX) middle.push({ kind: '+', line: y0[--y] as string });
    else middle.push({ kind: '-', line: x0[--x] as string });
  }
  while (x > 0 && y > 0) {
    x--;
    middle.push({ kind: ' ', line: y0[--y] as string });
  }
  middle.reverse();
  return around(middle);
}

/**
 * A unified diff (as `diff -u`) of two texts, or undefined when the inputs are larger than the
 * limits allow. Equal texts give ''.
 */
export function unifiedDiff(
  oldText: string,
  newText: string,
  oldName: string,
  newName: string,
  limits: DiffLimits = {},
): string | undefined {
  const context = limits.context ?? 3;
  const a = splitLines(oldText);
  const b = splitLines(newText);
  if (a.length + b.length > (limits.maxLines ?? 20_000)) return undefined;
  const ops = editScript(a, b, limits.maxEdits ?? 2_000, limits.expired);
  if (!ops) return undefined;
  if (!ops.some((op) => op.kind !== ' ')) return '';

  const out = [`--- ${oldName}`, `+++ ${newName}`];
  // Positions (0-based) in a and b of each op.
  const posA: number[] = [];
  const posB: number[] = [];
  let ia = 0;
  let ib = 0;
  for (const op of ops) {
    posA.push(ia);
    posB.push(ib);
    if (op.kind !== '+') ia++;
    if (op.kind !== '-') ib++;
  }
  let i = 0;
  while (i < ops.length) {
    // Next change.
    while (i < ops.length && (ops[i] as Op).kind === ' ') i++;
    if (i >= ops.length) break;
    const first = Math.max(0, i - context);
    let last = i;
    // Extend while the next change is within 2 * context of the last one.
    let j = i;
    while (j < ops.length) {
      if ((ops[j] as Op).kind !== ' ') {
        last = j;
        j++;
        continue;
      }
      let run = j;
      while (run < ops.length && (ops[run] as Op).kind === ' ') run++;
      if (run < ops.length && run - j <= 2 * context) {
        j = run;
        continue;
      }
      break;
    }
    const end = Math.min(ops.length, last + 1 + context);
    const hunk = ops.slice(first, end);
    const countA = hunk.filter((op) => op.kind !== '+').length;
    const countB = hunk.filter((op) => op.kind !== '-').length;
    const startA = countA === 0 ? posA[first] : (posA[first] as number) + 1;
    const startB = countB === 0 ? posB[first] : (posB[first] as number) + 1;
    out.push(`@@ -${startA},${countA} +${startB},${countB} @@`);
    for (const op of hunk) {
      if (op.line.endsWith('\n')) out.push(`${op.kind}${op.line.slice(0, -1)}`);
      else out.push(`${op.kind}${op.line}`, '\\ No newline at end of file');
    }
    i = end;
  }
  return `${out.join('\n')}\n`;
}

/** Cuts text to at most max characters, saying how much was left out. */
export function truncateText(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = text.lastIndexOf('\n', max);
  const at = cut > max / 2 ? cut : max;
  return `${text.slice(0, at)}\n… (preview truncated: ${text.length - at} more characters not shown)`;
}

function describeEntry(entry: SnapshotEntry): string {
  switch (entry.kind) {
    case 'file':
      return `${entry.size} bytes`;
    case 'dir':
      return 'directory';
    case 'symlink':
      return `symlink → ${entry.target}`;
    default:
      return 'special file';
  }
}

/** Where a stepwise formatting of changes stands (see `formatChangeSteps`). */
export interface FormattedChanges {
  lines: string[];
  /** Characters in `lines` so far (newlines included). */
  chars: number;
  /** Changes formatted so far, of `total`. */
  done: number;
  total: number;
}

/**
 * The changes as a person reads them: one line per added or removed entry, and for each changed
 * file a unified diff (text), "binary, N → M bytes", or a size and hash summary when too large.
 * `shown(path)` gives the path as the tool sees it (e.g. under the mount's target).
 *
 * Stepwise, so that the caller bounds the work: it yields after each change (the caller may
 * stop there: `out` holds what is done), and stops by itself once `out` holds `maxChars`
 * characters — nothing more could be shown. `expired` also cuts a diff under way. Pure.
 */
export function* formatChangeSteps(
  changes: readonly FileChange[],
  shown: (path: string) => string,
  out: FormattedChanges,
  budget: { maxChars: number; expired?: () => boolean } = { maxChars: Infinity },
): Generator<void, void, void> {
  out.total += changes.length;
  const push = (...lines: string[]): void => {
    for (const line of lines) {
      out.lines.push(line);
      out.chars += line.length + 1;
    }
  };
  const limits: DiffLimits = budget.expired ? { expired: budget.expired } : {};
  for (const change of changes) {
    if (out.chars >= budget.maxChars) return;
    formatChange(change, shown, push, limits);
    out.done++;
    yield;
  }
}

/** All the changes, formatted (no bound but the diff's own limits). Pure. */
export function formatChanges(changes: readonly FileChange[], shown: (path: string) => string): string[] {
  const out: FormattedChanges = { lines: [], chars: 0, done: 0, total: 0 };
  const steps = formatChangeSteps(changes, shown, out);
  while (!steps.next().done);
  return out.lines;
}

function formatChange(
  change: FileChange,
  shown: (path: string) => string,
  push: (...lines: string[]) => void,
  limits: DiffLimits,
): void {
  const name = shown(change.path);
  if (change.change === 'added' && change.after) {
    push(`added: ${name} (${describeEntry(change.after)})`);
    const text = change.after.kind === 'file' && change.after.content ? asText(change.after.content) : undefined;
    if (text !== undefined && text !== '') {
      const diff = unifiedDiff('', text, '/dev/null', `b${name}`, limits);
      if (diff) push(diff.trimEnd());
    }
  } else if (change.change === 'removed' && change.before) {
    push(`removed: ${name} (${describeEntry(change.before)})`);
  } else if (change.before && change.after) {
    const { before, after } = change;
    if (before.kind !== 'file' || after.kind !== 'file') {
      push(`changed: ${name} (${describeEntry(before)} → ${describeEntry(after)})`);
      return;
    }
    const oldText = before.content ? asText(before.content) : undefined;
    const newText = after.content ? asText(after.content) : undefined;
    if (before.content && after.content && (oldText === undefined || newText === undefined)) {
      push(`changed: ${name} (binary, ${before.size} → ${after.size} bytes)`);
      return;
    }
    const diff =
      oldText !== undefined && newText !== undefined
        ? unifiedDiff(oldText, newText, `a${name}`, `b${name}`, limits)
        : undefined;
    if (diff) push(`changed: ${name}`, diff.trimEnd());
    else {
      push(
        `changed: ${name} (too large to diff: ${before.size} → ${after.size} bytes, sha256 ${before.hash.slice(0, 12)} → ${after.hash.slice(0, 12)})`,
      );
    }
  }
}
