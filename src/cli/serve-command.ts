import { DenialRecorder } from '../audit/denial-recorder.js';
import type { Authenticator } from '../serve/authenticator.js';
import { BearerTokens, hashToken } from '../serve/bearer-tokens.js';
import { sandboxBindSources } from '../serve/bind-sources.js';
import { DEFAULT_IDLE_MS, DEFAULT_MAX_SESSIONS, McpHttpServer } from '../serve/mcp-http-server.js';
import { sandboxUserIds } from '../engine/sandbox-engine.js';
import { writableMountProblems } from '../profile/load-profile.js';
import { ProfileError } from '../profile/profile-problems.js';
import { defaultSandboxUser, unwritableMounts } from '../sandbox/mount-owners.js';
import { combinedAuthenticator, hiddenServers } from '../serve/combined-endpoint.js';
import { loadOAuthConfig, unknownScopeServers } from '../serve/oauth-config.js';
import { OAuthResourceServer } from '../serve/oauth-resource-server.js';
import { loadProfileFolder, type ServedProfile } from '../serve/profile-folder.js';
import { hintboxEnvironment } from '../config/environment.js';
import { isLoopbackHost } from '../serve/serve-address.js';
import { ServedServers } from '../serve/served-servers.js';
import { metricsAccess, ServeMetrics } from '../serve/serve-metrics.js';
import { openAuditTrail } from '../session/session-setup.js';
import { UsageError } from '../util/hintbox-error.js';
import { parseAllowedHost, parseAllowedOrigin, RequestSite } from '../util/request-site.js';
import { leaveSizeMode } from '../util/size-mode.js';
import { cliLog, closeEngine, consolePortArg, engineReady, startConsole } from './common.js';
import type { CommandSpec } from './command-spec.js';

