import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { describeRejected, listTools, type RejectedTool } from '../catalog/discover-tools.js';
import type { Upstream } from '../gateway/gateway.js';
import {
  grantKey,
  planSandboxes,
  sandboxId,
  strictestGrant,
  type Ceiling,
  type SandboxPlan,
} from '../policy/plan-sandboxes.js';
import type { Logger } from '../util/logger.js';
import type { KnownTools } from '../catalog/known-tools.js';
import type { HeldUpstream, SessionSandboxes } from './session-sandboxes.js';

/**
 * The steps of a session's start that are about sandboxes and tools, apart from the session
 * that orders them: discovery (and re-listing: the same listing), the early start of the
 * classes a start can guess, and the start of the planned ones.
 */

/** The tools a server lists, validated one by one; a malformed one is logged and left out. */
export async function listValidTools(
  from: Upstream,
  timeoutMs: number,
  log: Logger,
): Promise<{ tools: Tool[]; rejected: RejectedTool[] }> {
  const { tools, rejected } = await listTools(from.client, timeoutMs);
  for (const r of rejected) log.warn(describeRejected(r));
  return { tools, rejected };
}

/** A sandbox started before discovery answered (held at its gate), and the rights it has. */
export interface EarlyStart {
  key: string;
  held: Promise<HeldUpstream>;
}

/**
 * Creates and starts, in parallel with discovery, the sandboxes that the tools this image
 * listed at its last start plan under the current ceiling (on a first start or a changed
 * image: the ceiling's class), each held at its gate: none runs anything of the image until
 * discovery has answered and this start's plan has the same class with the same rights.
 */
export async function startEarly(options: {
  sandboxes: SessionSandboxes;
  knownTools: KnownTools | undefined;
  server: string;
  imageId: string;
  ceiling: Ceiling;
  discoveryId: string;
  log: Logger;
}): Promise<Map<string, EarlyStart>> {
  const { sandboxes, knownTools, log } = options;
  const early = new Map<string, EarlyStart>();
  if (!knownTools) return early;
  const known = await knownTools.read(options.server, options.imageId).catch(() => undefined);
  // Nothing known of this image yet: guess the class an unannotated tool gets (the ceiling's),
  // which is also where writing tools land when the ceiling has no network. Held, a wrong
  // guess costs a container start and nothing else.
  const claims = known ?? [{ name: '(a tool without annotations)' }];
  for (const sandbox of planSandboxes(claims, options.ceiling).sandboxes) {
    if (sandbox.id === options.discoveryId) continue;
    sandboxes.grants.set(sandbox.id, sandbox);
    const held = sandboxes.hold(sandbox.id);
    held.catch(() => undefined); // awaited (or dropped) once discovery has answered
    early.set(sandbox.id, { key: grantKey(sandbox), held });
  }
  if (early.size) {
    log.info(
      `starting ${[...early.keys()].join(', ')} early (held at the gate until discovery answers${known ? '' : "; a guess: nothing is known of this image's tools yet"})`,
    );
  }
  return early;
}

/**
 * Starts every planned sandbox not up yet, in parallel: a class that can change something only
 * to its gate (held until a call is allowed into it), the others released. Early starts the
 * plan does not have, or gives other rights, are removed first (they never ran).
 */
export async function startPlanned(options: {
  sandboxes: SessionSandboxes;
  plan: SandboxPlan;
  early: Map<string, EarlyStart>;
  log: Logger;
}): Promise<void> {
  const { sandboxes, plan, early, log } = options;
  const planned = new Map(plan.sandboxes.map((s) => [s.id, grantKey(s)]));
  for (const [id, start] of early) {
    if (planned.get(id) === start.key) continue;
    early.delete(id);
    if (!planned.has(id)) sandboxes.grants.delete(id);
    log.info(`sandbox ${id} was started early but this start's tools do not plan it: removing it (it never ran)`);
    void start.held.then((h) => h.remove()).catch(() => undefined);
  }
  const toStart = plan.sandboxes.filter((s) => !sandboxes.isStarted(s.id) && !early.has(s.id));
  if (toStart.length) {
    log.info(`starting ${toStart.length} more sandbox(es) in parallel: ${toStart.map((s) => s.id).join(', ')}`);
  }
  // Each marked as under way, so that a call into the class meanwhile waits for it.
  const results = await Promise.allSettled([
    ...toStart.map((s) =>
      sandboxes.starting(
        s.id,
        (async () =>
          sandboxes.holdsUntilCalled(s)
            ? sandboxes.keepHeld(s.id, await sandboxes.hold(s.id))
            : sandboxes.keepStarted(s.id, await (await sandboxes.hold(s.id)).release()))(),
      ),
    ),
    ...[...early].map(([id, start]) =>
      sandboxes.starting(
        id,
        (async () => {
          const held = await start.held;
          const grant = sandboxes.grants.get(id);
          if (grant && sandboxes.holdsUntilCalled(grant)) sandboxes.keepHeld(id, held);
          else sandboxes.keepStarted(id, await held.release());
        })(),
      ),
    ),
  ]);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  const waiting = sandboxes.heldIds();
  if (waiting.length) {
    log.info(`${waiting.join(', ')}: held at the gate until a call is allowed into it (frozen between calls)`);
  }
}

/**
 * Starts every planned sandbox: awaited, or (`background`: a cold start, verified once discovery
 * has answered) left to run, a failure logged — a call waits for its own sandbox only (its start
 * under way, or a new one if this one failed). What comes up after the session closed goes too.
 */
export async function startPlannedSandboxes(options: {
  sandboxes: SessionSandboxes;
  plan: SandboxPlan;
  early: Map<string, EarlyStart>;
  log: Logger;
  server: string;
  background: boolean;
}): Promise<void> {
  const { sandboxes, log } = options;
  const planned = startPlanned(options).then(async () => {
    // Closed meanwhile (a cold start's run that ended): what came up after goes too.
    if (sandboxes.isClosed) await sandboxes.closeKept();
  });
  if (!options.background) {
    await planned;
    sandboxes.assertOpen();
    return;
  }
  sandboxes.track(planned);
  planned.catch((error: Error) =>
    log.error(`a planned sandbox of ${options.server} did not start: ${error.message}; a call into it starts it again`),
  );
  sandboxes.assertOpen();
}

/**
 * Starts discovery in the strictest sandbox of the ceiling (read-only mounts, no network), and
 * with `startAll` (every planned sandbox is started next) the classes `startEarly` guesses, held.
 */
export async function startDiscovery(options: {
  startAll: boolean;
  sandboxes: SessionSandboxes;
  knownTools: KnownTools | undefined;
  server: string;
  imageId: string;
  ceiling: Ceiling;
  log: Logger;
}): Promise<{ discoveryId: string; discovery: Upstream; early: Map<string, EarlyStart> }> {
  const { sandboxes, log } = options;
  const strictest = strictestGrant(options.ceiling);
  const discoveryId = sandboxId(strictest);
  sandboxes.grants.set(discoveryId, strictest);
  const early = options.startAll ? await startEarly({ ...options, discoveryId }) : new Map<string, EarlyStart>();
  log.info(`discovering tools in the strictest sandbox (${discoveryId}: read-only mounts, no network)`);
  const discovery = await sandboxes.start(discoveryId);
  sandboxes.keepStarted(discoveryId, discovery);
  return { discoveryId, discovery, early };
}
