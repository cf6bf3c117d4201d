import path from 'node:path';
import { importClientEntry, type ClientEntry } from './command-line.js';
import { profileName, uniqueNames, type ImportOutcome } from './profile-draft.js';
import { pickListed, registryListOf, RegistryPickError, sample } from './registry-list.js';
import { importRegistryServer, RegistryEntryError, registryServerOf, RegistryServerSchema } from './registry-server.js';

/**
 * What kind of file `hintbox import` was given, told by its shape, and the outcome for each of
 * its servers. Pure: the JSON is parsed by the caller.
 *
 * - `mcpServers: { name: { command, args, env } }`: Claude Desktop's `claude_desktop_config.json`
 *   and Cursor's `mcp.json` (the same shape);
 * - `servers: { name: { type, command, args, env } }` (and `inputs`): VS Code's `mcp.json`;
 * - `name` with `packages` (or `remotes`): an MCP registry `server.json` (also as the registry
 *   API answers it, `{ server: … }`);
 * - a list of those: the registry API's list answer (`{ servers: [{ server, _meta }], … }`) or
 *   a plain array, of which `--server NAME [--version V]` picks one (registry-list.ts). Nothing
 *   is ever fetched: the list is the file the user gives.
 */

export type SourceKind = 'claude-desktop' | 'cursor' | 'mcp-servers' | 'vscode' | 'registry';

export const SOURCE_LABEL: Record<SourceKind, string> = {
  'claude-desktop': 'Claude Desktop config',
  cursor: 'Cursor config',
  'mcp-servers': 'client config (mcpServers)',
  vscode: 'VS Code config',
  registry: 'MCP registry server.json',
};

/** Which entry of a registry list to import (`--server`, `--version`). */
export interface RegistryPick {
  server?: string;
  version?: string;
}

export interface ImportPlan {
  kind: SourceKind;
  /** The key of the client config's servers (`mcpServers` or `servers`); none for a registry entry. */
  section?: 'mcpServers' | 'servers';
  outcomes: ImportOutcome[];
}

/** Thrown when the file is none of the known kinds; its message is one line. */
export class ImportSourceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ImportSourceError';
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * `file` names the source in messages and tells Claude Desktop's and Cursor's files apart;
 * `reserved`: variable names an import must not make (hintbox's own).
 */
export function planImport(
  json: unknown,
  file: string,
  pick: RegistryPick = {},
  reserved: ReadonlySet<string> = new Set(),
): ImportPlan {
  const base = path.basename(file);
  const listed = registryListOf(json);
  if (listed !== undefined) {
    const names = [...new Set(listed.map((l) => l.server.name))];
    if (pick.server === undefined) {
      throw new ImportSourceError(
        `${file}: a list of ${names.length} MCP registry server${names.length === 1 ? '' : 's'}: ` +
          `pick one with --server NAME (${sample(names)})`,
      );
    }
    try {
      return planRegistry(pickListed(listed, file, pick.server, pick.version).server, file, {}, reserved);
    } catch (error) {
      if (error instanceof RegistryPickError) throw new ImportSourceError(error.message);
      throw error;
    }
  }
  const registry = registryServerOf(json);
  if (registry === undefined && (pick.server !== undefined || pick.version !== undefined)) {
    throw new ImportSourceError(
      `${file}: --server picks a server of an MCP registry list (or checks a server.json's name); this is not one`,
    );
  }
  if (registry !== undefined) return planRegistry(registry, file, pick, reserved);
  if (isObject(json) && isObject(json.mcpServers)) {
    const kind: SourceKind =
      base === 'claude_desktop_config.json'
        ? 'claude-desktop'
        : path.basename(path.dirname(path.resolve(file))) === '.cursor'
          ? 'cursor'
          : 'mcp-servers';
    return { kind, section: 'mcpServers', outcomes: entries(json.mcpServers, 'mcpServers', base) };
  }
  if (isObject(json) && isObject(json.servers)) {
    return { kind: 'vscode', section: 'servers', outcomes: entries(json.servers, 'servers', base) };
  }
  throw new ImportSourceError(
    `${file}: neither a client config (an "mcpServers" or "servers" object: Claude Desktop, Cursor, VS Code) ` +
      'nor an MCP registry server.json ("name" and "packages") or a list of them ("servers": [...])',
  );
}

/** One registry entry; a `--server` or `--version` given for a lone server.json must be its own. */
function planRegistry(registry: unknown, file: string, check: RegistryPick, reserved: ReadonlySet<string>): ImportPlan {
  const parsed = RegistryServerSchema.safeParse(registry);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ImportSourceError(
      `${file}: not a valid MCP registry server.json: ${issue ? `${issue.path.join('.') || '(top)'}: ${issue.message}` : ''}`,
    );
  }
  const server = parsed.data;
  if (check.server !== undefined && check.server !== server.name)
    throw new ImportSourceError(`${file}: its server is ${server.name}, not ${check.server}`);
  if (check.version !== undefined && check.version !== server.version)
    throw new ImportSourceError(
      `${file}: its server's version is ${server.version ?? 'not given'}, not ${check.version}`,
    );
  const name = profileName(server.name.split('/').pop() ?? server.name);
  const origin = `${path.basename(file)} (MCP registry entry ${server.name}${server.version ? ` ${server.version}` : ''})`;
  try {
    return { kind: 'registry', outcomes: [importRegistryServer(server, name, origin, reserved)] };
  } catch (error) {
    if (error instanceof RegistryEntryError) throw new ImportSourceError(`${file}: refused: ${error.message}`);
    throw error;
  }
}

function entries(section: Record<string, unknown>, key: string, base: string): ImportOutcome[] {
  const keys = Object.keys(section);
  const names = uniqueNames(keys.map(profileName));
  return keys.map((name, i): ImportOutcome => {
    const entry = section[name];
    const skip = (reason: string): ImportOutcome => ({ skipped: { key: name, reason } });
    if (!isObject(entry)) return skip('its entry is not an object');
    const type = typeof entry.type === 'string' ? entry.type : undefined;
    if (typeof entry.url === 'string' || (type !== undefined && type !== 'stdio'))
      return skip(`a remote server (${type ?? 'url'}): hintbox runs stdio servers, there is nothing to sandbox here`);
    if (typeof entry.command !== 'string' || entry.command === '') return skip('its entry has no command');
    const args = entry.args ?? [];
    if (!Array.isArray(args) || !args.every((a) => typeof a === 'string'))
      return skip('its args are not a list of strings');
    const env = entry.env ?? {};
    if (!isObject(env)) return skip('its env is not an object');
    const client: ClientEntry = { command: entry.command, args, env };
    const variables = [entry.command, ...client.args].find((a) => a.includes('${'));
    if (variables !== undefined)
      return skip(
        `write its profile by hand: "${variables}" uses a variable of the client (\${input:…}, \${env:…}, ` +
          '${workspaceFolder}…) in its command line, which hintbox would not see',
      );
    const outcome = importClientEntry(name, names[i] as string, `${base}, ${key}.${name}`, client);
    if ('draft' in outcome && typeof entry.envFile === 'string') {
      outcome.draft.notes.push(
        'The entry reads more variables from its envFile, which the import does not read: add those the server needs to env, by name.',
      );
    }
    return outcome;
  });
}
