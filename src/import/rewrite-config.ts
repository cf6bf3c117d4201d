import { runsHintbox } from './command-line.js';

/**
 * `hintbox import --rewrite`: the client config with each imported server's entry running
 * hintbox on its new profile instead of the server itself. Pure: the caller reads the config,
 * keeps a backup and writes the result atomically.
 *
 * Only the imported entries change, and in them only `command` and `args` (`hintbox run
 * <profile>`) and `env` (the original's kept: the profile takes those variables by name, so
 * the client passes them on to hintbox; values the source had in its arguments are added).
 * Every other entry and key is left as it was. An entry that already runs hintbox is refused.
 */

export interface RewrittenEntry {
  /** The entry's key in the config's servers object. */
  key: string;
  /** The profile's absolute path. */
  profile: string;
  /** Variables to add to the entry's env (moved out of its arguments). */
  addEnv: Readonly<Record<string, string>>;
}

/** How the client starts hintbox: its bin, absolute. */
export interface HintboxLaunch {
  command: string;
  /** Before `run <profile>` (e.g. the bin's path when `command` is node). */
  args: readonly string[];
}

export class RewriteError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RewriteError';
  }
}

/** The config with the entries rewritten; the input is not changed. */
export function rewriteClientConfig(
  config: Readonly<Record<string, unknown>>,
  section: 'mcpServers' | 'servers',
  rewritten: readonly RewrittenEntry[],
  launch: HintboxLaunch,
): Record<string, unknown> {
  const servers = config[section] as Record<string, Record<string, unknown>>;
  const next: Record<string, unknown> = { ...servers };
  for (const { key, profile, addEnv } of rewritten) {
    const entry = servers[key];
    if (!entry) throw new RewriteError(`${section}.${key} is not in the config`);
    const command = typeof entry.command === 'string' ? entry.command : '';
    const args = Array.isArray(entry.args) ? (entry.args as string[]) : [];
    if (runsHintbox({ command, args })) throw new RewriteError(`${section}.${key} already runs hintbox: not rewritten`);
    const env = { ...((entry.env as Record<string, unknown> | undefined) ?? {}) };
    for (const [name, value] of Object.entries(addEnv)) {
      if (name in env && env[name] !== value)
        throw new RewriteError(
          `${section}.${key}: env ${name} is set already, to another value than its arguments gave`,
        );
      env[name] = value;
    }
    next[key] = {
      ...entry,
      command: launch.command,
      args: [...launch.args, 'run', profile],
      ...(Object.keys(env).length > 0 ? { env } : {}),
    };
  }
  return { ...config, [section]: next };
}

/** The JSON text of a rewritten config: two-space indented, as the clients write theirs. */
export function configText(config: unknown): string {
  return `${JSON.stringify(config, null, 2)}\n`;
}