const HELP = `Usage: hintbox serve <profiles-folder> [--port N] [--host H] [--tokens FILE | --oauth FILE]
                     [--allowed-host NAME]... [--allowed-origin ORIGIN]...
                     [--idle-timeout S] [--max-sessions N] [--one-endpoint]
                     [--console [--console-port P]]
       hintbox serve --hash-token < token

Serves every profile (*.yaml) of a folder over MCP's streamable HTTP transport, each server at
/mcp/<profile name>, from one process. A server's clients share one set of its sandboxes,
started when serve starts (profile "clients: shared", the default); with "clients: separate"
each MCP session of a client gets sandboxes of its own, as "hintbox run" would start them,
removed when the client ends its session (HTTP DELETE), its session closes, or it is idle.
Calls are approved, pinned and audited as under "hintbox run", per client: confirmations,
progress and the server's requests go to the client (and request) they belong to; a client
whose connection drops while its call runs has the call cancelled.

With --one-endpoint, /mcp serves the tools of every server the caller may use too, each named
<server>__<tool> (a name two servers could have made is left out): the same sessions a client
would get at each /mcp/<server> behind one (approvals, tags, audit, shared sandboxes alike).
Tools only: prompts and resources stay at /mcp/<server>.

A bad profile or lock file anywhere in the folder stops serve before anything starts (exit 2).
So does, in a container of the engine it drives (hintbox's image), a path it binds into sandboxes
(profile mounts, $TMPDIR, the state folder) that is not mounted at the same path as on the host.

  GET /healthz   200 while the process runs
  GET /readyz    200 while every server serves: one with approved tools in its lock file at
                 once (serving-from-lock: lists from the lock, calls wait until its server is
                 verified), one without once discovered and its sandboxes up (ready); 503
                 before, while stopping, and when a server failed or lists other definitions
                 than its lock file approved (differs-from-lock); the body names the servers
                 and their state, nothing else. /readyz?verified (=1, =true): 200 only once
                 every server, clients: separate ones too, is verified (ready); any other
                 value of verified is 400
  GET /metrics   Prometheus metrics: calls by server, tool and outcome, their durations,
                 refusals, confirmations, denials, hint violations, sandboxes, audit lag (README:
                 "Metrics and logs"); with --tokens only a token with "metrics" may read them,
                 with --oauth only a client on this machine

With --tokens, every /mcp/ request needs "Authorization: Bearer <token>": none or an unknown
token is answered 401, a token not allowed for the server 403; each denial is audited
(auth.denied) and logged within a budget per client address (10, then one per 10 s) and overall
(100, then one a second), the others counted (metrics, and a denials.skipped record each
minute), and the token's name is recorded as the caller of every call it makes. The
tokens file (YAML or JSON) lists { name, sha256, servers?, tags?, metrics? }: only the SHA-256 of
each token, which "hintbox serve --hash-token" prints for a token read on stdin. A token with tags
is served only the tools with one of them (as "hintbox run --tags"); another is unknown to it.
"metrics: true" lets it read /metrics too, "metrics: only" only /metrics (a scraper's token).
The tokens (or OAuth settings) file must lie outside every served profile's writable mounts and
have one name (no hard link), as profiles and lock files must: serve refuses to start otherwise.

With --oauth, each server is an OAuth 2.1 resource server (MCP's authorization spec): requests
carry an authorization server's access token (a JWT), checked for its signature against the
issuer's JWKS (asymmetric algorithms only), its issuer, its audience (the server's
<resource>/mcp/<name>, or a configured one) and its expiry; its scopes give servers and tags.
Bad or missing tokens get 401 naming the protected resource metadata, served to anyone at
/.well-known/oauth-protected-resource/mcp/<name>; a token without a scope for the server 403
(insufficient_scope). The caller is the token's sub and client (client_id, else azp), two
fields: its sessions, cap and audit records go by both; a sub or client id that is empty, over
256 characters or holds control characters gets 401. Tokens are not introspected: one is good
until it expires. No token is ever passed on to a server. The file:
  issuer: https://auth.example.com          jwksUri: https://auth.example.com/jwks
  resource: https://hintbox.example.com     (audience: [...], algorithms: [...],
  scopes:                                    clockToleranceSeconds: 30 are optional)
    mcp:files: { servers: [filesystem], tags: [read] }

Every request, on every path, must name serve's own address as its Host: the address the
client connected to with the port (127.0.0.1:8931; with --host 0.0.0.0, whichever address of
this machine it used), and on loopback localhost:<port> too; or a name --allowed-host gives
(a proxy's public name; 127.0.0.1 and localhost for a port published from a container).
Another name, as a web page reached through DNS rebinding sends, is 421. A browser's request
from a page of another site (an Origin other than http://<that Host>, or https:// for an
allowed name, or --allowed-origin; without Origin, a Sec-Fetch-Site other than same-origin)
is 403. Neither starts anything; both are counted in /metrics (hintbox_http_refused_total),
not audited. With tokens too.

The log goes to stderr; HINTBOX_LOG_FORMAT=json makes it one JSON object per line (time, level,
component, msg) for a log collector.

On SIGTERM or SIGINT, new sessions and requests are refused (503); calls in flight may finish
until the longest call timeout of the profiles (at most 30 s); then every session's sandboxes
(and database roles, socket folders) are removed and serve exits 0. On SIGHUP the folder is
loaded again (profiles and lock files; the tokens file is read only at start): a server whose
profile or lock file changed, or that is gone, has its clients' sessions ended (they connect
again) and its sandboxes removed; a new or changed one starts. A folder with a problem changes
nothing (logged). A SIGHUP while serve starts is done once it listens.
A client session with no request for --idle-timeout seconds (and none in flight, no stream
open) is closed: a client that vanished without ending it. A 2026-07-28 client opens no session:
its requests are answered by one gateway per caller and server, closed after the same idle time;
each must carry MCP-Protocol-Version, Mcp-Method and Mcp-Name headers that match its body (else 400).

In a client's config (streamable HTTP):
  {"type": "http", "url": "http://127.0.0.1:8931/mcp/filesystem",
   "headers": {"Authorization": "Bearer <token>"}}

Options:
  --port N        the port (default 8931; 0: any free one, printed on stderr)
  --host H        the address to listen on (default 127.0.0.1); another than loopback needs
                  --tokens or --oauth
  --tokens FILE   the bearer tokens (see above)
  --oauth FILE    the OAuth resource-server settings (see above); not with --tokens
  --allowed-host NAME  a Host besides serve's own address: NAME (any port) or NAME:PORT, e.g. a
                  proxy's hintbox.example.com; repeatable
  --allowed-origin ORIGIN  a page origin that may use serve (a browser client of yours:
                  https://app.example.com); repeatable
  --idle-timeout S  seconds before an idle client session is closed (default ${DEFAULT_IDLE_MS / 1000})
  --max-sessions N  the most sessions one caller may hold at once (default ${DEFAULT_MAX_SESSIONS}); a
                  session at /mcp counts one for each server behind it; past it, 429
  --one-endpoint  serve every server's tools at /mcp too, named <server>__<tool>
  --console       the operator's console on 127.0.0.1 (a random port, or --console-port P):
                  every client's confirmations, the audit trail, definitions to approve (as
                  hintbox run --console; its link is printed on stderr)
  --hash-token    print the SHA-256 of the token given on stdin, for the tokens file
  --engine KIND   docker or kubernetes: where the sandboxes run (default HINTBOX_ENGINE, else docker)
  -h, --help      this help`;

