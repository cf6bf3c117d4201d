import path from 'node:path';
import { interpolate, type Variables } from '../profile/interpolate.js';

/**
 * The entry an MCP client's config needs to start `hintbox run <profile>`: pure, so that what
 * `hintbox install` prints is tested without a client. A client starts its servers from a
 * folder of its own choosing, with an environment of its own (little more than HOME and PATH),
 * so the entry carries everything the run depends on: the bin and the profile by absolute
 * paths, and the variables the profile read at install with the values they had then.
 */

/** The clients whose config format hintbox writes, by the name `install --client` takes. */
export const CLIENTS = {
  'claude-desktop': { title: 'Claude Desktop', file: 'claude_desktop_config.json', key: 'mcpServers' },
  'claude-code': {
    title: 'Claude Code',
    file: '.mcp.json in the project (or: claude mcp add-json)',
    key: 'mcpServers',
  },
  vscode: { title: 'VS Code', file: '.vscode/mcp.json (or the user mcp.json)', key: 'servers' },
  cursor: { title: 'Cursor', file: '.cursor/mcp.json (or ~/.cursor/mcp.json)', key: 'mcpServers' },
} as const;
export type ClientName = keyof typeof CLIENTS;

/** What starts hintbox for one profile, whatever the client. */
export interface ClientEntry {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** A variable of the entry whose value is not printed (a secret), for the person to fill in. */
export interface WithheldVariable {
  name: string;
  placeholder: string;
}

/** Names whose values are secrets by their look: printed as a placeholder, never as the value. */
const SECRET_NAME = /TOKEN|SECRET|PASS(WORD|WD)?|KEY|CREDENTIAL|AUTH|_URL$/i;

/** Where a bin that calls `/usr/bin/env node` finds node when the client gives no PATH of its own. */
const USUAL_PATH = ['/usr/local/bin', '/usr/bin', '/bin'];

export interface EntryInputs {
  /** The hintbox bin, absolute. */
  bin: string;
  /** The profile file, absolute. */
  profile: string;
  /** The profile as parsed YAML, before interpolation. */
  tree: unknown;
  /** The variables install loaded the profile with (the environment and the built-ins). */
  vars: Variables;
  /** Names hintbox sets itself (CWD, HINTBOX_IMAGES): never in the entry. */
  builtins: readonly string[];
  /** hintbox's own variables (DOCKER_HOST, HINTBOX_STATE_DIR, …): in the entry where set at install. */
  ownVariables: readonly string[];
  /** The node running hintbox (process.execPath): its folder goes into PATH when it is not a usual one. */
  nodePath: string;
}

/**
 * The entry and the variables it names without their values. In the entry's env:
 * - each variable the profile read that was set at install, with that value;
 * - each unset one whose default depends on the folder hintbox starts in (`${WORKSPACE:-${CWD}}`),
 *   pinned to what it was at install: from a client, that folder is `/` or `$HOME`;
 * - hintbox's own variables that were set, and PATH when node is not where `/usr/bin/env` looks.
 * A secret-looking name gets a placeholder, never its value: the entry is printed and pasted.
 */
export function clientEntry(inputs: EntryInputs): { entry: ClientEntry; withheld: WithheldVariable[] } {
  const env: Record<string, string> = {};
  const withheld: WithheldVariable[] = [];
  const put = (name: string, value: string): void => {
    if (name in env) return;
    if (SECRET_NAME.test(name) && value !== '') {
      const placeholder = `<${name}: fill in>`;
      withheld.push({ name, placeholder });
      env[name] = placeholder;
    } else env[name] = value;
  };
  const read = readVariables(inputs.tree, inputs.vars);
  const elsewhere = readVariables(inputs.tree, { ...inputs.vars, CWD: `${inputs.vars.CWD ?? ''}\0elsewhere` });
  for (const name of read.names) {
    if (inputs.builtins.includes(name)) continue;
    const value = inputs.vars[name];
    if (value !== undefined && value !== '') put(name, value);
    else {
      const here = read.defaults.get(name);
      if (here !== undefined && here !== elsewhere.defaults.get(name)) put(name, here);
    }
  }
  for (const name of inputs.ownVariables) {
    const value = inputs.vars[name];
    if (value !== undefined && value !== '') put(name, value);
  }
  const nodeDir = path.dirname(inputs.nodePath);
  if (!USUAL_PATH.includes(nodeDir)) env.PATH = [nodeDir, ...USUAL_PATH].join(':');
  return { entry: { command: inputs.bin, args: ['run', inputs.profile], env }, withheld };
}

/** The names a profile reads, and the value each default took (`${NAME:-default}` with NAME unset). */
function readVariables(tree: unknown, vars: Variables): { names: Set<string>; defaults: Map<string, string> } {
  const names = new Set<string>();
  const defaults = new Map<string, string>();
  const recording = new Proxy<Record<string, string | undefined>>(
    {},
    {
      get: (_, name) => {
        if (typeof name !== 'string') return undefined;
        names.add(name);
        return vars[name];
      },
    },
  );
  for (const text of stringsOf(tree)) {
    try {
      interpolate(text, recording, { sandboxValues: true, onDefault: (name, value) => defaults.set(name, value) });
    } catch (error) {
      // The profile loaded before the entry is made: a string that fails here is one load refused too.
      void error;
    }
  }
  return { names, defaults };
}

function stringsOf(tree: unknown, seen = new Set<object>()): string[] {
  if (typeof tree === 'string') return [tree];
  if (tree === null || typeof tree !== 'object' || seen.has(tree)) return [];
  seen.add(tree);
  return Object.values(tree).flatMap((v) => stringsOf(v, seen));
}

/** The entry in one client's own config format, under the server's name. */
export function clientConfig(client: ClientName, name: string, entry: ClientEntry): Record<string, unknown> {
  // VS Code's mcp.json requires the type; Claude Code's .mcp.json takes it; Claude Desktop and Cursor go without.
  const typed = client === 'vscode' || client === 'claude-code';
  const server = { ...(typed ? { type: 'stdio' } : {}), ...entry };
  return { [CLIENTS[client].key]: { [name]: server } };
}
