import { BearerTokens, hashToken } from '../serve/bearer-tokens.js';
import { McpHttpServer, type ClientSession } from '../serve/mcp-http-server.js';
import { sandboxBindSources } from '../serve/bind-sources.js';
import { loadProfileFolder, type ServedProfile } from '../serve/profile-folder.js';
import { hintboxEnvironment } from '../config/environment.js';
import { isLoopbackHost } from '../serve/serve-address.js';
import type { HintboxSession } from '../session/hintbox-session.js';
import { knownTools, openAuditTrail, openSession } from '../session/session-setup.js';
import type { SandboxEngine } from '../engine/sandbox-engine.js';
import { UsageError } from '../util/hintbox-error.js';
import { newSessionId } from '../util/session-identity.js';
import { cliLog, engineReady } from './common.js';
import type { CommandSpec } from './main.js';

const HELP = `Usage: hintbox serve <profiles-folder> [--port N] [--host H] [--tokens FILE]
       hintbox serve --hash-token < token

Serves every profile (*.yaml) of a folder over MCP's streamable HTTP transport, each server at
/mcp/<profile name>, from one process. Each MCP session of a client gets its own sandboxes, as
"hintbox run" would start them (this slice shares no sandboxes between clients); they are removed
when the client ends its session (HTTP DELETE) or its session closes. Calls are approved, pinned
and audited as under "hintbox run"; confirmations go to the client that made the call.

A bad profile or lock file anywhere in the folder stops serve before anything starts (exit 2).

  GET /healthz   200 while the process runs
  GET /readyz    200 once every profile is loaded and its image is built; 503 before (and while
                 stopping); the body names the servers and their state, nothing else

With --tokens, every /mcp/ request needs "Authorization: Bearer <token>": none or an unknown
token is answered 401, a token not allowed for the server 403; each denial is audited
(auth.denied), and the token's name is recorded as the caller of every call it makes. The
tokens file (YAML or JSON) lists { name, sha256, servers? }: only the SHA-256 of each token,
which "hintbox serve --hash-token" prints for a token read on stdin.

On SIGTERM or SIGINT, new sessions and requests are refused (503); calls in flight may finish
until the longest call timeout of the profiles (at most 30 s); then every session's sandboxes
(and database roles, socket folders) are removed and serve exits 0. SIGHUP does not reload yet.

In a client's config (streamable HTTP):
  {"type": "http", "url": "http://127.0.0.1:8931/mcp/filesystem",
   "headers": {"Authorization": "Bearer <token>"}}

Options:
  --port N        the port (default 8931; 0: any free one, printed on stderr)
  --host H        the address to listen on (default 127.0.0.1); another than loopback needs --tokens
  --tokens FILE   the bearer tokens (see above)
  --hash-token    print the SHA-256 of the token given on stdin, for the tokens file
  -h, --help      this help`;

/** The longest a drain waits for calls in flight, whatever the profiles' call timeouts. */
const MAX_DRAIN_MS = 30_000;