/** The longest a drain waits for calls in flight, whatever the profiles' call timeouts. */
const MAX_DRAIN_MS = 30_000;

export const serveCommand: CommandSpec = {
  help: HELP,
  options: {
    port: { type: 'string' },
    host: { type: 'string' },
    tokens: { type: 'string' },
    oauth: { type: 'string' },
    'idle-timeout': { type: 'string' },
    'max-sessions': { type: 'string' },
    'allowed-host': { type: 'string', multiple: true },
    'allowed-origin': { type: 'string', multiple: true },
    'one-endpoint': { type: 'boolean' },
    'hash-token': { type: 'boolean' },
    console: { type: 'boolean' },
    'console-port': { type: 'string' },
    engine: { type: 'string' },
  },
  async run({ positionals, values }) {
    if (values['hash-token'] === true) return printTokenHash();
    if (positionals.length !== 1) {
      throw new UsageError(`serve: expected one profiles folder, got ${positionals.length} (see hintbox serve --help)`);
    }
    const log = cliLog;
    const host = typeof values.host === 'string' ? values.host : '127.0.0.1';
    const port = portArg(values.port);
    const idleTimeoutMs = secondsArg('idle-timeout', values['idle-timeout']);
    const maxSessionsPerCaller = maxSessionsArg(values['max-sessions']);
    const consolePort = consolePortArg('serve', values['console-port']);
    const withConsole = values.console === true || consolePort !== undefined;
    const tokensFile = typeof values.tokens === 'string' ? values.tokens : undefined;
    const oauthFile = typeof values.oauth === 'string' ? values.oauth : undefined;
    if (tokensFile && oauthFile) throw new UsageError('serve: give --tokens or --oauth, not both');
    leaveSizeMode();
    const site = siteArg(values['allowed-host'], values['allowed-origin']);
    if (!tokensFile && !oauthFile && !isLoopbackHost(host)) {
      throw new UsageError(`serve: --host ${host} is reachable from other machines: give --tokens or --oauth too`);
    }
    // SIGHUP's default ends the process: caught from here on. One before serve listens is kept
    // and done once it does (the folder may have changed since it was read), not lost.
    let reloadAsked = false;
    let onReload = (): void => {
      if (!reloadAsked) log.info('SIGHUP while serve starts: the folder is loaded again once it listens');
      reloadAsked = true;
    };
    const hangUp = (): void => onReload();
    process.on('SIGHUP', hangUp);
    // Everything is checked before anything starts: profiles, lock files, tokens or OAuth settings.
    const tokens = tokensFile ? BearerTokens.load(tokensFile) : undefined;
    const oauth = oauthFile ? loadOAuthConfig(oauthFile) : undefined;
    const folder = positionals[0] as string;
    const combined = values['one-endpoint'] === true;
    const load = (): Map<string, ServedProfile> => {
      const loaded = loadProfileFolder(folder, log);
      // A workspace its sandboxes could not write: refused now (and on reload), not at each write.
      const unwritable = [...loaded.values()].flatMap(({ profile }) =>
        unwritableMounts(profile, sandboxUserIds(profile, defaultSandboxUser(profile))),
      );
      if (unwritable.length > 0) throw new ProfileError(unwritable);
      // serve's own settings (who may call) must be out of every server's reach, as profiles are.
      const settings = tokensFile ?? oauthFile;
      const what = tokensFile ? "serve's tokens file" : "serve's OAuth settings";
      const held = settings
        ? [...loaded.values()].flatMap(({ profile }) =>
            writableMountProblems(profile.file, profile.mounts, [{ path: settings, what }]),
          )
        : [];
      if (held.length > 0) throw new ProfileError(held);
      const names = [...loaded.keys()];
      const hidden = combined ? hiddenServers(names) : [];
      if (hidden.length > 0) {
        const which = hidden.map(({ server, by }) => `${server} (beside ${by})`).join(', ');
        throw new UsageError(
          `serve: --one-endpoint: no tool of ${which} could be named apart at /mcp (<server>__<tool>): rename the profile`,
        );
      }
      // A session at /mcp counts once per server behind it: more servers than the cap would refuse every one.
      const cap = maxSessionsPerCaller ?? DEFAULT_MAX_SESSIONS;
      if (combined && names.length > cap) {
        throw new UsageError(
          `serve: --one-endpoint: a session at /mcp counts once for each of the ${names.length} servers, more than --max-sessions ${cap}: raise it`,
        );
      }
      const strangers = tokens?.unknownServers(names) ?? (oauth ? unknownScopeServers(oauth, names) : []);
      if (strangers.length > 0) {
        throw new UsageError(
          `serve: ${tokensFile ?? oauthFile}: ${tokens ? 'tokens' : 'scopes'} name servers not in the folder: ${strangers.join(', ')}`,
        );
      }
      return loaded;
    };
    const served = load();
    const names = [...served.keys()];
    const engine = await engineReady(log, values.engine);
    // hintbox in a container: what sandboxes get must be at the same path on the host (exit 2).
    const checkPaths = (profiles: Map<string, ServedProfile>): Promise<void> =>
      engine.checkBindSources(
        sandboxBindSources(
          [...profiles.values()].map((s) => s.profile),
          hintboxEnvironment(),
        ),
      );
    await checkPaths(served);
    const trail = openAuditTrail(log);
    const metrics = await ServeMetrics.create({ servers: names, sessions: () => server.sessions, lag: trail, log });
    metrics.pinApproved(served);
    const audit = metrics.meter(trail.audit); // every record is counted as it is recorded
    // Refusals a client can cause at will: written down within a budget per address, all counted.
    const denials = new DenialRecorder({ audit, log });
    // The console before the servers: a port that is taken stops serve here.
    const hub = withConsole ? await startConsole('serve', consolePort) : undefined;
    const servers = new ServedServers({ served, engine, audit, log, ...(hub ? { console: hub } : {}) });
    const credentials: Authenticator | undefined =
      tokens ??
      (oauth ? new OAuthResourceServer({ config: oauth, servers: () => servers.names, combined }) : undefined);
    // At /mcp, the servers the credentials allow (each as at its own path).
    const auth = credentials && combined ? combinedAuthenticator(credentials, () => servers.names) : credentials;
    const scrapers = metricsAccess(credentials);
    const server = new McpHttpServer({
      servers: names,
      ...(combined ? { combined } : {}),
      ...(auth ? { auth } : {}),
      openSession: (name, access) => servers.openClient(name, access),
      denials,
      metrics: (req, res) => metrics.handle(req, res, scrapers, denials),
      site,
      refused: (refusal) => metrics.refusedRequest(refusal),
      ready: (verified) => servers.ready(verified),
      ...(idleTimeoutMs !== undefined ? { idleTimeoutMs } : {}),
      ...(maxSessionsPerCaller !== undefined ? { maxSessionsPerCaller } : {}),
      log,
    });

    /** SIGHUP: the folder loaded again; a folder with a problem changes nothing. One at a time. */
    let reloading = Promise.resolve();
    const reload = async (): Promise<void> => {
      let next: Map<string, ServedProfile>;
      try {
        next = load();
        await checkPaths(next);
      } catch (error) {
        log.error(
          `SIGHUP: nothing reloaded, the folder has problems (serving on as before):\n${(error as Error).message}`,
        );
        return;
      }
      metrics.pinApproved(next);
      const now = servers.names.filter((name) => next.has(name));
      server.setServers(now); // a removed server's path is 404 from now on
      const changed = [...servers.names].filter((name) => !now.includes(name) || servers.changedIn(next, name));
      await server.endClientsOf(changed, 'its profile or lock file changed (SIGHUP)');
      const reloaded = await servers.reload(next);
      server.setServers(servers.names);
      const list = (names: string[]) => (names.length > 0 ? names.join(', ') : 'none');
      log.info(
        `SIGHUP: reloaded ${folder}: added ${list(reloaded.added)}; changed ${list(reloaded.changed)}; removed ${list(reloaded.removed)}; unchanged ${reloaded.unchanged.length}`,
      );
    };

    const alive = setInterval(() => undefined, 1 << 30);
    try {
      const bound = await server.listen(port, host);
      log.info(
        `serving ${names.map((n) => `/mcp/${n}`).join(', ')} on http://${hostText(host)}:${bound}${auth ? ` (${auth.description})` : ''}`,
      );
      servers.start();
      onReload = () => void (reloading = reloading.then(reload));
      if (reloadAsked) onReload();
      const signal = await new Promise<string>((resolve) => {
        for (const name of ['SIGTERM', 'SIGINT'] as const) process.once(name, () => resolve(name));
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
      await servers.close();
      await hub?.close();
      denials.close();
      await trail.close();
      return signal === 'failure' ? 1 : 0;
    } finally {
      clearInterval(alive);
      process.off('SIGHUP', hangUp);
      await closeEngine(engine, log); // after the sessions: the open network they shared
    }
  },
};

function portArg(value: unknown): number {
  if (value === undefined) return 8931;
  const port = Number(value);
  if (typeof value !== 'string' || !/^\d+$/.test(value) || port > 65535) {
    throw new UsageError(`serve: --port must be a number from 0 to 65535 (got ${JSON.stringify(value)})`);
  }
  return port;
}

/** `--allowed-host` and `--allowed-origin`, each checked (bad usage names the one that is wrong). */
function siteArg(hosts: unknown, origins: unknown): RequestSite {
  const list = (value: unknown): string[] => (Array.isArray(value) ? (value as string[]) : []);
  const check = (option: string, values: string[], parse: (text: string) => unknown): void => {
    for (const value of values) {
      try {
        parse(value);
      } catch (error) {
        throw new UsageError(`serve: --${option} ${(error as Error).message}`);
      }
    }
  };
  check('allowed-host', list(hosts), parseAllowedHost);
  check('allowed-origin', list(origins), parseAllowedOrigin);
  return new RequestSite({ allowedHosts: list(hosts), allowedOrigins: list(origins) });
}

function secondsArg(name: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (typeof value !== 'string' || !/^\d+(\.\d+)?$/.test(value) || seconds <= 0 || seconds > 7 * 86_400) {
    throw new UsageError(
      `serve: --${name} must be a number of seconds above 0 and at most 604800 (got ${JSON.stringify(value)})`,
    );
  }
  return seconds * 1000;
}

/** --max-sessions: a whole number from 1 to 100000. */
function maxSessionsArg(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const max = Number(value);
  if (typeof value !== 'string' || !/^\d+$/.test(value) || max < 1 || max > 100_000) {
    throw new UsageError(
      `serve: --max-sessions must be a whole number from 1 to 100000 (got ${JSON.stringify(value)})`,
    );
  }
  return max;
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
