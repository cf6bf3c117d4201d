import type { Profile } from '../profile/load-profile.js';
import { substituteSandboxValues } from '../profile/sandbox-values.js';

/**
 * What a sandbox's server process runs and sees, the same on every engine: its command, its
 * HOME and TMPDIR, the proxy variables of an egress class. Pure.
 */

/** HOME inside every sandbox: a small tmpfs, because real read-only tools still write caches. */
export const SANDBOX_HOME = '/home/sandbox';
export const SANDBOX_TMP = '/tmp';

/** The parts of an image's configuration that say what it runs. */
export interface ImageCommand {
  Entrypoint?: string | string[] | null;
  Cmd?: string | string[] | null;
}

/**
 * What the sandbox runs, as Docker would: the profile's command, else the image's entrypoint;
 * then the profile's args, else (only when the entrypoint is the image's) the image's cmd.
 * The gate executes it, so hintbox must know it. Pure.
 */
export function serverCommand(
  server: Pick<Profile['server'], 'command' | 'args' | 'image'>,
  image: ImageCommand,
): string[] {
  const list = (x: string | string[] | null | undefined): string[] => (typeof x === 'string' ? [x] : (x ?? []));
  const entrypoint = server.command ?? list(image.Entrypoint);
  const args = server.args ?? (server.command ? [] : list(image.Cmd));
  const command = [...entrypoint, ...args];
  if (!command.length || !command[0]) {
    throw new Error(`image ${server.image} names no command to run and the profile gives none (server.command)`);
  }
  return command;
}

/**
 * The command with `${sandbox:NAME}` filled in, in the profile's args only: they are the
 * command's last entries (see `serverCommand`); the image's own entrypoint and cmd stay as they are.
 */
export function commandWithValues(
  command: readonly string[],
  profileArgs: readonly string[] | undefined,
  values: Readonly<Record<string, string>> | undefined,
): string[] {
  const first = command.length - (profileArgs?.length ?? 0);
  return command.map((arg, i) => (i < first ? arg : substituteSandboxValues(arg, values, `server.args[${i - first}]`)));
}

/**
 * The proxy variables of a sandbox with egress, in both spellings clients read. Clients that
 * ignore them have no route at all: the proxy is the only way out.
 */
export function proxyEnv(proxyUrl: string): Record<string, string> {
  const noProxy = 'localhost,127.0.0.1,::1';
  return {
    HTTP_PROXY: proxyUrl,
    HTTPS_PROXY: proxyUrl,
    ALL_PROXY: proxyUrl,
    NO_PROXY: noProxy,
    http_proxy: proxyUrl,
    https_proxy: proxyUrl,
    all_proxy: proxyUrl,
    no_proxy: noProxy,
  };
}