export const serveCommand: CommandSpec = {
  help: HELP,
  options: {
    port: { type: 'string' },
    host: { type: 'string' },
    tokens: { type: 'string' },
    'hash-token': { type: 'boolean' },
  },
  async run({ positionals, values }) {
    if (values['hash-token'] === true) return printTokenHash();
    if (positionals.length !== 1) {
      throw new UsageError(`serve: expected one profiles folder, got ${positionals.length} (see hintbox serve --help)`);
    }
    const log = cliLog;
    const host = typeof values.host === 'string' ? values.host : '127.0.0.1';
    const port = portArg(values.port);
    const tokens = typeof values.tokens === 'string' ? BearerTokens.load(values.tokens) : undefined;
    if (!tokens && !isLoopbackHost(host)) {
      throw new UsageError(`serve: --host ${host} is reachable from other machines: give --tokens too`);
    }
    // Everything is checked before anything starts: profiles, lock files, tokens.
    const served = loadProfileFolder(positionals[0] as string, log);
    const names = [...served.keys()];
    const strangers = tokens?.unknownServers(names) ?? [];
    if (strangers.length > 0) {
      throw new UsageError(
        `serve: ${values.tokens as string}: tokens name servers not in the folder: ${strangers.join(', ')}`,
      );
    }
    const engine = await engineReady(log);
    // hintbox in a container: what sandboxes get must be at the same path on the host (exit 2).
    await engine.checkBindSources(
      sandboxBindSources(
        [...served.values()].map((s) => s.profile),
        hintboxEnvironment(),
      ),
    );
    const trail = openAuditTrail(log);
    const images = new Map<string, 'ready' | 'starting' | 'failed'>(names.map((n) => [n, 'starting']));
    const server = new McpHttpServer({
      servers: names,
      ...(tokens ? { tokens } : {}),
      openSession: (name, caller) => openClient(served.get(name) as ServedProfile, caller),
      recordEvent: (event) => trail.audit.recordEvent(event),
      ready: () => ({ ready: [...images.values()].every((s) => s === 'ready'), servers: Object.fromEntries(images) }),
      log,
    });

    /** A client's own session of a server, closed once whatever asks first. */
    async function openClient(entry: ServedProfile, caller: string | null): Promise<ClientSession> {
      const sessionId = newSessionId();
      let session: HintboxSession | undefined;
      const removeAll = async (): Promise<void> => {
        await session?.dispose();
        await engine.removeSession(sessionId).catch(() => undefined);
      };
      try {
        session = await openSession({
          profile: entry.profile,
          engine,
          log,
          sessionId,
          audit: trail.audit,
          knownTools: knownTools(),
          locked: entry.approvals.read(),
        });
        const gateway = await session.createGateway({ approvals: entry.approvals.read, audit: trail.audit, caller });
        let closing: Promise<void> | undefined;
        const close = (): Promise<void> => (closing ??= gateway.close().finally(removeAll));
        // A cold start whose server cannot be verified: that client's session ends.
        session.verified?.catch((error: Error) => {
          log.error(`serve: ${entry.profile.name}: the server could not be verified: ${error.message}`);
          void close();
        });
        return {
          close,
          connect: async (transport, onClosed) => {
            await gateway.connect(transport);
            gateway.server.onclose = onClosed;
          },
        };
      } catch (error) {
        await removeAll();
        throw error;
      }
    }

    const alive = setInterval(() => undefined, 1 << 30);
    try {
      const bound = await server.listen(port, host);
      log.info(
        `serving ${names.map((n) => `/mcp/${n}`).join(', ')} on http://${hostText(host)}:${bound}${tokens ? ' (bearer tokens)' : ''}`,
      );
      void prepareImages(engine, served, images, log);
      const signal = await new Promise<string>((resolve) => {
        for (const name of ['SIGTERM', 'SIGINT'] as const) process.once(name, () => resolve(name));
        // Its default would end the process with every sandbox left: ignored until reloading exists.
        process.on('SIGHUP', () => log.warn('SIGHUP: reloading is not supported yet; ignored'));
        process.once('uncaughtException', (error) => {
          log.error(`hintbox failed: ${error.stack ?? error.message}`);
          resolve('failure');
        });
      });
      const deadline = Math.min(
        MAX_DRAIN_MS,
        Math.max(...[...served.values()].map((s) => s.profile.timeouts.call * 1000)),
      );
      log.info(
        `${signal}: stopping: calls in flight may finish within ${Math.round(deadline / 1000)} s, then ${server.sessions} session(s) close`,
      );
      await server.drain(deadline);
      await trail.close();
      return signal === 'failure' ? 1 : 0;
    } finally {
      clearInterval(alive);
    }
  },
};

/** Builds (or finds) every profile's image in the background: /readyz says when all are. */
async function prepareImages(
  engine: SandboxEngine,
  served: ReadonlyMap<string, ServedProfile>,
  images: Map<string, 'ready' | 'starting' | 'failed'>,
  log: typeof cliLog,
): Promise<void> {
  await Promise.all(
    [...served].map(async ([name, { profile }]) => {
      try {
        await engine.prepareImage(profile.server);
        images.set(name, 'ready');
      } catch (error) {
        images.set(name, 'failed');
        log.error(`serve: ${name}: its image is not ready: ${(error as Error).message}`);
      }
    }),
  );
}

function portArg(value: unknown): number {
  if (value === undefined) return 8931;
  const port = Number(value);
  if (typeof value !== 'string' || !/^\d+$/.test(value) || port > 65535) {
    throw new UsageError(`serve: --port must be a number from 0 to 65535 (got ${JSON.stringify(value)})`);
  }
  return port;
}

function hostText(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** `--hash-token`: the token on stdin (one line), its SHA-256 on stdout. */
async function printTokenHash(): Promise<number> {
  let text = '';
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) text += chunk.toString('utf8');
  const token = text.replace(/\r?\n$/, '');
  if (token === '' || /\s/.test(token))
    throw new UsageError('serve --hash-token: give one token, without spaces, on stdin');
  process.stdout.write(`${hashToken(token)}\n`);
  return 0;
}
