import path from 'node:path';
import { importClientEntry, type ClientEntry } from './command-line.js';
import { profileName, uniqueNames, type ImportOutcome } from './profile-draft.js';
import { importRegistryServer, registryServerOf, RegistryServerSchema } from './registry-server.js';

/**
 * What kind of file `hintbox import` was given, told by its shape, and the outcome for each of
 * its servers. Pure: the JSON is parsed by the caller.
 *
 * - `mcpServers: { name: { command, args, env } }`: Claude Desktop's `claude_desktop_config.json`
 *   and Cursor's `mcp.json` (the same shape);
 * - `servers: { name: { type, command, args, env } }` (and `inputs`): VS Code's `mcp.json`;
 * - `name` with `packages` (or `remotes`): an MCP registry `server.json` (also as the registry
 *   API answers it, `{ server: … }`).
 */

export type SourceKind = 'claude-desktop' | 'cursor' | 'mcp-servers' | 'vscode' | 'registry';

export const SOURCE_LABEL: Record<SourceKind, string> = {
  'claude-desktop': 'Claude Desktop config',
  cursor: 'Cursor config',
  'mcp-servers': 'client config (mcpServers)',
  vscode: 'VS Code config',
  registry: 'MCP registry server.json',
};

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

/** `file` names the source in messages and tells Claude Desktop's and Cursor's files apart. */
export function planImport(json: unknown, file: string): ImportPlan {
  const base = path.basename(file);
  const registry = registryServerOf(json);
  if (registry !== undefined) {
    const parsed = RegistryServerSchema.safeParse(registry);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new ImportSourceError(
        `${file}: not a valid MCP registry server.json: ${issue ? `${issue.path.join('.') || '(top)'}: ${issue.message}` : ''}`,
      );
    }
    const server = parsed.data;
    const name = profileName(server.name.split('/').pop() ?? server.name);
    const origin = `${base} (MCP registry entry ${server.name}${server.version ? ` ${server.version}` : ''})`;
    return { kind: 'registry', outcomes: [importRegistryServer(server, name, origin)] };
  }
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
      'nor an MCP registry server.json ("name" and "packages")',
  );
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
