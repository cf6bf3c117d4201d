import { createHash } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { SandboxGrant, SandboxMount } from '../policy/plan-sandboxes.js';
import {
  compareSnapshots,
  formatChangeSteps,
  truncateText,
  type FileChange,
  type FormattedChanges,
  type Snapshot,
  type SnapshotEntry,
} from '../policy/file-changes.js';
import type { Logger } from '../util/logger.js';
import { isProcessAlive } from '../util/process-alive.js';
import type { SandboxEngine, SandboxSpec, StartedSandbox } from '../engine/sandbox-engine.js';
import { monotonicMs } from '../util/clock.js';

/**
 * Preview of a call: the same call, run first in a throwaway sandbox of the same grant whose
 * writable mounts are copies (network forced off), and the file changes it made to the copies.
 * The preview only informs the person asked; it never decides, and its failures never block.
 */

/** A preview, or one line saying why there is none. */
export type CallPreview = { available: true; text: string } | { available: false; reason: string };

/** What the call guard needs: a preview of one call in the sandbox its tool runs in. */
export interface CallPreviewer {
  preview(sandbox: string, tool: string, args: Record<string, unknown> | undefined): Promise<CallPreview>;
}

export interface PreviewLimits {
  /** Largest writable mount copied, in bytes of regular files. */
  maxBytes: number;
  /** Most entries (files, folders, links) of a writable mount copied. */
  maxFiles: number;
  /** How long the dry run's tools/call may take, in ms. */
  callTimeoutMs: number;
  /** Files up to this size are kept for a diff; larger ones get a size and hash summary. */
  maxDiffFileBytes: number;
  /** The preview text in a confirmation is cut beyond this many characters. */
  maxChars: number;
  /**
   * How long the diffs of a preview may take, in ms. The work is done in slices between which
   * hintbox's event loop runs (other calls, pings); when the time is up, the preview is cut.
   */
  diffTimeMs: number;
}

export const DEFAULT_PREVIEW_LIMITS: PreviewLimits = {
  maxBytes: 50 * 1024 * 1024,
  maxFiles: 5000,
  callTimeoutMs: 10_000,
  maxDiffFileBytes: 256 * 1024,
  maxChars: 4000,
  diffTimeMs: 2000,
};

/** The longest the diff work holds the event loop before it lets others run, in ms. */
const DIFF_SLICE_MS = 10;
/** The longest one file's diff may take, in ms; beyond, it is shown as too large to diff. */
const ONE_DIFF_MS = 50;

export interface PreviewerOptions {
  engine: Pick<SandboxEngine, 'hold'>;
  log: Logger;
  /** The grant of a planned sandbox. */
  grantOf(sandbox: string): SandboxGrant | undefined;
  /** The spec of a dry run in a sandbox of this class with this grant (as for the real one; `preview` set). */
  specFor(sandbox: string, grant: SandboxGrant): SandboxSpec;
  startTimeoutMs: number;
  limits?: Partial<PreviewLimits>;
  /** Where copies are made; default the OS temp folder. */
  tmpDir?: string;
  /**
   * Runs `work` (the copy) with the session's sandboxes that can write any of `sources` frozen,
   * and no call going into them; rejects when one cannot be frozen. Default: just runs it.
   */
  holdWriters?: <T>(sources: readonly string[], work: () => Promise<T>) => Promise<T>;
  /**
   * What the session does with each of its started sandboxes before a call goes in (answer
   * `roots/list`): a dry run's server is told what the real one is, and asks nothing unanswered.
   */
  onStarted?: (sandbox: StartedSandbox) => void;
}

/** A preview refused for a reason a person should read (too large, …). */
export class NoPreview extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NoPreview';
  }
}

export class Previewer implements CallPreviewer {
  private readonly limits: PreviewLimits;

  constructor(private readonly options: PreviewerOptions) {
    this.limits = { ...DEFAULT_PREVIEW_LIMITS, ...options.limits };
  }

