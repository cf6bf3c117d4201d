import type { PackageSource } from '../../packages/package-source.js';
import { ImageError } from './image-builder.js';

/**
 * Which of a package's commands a server image runs: the profile's `server.bin`, else the only
 * one, else the one named like the package (without its scope). Pure but for the error.
 */
export function chooseCommand(
  source: PackageSource,
  commands: Readonly<Record<string, string>>,
  wanted: string | undefined,
): [string, string] {
  const names = Object.keys(commands);
  const list = names.length ? names.join(', ') : 'none';
  if (wanted !== undefined) {
    if (!Object.hasOwn(commands, wanted)) {
      throw new ImageError(`${source.name} has no command ${wanted} (server.bin); its commands: ${list}`);
    }
    return [wanted, commands[wanted]!];
  }
  if (names.length === 1) return [names[0]!, commands[names[0]!]!];
  const bare = source.name.replace(/^@[^/]+\//, '').replace(/\[.*$/, '');
  const named = names.find((name) => name.toLowerCase() === bare.toLowerCase());
  if (named) return [named, commands[named]!];
  throw new ImageError(
    names.length === 0
      ? `${source.name} has no command to run (no ${source.kind === 'npm' ? 'bin' : 'console script'})`
      : `${source.name} has several commands (${list}): name one with server.bin`,
  );
}
