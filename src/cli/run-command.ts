import { NdjsonTransport } from '../mcp/ndjson-transport.js';
import { parseTagFilter, TagFilterError } from '../policy/tool-tags.js';
import { UsageError } from '../util/hintbox-error.js';
import type { HintboxSession } from '../session/hintbox-session.js';
import { approvalsOf, knownTools, openAuditTrail, openSession } from '../session/session-setup.js';
import { newSessionId } from '../util/session-identity.js';
import { idleCollection } from '../util/idle-collection.js';
import { cliLog, closeEngine, consolePortArg, engineReady, profileArg, startConsole } from './common.js';
import type { CommandSpec } from './command-spec.js';
import type { HintboxConsole } from '../console/console-server.js';
import { readSharedConsole, sharedApprovalsOf } from '../console/shared-console.js';
import { hintboxEnvironment } from '../config/environment.js';

const HELP = `Usage: hintbox run <profile> [--tags a,b] [--rebuild] [--console [--console-port PORT]] [--engine KIND]

Serves the profile's MCP server on stdio. hintbox starts the server in the strictest sandbox
(read-only mounts, no network) to list its tools, plans one sandbox per class of tools from
their annotations and the profile's ceiling, starts them in parallel, and routes each
tools/call to the sandbox of its tool. The classes the same image's tools planned last time
(at a first start: the profile's widest class) are started alongside discovery, held at
hintbox's gate (nothing of the image runs) until this start's tools confirm them; the others
are removed. The log goes to stderr; stdout is the MCP stream. A call not answered within
the profile's timeouts.call (default 600 s; progress notifications do not extend it) is
cancelled and answered with a timeout error.

With approved tools in the lock file, initialize and tools/list are answered at once from it
(a cold start) while all of the above runs in the background; every call waits until the
running server is verified against the lock file, and is routed by what it lists. A server
that cannot be verified ends the run (exit 1); waiting calls get an error (the reason is in the log).

When the client disconnects (stdin closes), or on SIGINT/SIGTERM/SIGHUP, every container of
the session is removed. Containers of a run killed with SIGKILL are removed by the next
hintbox start.

In an MCP client's config: the entry "hintbox install <profile>" prints for your client
(--client claude-desktop, claude-code, vscode or cursor): this hintbox's bin and the profile by
absolute paths, and the variables the profile reads with their values at install.

Each call is decided before it is forwarded: an untrusted server's calls, and calls that may
write, need a person's confirmation (MCP elicitation); a trusted server's read-only tools that
its sandbox enforces run without asking. Tool definitions are pinned: a changed (or, for an
untrusted server, a never approved) tool is hidden and refused until "hintbox approve"
writes it into the lock file beside the profile (<profile>.lock.json), which the run reads and
never writes. A tool whose hints only became stricter is served (and the change audited).
The profile, its lock file and what builds the server must have one name each (no hard link):
one with a second name is refused before anything starts (a sandbox could write that name).
Every call is recorded in the audit log ("hintbox audit"): its intent is appended before the
call is forwarded (a call whose intent cannot be written is refused), its outcome after. The
log is a hash chain of JSON Lines files of this process in HINTBOX_AUDIT_DIR (default:
audit/ in HINTBOX_STATE_DIR, ~/.local/state/hintbox). With HINTBOX_DATABASE_URL the log is
also copied into that Postgres in the background (the log stays the record).

With a database section, each sandbox reaches Postgres through a Unix socket relay as a role
of its own whose privileges follow its tools' hints (read, append, write; capped by the
profile); a privilege error from Postgres is logged as a hint violation and makes the server
untrusted for the rest of the session. Roles are dropped on exit (see hintbox db prepare).

With --console (or approval.console: true in the profile), hintbox also serves a local web
console on 127.0.0.1 (a random port, or PORT) and prints its link on stderr: a page per
confirmation (the call, every argument, the dry run's diff, the sandbox it would run in) with
Approve and Decline, the audit trail with filters and its verification, and the tool
definitions waiting for approval (approving one writes the lock file, as hintbox approve does).
A client with URL-mode elicitation is sent the page's link; one with forms gets the form and
the link; one with neither gets a denial that carries the link, and the same call made again
after the page approved it (same arguments, within 5 minutes) runs once.
That console ends with the run. While "hintbox console" runs (the console that outlives the
runs), --console without --console-port sends the confirmations there instead: a client that
exits after each call is denied with the page's link, and the same call made again by a later
run, within 5 minutes of the person's answer, runs once.

Options:
  --tags a,b      serve only tools with one of these tags (profile tags; server claims if trusted)
  --rebuild       rebuild the server's image even when it looks current
  --console       start the console (--console-port PORT: on that port; default a random one)
  --engine KIND   docker or kubernetes: where the sandboxes run (default HINTBOX_ENGINE, else docker;
                  see docs/engines.md "On Kubernetes")
  -h, --help      this help`;