  async preview(sandbox: string, tool: string, args: Record<string, unknown> | undefined): Promise<CallPreview> {
    const grant = this.options.grantOf(sandbox);
    if (!grant) return { available: false, reason: `no preview: no sandbox ${sandbox} in the plan` };
    const writable = grant.mounts.filter((m) => !m.readOnly);
    if (!writable.length) return { available: false, reason: 'no preview needed: the sandbox has no writable mount' };
    if (grant.database) {
      // A dry run would reach the real database: its changes cannot be kept to a copy.
      return { available: false, reason: 'no preview: the sandbox has database access, which a dry run would change' };
    }
    try {
      return { available: true, text: await this.run(sandbox, grant, writable, tool, args) };
    } catch (error) {
      if (error instanceof NoPreview) return { available: false, reason: `no preview: ${error.message}` };
      this.options.log.warn(`preview of ${tool} failed: ${(error as Error).message}`);
      return { available: false, reason: `no preview: the dry run failed: ${firstLine((error as Error).message)}` };
    }
  }

  private async run(
    sandbox: string,
    grant: SandboxGrant,
    writable: SandboxMount[],
    tool: string,
    args: Record<string, unknown> | undefined,
  ): Promise<string> {
    const { limits, options } = this;
    const dir = await fs.mkdtemp(path.join(options.tmpDir ?? os.tmpdir(), `hintbox-preview-${process.pid}-`));
    let started: StartedSandbox | undefined;
    try {
      const copies = new Map<SandboxMount, string>();
      // The session's own sandboxes can write these folders. While they are copied on the host,
      // those sandboxes are frozen: nothing can swap a folder for a symlink (to ~/.ssh, say)
      // between the copy's checks and its reads, nor plant a FIFO that would block it.
      const copyAll = async (): Promise<void> => {
        for (const [index, mount] of writable.entries()) {
          const copy = path.join(dir, `m${index}`);
          await copyTree(mount.source, copy, mount.target, limits);
          copies.set(mount, copy);
        }
      };
      const sources = writable.map((m) => m.source);
      await (options.holdWriters ? options.holdWriters(sources, copyAll) : copyAll());
      const before = new Map<SandboxMount, Snapshot>();
      for (const [mount, copy] of copies) before.set(mount, await snapshotTree(copy, limits, 1));

      const previewGrant: SandboxGrant = {
        network: 'none',
        mounts: grant.mounts.map((m) => (m.readOnly ? m : { ...m, source: copies.get(m) as string })),
      };
      // Told apart as a preview, and never the outside world, whatever the grant says.
      const spec: SandboxSpec = { ...options.specFor(sandbox, previewGrant), preview: true };
      const held = await options.engine.hold(spec, {
        log: options.log.child(`preview/${sandbox}`),
        startTimeoutMs: options.startTimeoutMs,
      });
      started = await held.release();
      options.onStarted?.(started);
      let outcome = '';
      try {
        const result = await started.client.callTool({ name: tool, arguments: args ?? {} }, undefined, {
          timeout: limits.callTimeoutMs,
        });
        if (result.isError) {
          const text = JSON.stringify(result.content ?? '');
          outcome = `The dry run ended with a tool error: ${text.length > 300 ? `${text.slice(0, 300)}…` : text}`;
        }
      } catch (error) {
        outcome = `The dry run did not finish (${firstLine((error as Error).message)}); the changes below are those made until then.`;
      }
      // The container is gone before the copies are read: nothing changes them any more.
      await started.remove();
      started = undefined;

      const changes: { mount: SandboxMount; changes: FileChange[] }[] = [];
      for (const [mount, copy] of copies) {
        const after = await snapshotTree(copy, limits, 4);
        changes.push({ mount, changes: compareSnapshots(before.get(mount) as Snapshot, after) });
      }
      const out = await formatBounded(changes, limits);
      const targets = writable.map((m) => m.target).join(', ');
      const head = `Preview (a dry run of this call in a throwaway sandbox, without network, over a copy of ${targets}; nothing real was changed):`;
      const body = out.lines.length ? out.lines.join('\n') : 'The dry run changed no files.';
      const text = truncateText([head, ...(outcome ? [outcome] : []), body].join('\n'), limits.maxChars);
      return out.cut ? `${text}\n${out.cut}` : text;
    } finally {
      if (started) {
        await started
          .remove()
          .catch((e: Error) => options.log.warn(`could not remove the preview sandbox: ${e.message}`));
      }
      // The dry run may have left folders without write or search rights: restore ours first.
      await makeRemovable(dir);
      await fs
        .rm(dir, { recursive: true, force: true })
        .catch((e: Error) => options.log.warn(`could not remove the preview copy ${dir}: ${e.message}`));
    }
  }
}

