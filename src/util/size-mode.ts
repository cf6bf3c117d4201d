import v8 from 'node:v8';

/**
 * Leaves V8's size mode for the rest of this process: what `hintbox serve` does as it starts.
 *
 * The bin's shebang (src/cli/main.ts) starts every command in V8's size mode
 * (`--optimize-for-size`) for `hintbox run`: one process per client's config, whose resident
 * memory is a target. `hintbox serve` is one process for every client, where the CPU each call
 * costs is what they wait on. In size mode, serve spent about a third more CPU per call
 * (docs/benchmarks.md, session 25). From here on V8 optimizes as it would by default; the
 * young generation's size (`--max-semi-space-size=1`) is fixed when V8 starts and stays.
 *
 * `setFlags` is V8's (injected in tests).
 */
export function leaveSizeMode(setFlags: (flags: string) => void = (flags) => v8.setFlagsFromString(flags)): void {
  setFlags('--no-optimize-for-size');
}