export const runCommand: CommandSpec = {
  help: HELP,
  options: {
    rebuild: { type: 'boolean' },
    tags: { type: 'string' },
    console: { type: 'boolean' },
    'console-port': { type: 'string' },
    engine: { type: 'string' },
  },
  async run({ positionals, values }) {
    const log = cliLog;
    const profile = profileArg('run', positionals);
    const tagFilter = typeof values.tags === 'string' ? tagFilterArg(values.tags) : undefined;
    const consolePort = consolePortArg('run', values['console-port']);
    const withConsole = values.console === true || consolePort !== undefined || profile.approval.console;
    const engine = await engineReady(log, values.engine);
    // A run ends when its client leaves, a signal comes or it fails; never because nothing
    // happens to be pending for a moment (a wait on an unref'd timer during discovery once let
    // hintbox exit 0 with its container left).
    const alive = setInterval(() => undefined, 1 << 30);
    try {
      return await serve();
    } finally {
      clearInterval(alive);
      // Also when the session never came up: what the engine kept for it (the open network) goes.
      await closeEngine(engine, log);
    }

    async function serve(): Promise<number> {
      // What a person approved: a malformed lock file stops the run before anything starts
      // (audit log, sink, sandboxes). Then the audit trail: a run that cannot record its calls
      // does not start.
      const approvals = approvalsOf(profile, log);
      const trail = openAuditTrail(log);
      const { audit } = trail;
      // The console before anything of the server: a port that is taken stops the run here.
      let hub: HintboxConsole | undefined;
      // `hintbox console` running: the confirmations go there, and outlive this run.
      const { stateDir } = hintboxEnvironment();
      const shared = withConsole && consolePort === undefined ? readSharedConsole(stateDir) : undefined;
      try {
        hub = withConsole && !shared ? await startConsole('run', consolePort) : undefined;
      } catch (error) {
        await trail.close();
        throw error;
      }
      if (shared) log.info(`console: confirmations go to hintbox console at ${shared.origin} (pid ${shared.pid})`);
      else if (hub)
        log.info('console: it ends with this run; for a client that exits between calls, run "hintbox console" first');
      const consoleApprovals = shared ? sharedApprovalsOf(stateDir, shared.origin, shared.secret) : hub?.approvals;
      const sessionId = newSessionId();
      // A signal may arrive at any point of the start: it stops the start, which removes what it made.
      const starting = new AbortController();
      let stopping: Promise<void> | undefined;

      const opening = openSession({
        profile,
        engine,
        log,
        sessionId,
        audit,
        knownTools: knownTools(),
        locked: approvals.locked,
        signal: starting.signal,
        ...(values.rebuild ? { rebuildImages: true } : {}),
      });
      const stop = (why: string): Promise<void> =>
        (stopping ??= (async () => {
          log.info(`stopping session ${sessionId} (${why}): removing its containers`);
          starting.abort(new Error(`hintbox is stopping (${why})`));
          // A start cut short has removed what it made when it rejects; a session that is up
          // goes by its one teardown (its gateway, sandboxes, relays and database roles).
          await (await opening.catch(() => undefined))?.dispose();
          await closeEngine(engine, log);
          await hub?.close();
          await trail.close();
        })());
      // A failure of hintbox itself must not leave the sandboxes running: stop, then exit 1.
      process.once('uncaughtException', (error) => {
        log.error(`hintbox failed: ${error.stack ?? error.message}`);
        void stop('hintbox failed').finally(() => process.exit(1));
      });
      for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
        process.once(signal, () => {
          void stop(signal).finally(() => process.exit(0));
        });
      }

      let why = 'client disconnected';
      let session: HintboxSession;
      try {
        session = await opening;
      } catch (error) {
        // Stopped while it started (a signal): the stop ends the run.
        if (stopping) return stopping.then(() => 0);
        await hub?.close();
        await trail.close();
        throw error;
      }
      try {
        const gateway = await session.createGateway({
          approvals: approvals.read,
          audit,
          caller: null,
          ...(tagFilter ? { tagFilter } : {}),
          ...(consoleApprovals ? { console: consoleApprovals } : {}),
        });
        hub?.addDefinitions(session.definitionSource());
        const disconnected = new Promise<void>((resolve) => {
          process.stdin.once('end', resolve);
          process.stdin.once('close', resolve);
          gateway.server.onclose = () => resolve();
        });
        await gateway.connect(new NdjsonTransport(process.stdin, process.stdout, false));
        // At rest after each burst of calls: one collection once the client is quiet. Listening
        // only now: the transport's own listener is the one that set the client's stream flowing.
        const collection = idleCollection();
        if (collection) {
          process.stdin.on('data', () => collection.activity());
          void disconnected.then(() => collection.stop());
        }
        if (session.verified) {
          log.info(
            `serving the ${session.plan.tools.length} approved tool(s) of ${profile.name} from its lock file while the server is verified; calls wait for that (session ${sessionId})`,
          );
        }
        // A server that cannot be verified ends the run: its waiting calls get an error.
        let failed: Error | undefined;
        await Promise.race([
          disconnected,
          (session.verified ?? Promise.resolve()).then(
            () =>
              log.info(
                `serving ${session.plan.tools.length} tool(s) of ${profile.name} from ${session.plan.sandboxes.length} sandbox(es) ` +
                  `(${session.plan.sandboxes.map((s) => s.id).join(', ')}), session ${sessionId}`,
              ),
            (error: Error) => void (failed = error),
          ),
        ]);
        if (failed) {
          // The calls that waited are answered (their error is queued) before the gateway closes,
          // and the client's stream is let go so that the process can end.
          await new Promise((resolve) => setImmediate(resolve));
          why = 'the server could not be verified';
          process.stdin.destroy();
          throw failed;
        }
        await disconnected;
      } finally {
        // Also when setting up the gateway failed: nothing of the session outlives it.
        await stop(why);
      }
      return 0;
    }
  },
};

/** `--tags`: the pure parser's complaint is bad usage here. */
function tagFilterArg(text: string): string[] {
  try {
    return parseTagFilter(text);
  } catch (error) {
    if (error instanceof TagFilterError) throw new UsageError(`run: ${error.message}`);
    throw error;
  }
}
