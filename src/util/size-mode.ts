import v8 from 'node:v8';

/**
 * Leaves V8's size mode for the rest of this process: what `hintbox serve` does early in its
 * start, before it reads its profiles.
 *
 * The bin's shebang (src/cli/main.ts) starts every command in V8's size mode
 * (`--optimize-for-size`) for `hintbox run`: one process per client's config, whose resident
 * memory is a target. `hintbox serve` is one process for every client, where the CPU each call
 * costs is what they wait on: in size mode it spent about a fifth more CPU per call (391 against
 * 328 µs, the same builds called in turn; docs/benchmarks.md, session 25). V8 reads the flag at
 * each decision it governs, so it holds from here on. The bin's other flags stay: the young
 * generation's size (`--max-semi-space-size=1`) is fixed when V8 starts, and neither it nor
 * `--bytecode-old-age=1` was measured to cost serve anything.
 */
export function leaveSizeMode(): void {
  v8.setFlagsFromString('--no-optimize-for-size');
}