/**
 * Formats the changes of every mount within the limits: at most `maxChars` of text and
 * `diffTimeMs` of work, done in slices of DIFF_SLICE_MS between which the event loop runs.
 * `cut` says, in one line, what was left out and why.
 */
export async function formatBounded(
  mounts: readonly { mount: Pick<SandboxMount, 'target'>; changes: readonly FileChange[] }[],
  limits: Pick<PreviewLimits, 'maxChars' | 'diffTimeMs'>,
  now: () => number = monotonicMs,
): Promise<FormattedChanges & { cut?: string }> {
  const out: FormattedChanges = { lines: [], chars: 0, done: 0, total: 0 };
  const deadline = now() + limits.diffTimeMs;
  const expired = (): boolean => now() > deadline;
  // One diff may not hold the loop long either: it gives up at its own deadline.
  let diffDeadline = deadline;
  const diffExpired = (): boolean => now() > diffDeadline;
  let outOfTime = false;
  for (const { mount, changes } of mounts) {
    const shown = (rel: string): string => (rel ? path.posix.join(mount.target, rel) : mount.target);
    const steps = formatChangeSteps(changes, shown, out, { maxChars: limits.maxChars, expired: diffExpired });
    let slice = now();
    while (!outOfTime) {
      diffDeadline = Math.min(deadline, now() + ONE_DIFF_MS);
      if (steps.next().done) break;
      if (expired()) outOfTime = true;
      else if (now() - slice > DIFF_SLICE_MS) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        slice = now();
      }
    }
  }
  // Changes of mounts never reached count as not shown.
  const total = mounts.reduce((sum, m) => sum + m.changes.length, 0);
  out.total = total;
  if (out.done >= total) return out;
  const why = outOfTime
    ? `the diff work stopped after ${limits.diffTimeMs / 1000} s`
    : `a preview shows at most ${limits.maxChars} characters`;
  return {
    ...out,
    cut: `… (the preview was cut: ${total - out.done} of ${total} changed entries are not shown, as ${why})`,
  };
}

/**
 * Removes preview copies (`hintbox-preview-<pid>-*` under `baseDir`) left by a hintbox process
 * that is gone (killed during a preview). Returns the removed folders.
 */
export async function sweepPreviewDirs(baseDir = os.tmpdir()): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await fs.readdir(baseDir).catch(() => [] as string[])) {
    const pid = /^hintbox-preview-(\d+)-/.exec(name)?.[1];
    if (!pid || isProcessAlive(Number(pid))) continue;
    const dir = path.join(baseDir, name);
    await makeRemovable(dir);
    await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
    removed.push(dir);
  }
  return removed;
}

/** Gives the owner rwx on every folder below `dir` (so that it can be removed), without following links. */
async function makeRemovable(dir: string): Promise<void> {
  const walk = async (folder: string): Promise<void> => {
    await fs.chmod(folder, 0o700).catch(() => undefined);
    const entries = await fs.readdir(folder, { withFileTypes: true }).catch(() => []);
    for (const entry of entries) if (entry.isDirectory()) await walk(path.join(folder, entry.name));
  };
  await walk(dir);
}

function firstLine(text: string): string {
  const line = text.split('\n')[0] ?? text;
  return line.length > 300 ? `${line.slice(0, 300)}…` : line;
}

const asRoot = (): boolean => process.getuid?.() === 0;

/**
 * Copies a mount's source (never following links; special files left out), keeping modes and,
 * when hintbox runs as root, owners (so the sandbox user may write the copy as it may the
 * source). Refuses beyond the limits.
 */
export async function copyTree(
  source: string,
  destination: string,
  target: string,
  limits: Pick<PreviewLimits, 'maxBytes' | 'maxFiles'>,
): Promise<void> {
  let files = 0;
  let bytes = 0;
  const root = asRoot();
  const tooLarge = (): never => {
    throw new NoPreview(
      `the mount ${target} is larger than ${Math.round(limits.maxBytes / (1024 * 1024))} MB / ${limits.maxFiles} files`,
    );
  };
  const walk = async (from: string, to: string): Promise<void> => {
    const st = await fs.lstat(from);
    if (++files > limits.maxFiles) tooLarge();
    if (st.isDirectory()) {
      await fs.mkdir(to, { mode: 0o700 });
      for (const name of await fs.readdir(from)) await walk(path.join(from, name), path.join(to, name));
      await fs.chmod(to, st.mode & 0o7777);
    } else if (st.isFile()) {
      bytes += st.size;
      if (bytes > limits.maxBytes) tooLarge();
      await fs.copyFile(from, to);
      await fs.chmod(to, st.mode & 0o7777);
    } else if (st.isSymbolicLink()) {
      await fs.symlink(await fs.readlink(from), to);
    } else {
      return;
    }
    if (root) await fs.lchown(to, st.uid, st.gid);
  };
  await walk(source, destination);
}

/**
 * A snapshot of a folder, read without following links. Files up to maxDiffFileBytes are kept
 * for a diff. `factor` widens the limits (a dry run may add files).
 */
export async function snapshotTree(
  rootPath: string,
  limits: Pick<PreviewLimits, 'maxBytes' | 'maxFiles' | 'maxDiffFileBytes'>,
  factor: number,
): Promise<Snapshot> {
  const out = new Map<string, SnapshotEntry>();
  let bytes = 0;
  const walk = async (rel: string): Promise<void> => {
    const full = rel ? path.join(rootPath, rel) : rootPath;
    const st = await fs.lstat(full);
    if (out.size >= limits.maxFiles * factor) {
      throw new NoPreview(`the dry run left more than ${limits.maxFiles * factor} files`);
    }
    if (st.isDirectory()) {
      out.set(rel, { kind: 'dir' });
      for (const name of (await fs.readdir(full)).sort()) await walk(rel ? path.posix.join(rel, name) : name);
    } else if (st.isFile()) {
      bytes += st.size;
      if (bytes > limits.maxBytes * factor) {
        throw new NoPreview(`the dry run left more than ${Math.round((limits.maxBytes * factor) / (1024 * 1024))} MB`);
      }
      out.set(rel, await readFileEntry(full, st.size <= limits.maxDiffFileBytes));
    } else if (st.isSymbolicLink()) {
      out.set(rel, { kind: 'symlink', target: await fs.readlink(full) });
    } else {
      out.set(rel, { kind: 'other' });
    }
  };
  await walk('');
  return out;
}

async function readFileEntry(file: string, keep: boolean): Promise<SnapshotEntry> {
  const handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
  try {
    const hash = createHash('sha256');
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of handle.createReadStream({ autoClose: false })) {
      const buffer = chunk as Buffer;
      hash.update(buffer);
      size += buffer.length;
      if (keep) chunks.push(buffer);
    }
    return {
      kind: 'file',
      size,
      hash: hash.digest('hex'),
      ...(keep ? { content: new Uint8Array(Buffer.concat(chunks)) } : {}),
    };
  } finally {
    await handle.close();
  }
}
