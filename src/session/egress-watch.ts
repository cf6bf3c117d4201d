import type { EgressRequest } from '../engine/sandbox-engine.js';
import type { AuditLog } from '../audit/audit-record.js';
import type { EgressHost } from '../policy/egress-hosts.js';
import { egressViolation } from '../policy/egress-violation.js';
import type { SandboxPlan } from '../policy/plan-sandboxes.js';
import { EventBudget } from '../util/event-budget.js';
import type { Logger } from '../util/logger.js';

/** When no call ran while the proxy had a request: how far either side to look for the one that made it. */
const EGRESS_SLACK_MS = 250;
/** Refused requests written to the audit trail per sandbox: a burst, then so many a second (the rest counted). */
const EGRESS_RECORDS_BURST = 100;
const EGRESS_RECORDS_PER_SECOND = 10;

/**
 * What a session does with a request through a sandbox's egress proxy: a refused one is audited
 * with the tools in flight, the host and the port; one a closed-world tool made outside the
 * server's backend is a hint violation, handed to `violated` (the server is untrusted from
 * then on). Returns the handler the sandboxes call.
 */
export function egressWatch(options: {
  server: string;
  session: string;
  /** The server's backend (`network.backend`): what its closed-world tools may reach. */
  backend: readonly EgressHost[];
  /** The tools of the calls in a sandbox that ran at some time in `[from, to]`, over every gateway. */
  toolsDuring: (sandbox: string, from: number, to: number) => string[];
  plan: () => SandboxPlan;
  violated: (sandboxId: string, text: string) => void;
  log: Logger;
  audit?: Pick<AuditLog, 'recordEvent'>;
}): (sandboxId: string, request: EgressRequest) => void {
  const { log, audit } = options;
  /** Per sandbox: how many refusals are written down (a server can make them by the thousand). */
  const budgets = new Map<string, EventBudget>();
  return (sandboxId, request) => {
    // The proxy logs a request when it is done with it, often after the call that made it was
    // answered: the calls are those that ran while the proxy had it; failing any, those just around it.
    const now = Date.now();
    const during = (slack: number): string[] => [
      ...new Set(options.toolsDuring(sandboxId, (request.startedAt ?? now) - slack, (request.endedAt ?? now) + slack)),
    ];
    const exact = during(0);
    const inFlight = exact.length > 0 ? exact : during(EGRESS_SLACK_MS);
    const plan = options.plan();
    const planned = plan.sandboxes.find((s) => s.id === sandboxId)?.tools ?? [];
    const target = `${request.method} ${request.host}:${request.port}`;
    const budget = budgets.get(sandboxId) ?? new EventBudget(EGRESS_RECORDS_BURST, EGRESS_RECORDS_PER_SECOND);
    budgets.set(sandboxId, budget);
    const take = request.allowed ? undefined : budget.take();
    if (take?.record) {
      const more = take.skipped ? ` (and ${take.skipped} more refused, not written down)` : '';
      log.warn(
        `egress refused: sandbox ${sandboxId} (${inFlight.join(', ') || 'no call in flight'}) asked for ${target}${more}`,
      );
      audit?.recordEvent?.({
        type: 'egress.denied',
        session: options.session,
        server: options.server,
        tool: inFlight.join(', ') || null,
        sandbox: sandboxId,
        host: request.host,
        port: request.port,
        method: request.method,
        ...(take.skipped ? { skipped: take.skipped } : {}),
      });
    } else if (request.allowed) {
      log.debug(`egress: sandbox ${sandboxId} reached ${target}`);
    }
    const text = egressViolation({
      request,
      tools: inFlight.length ? inFlight : planned,
      closedWorld: (tool) => plan.tools.find((t) => t.name === tool)?.effective.openWorldHint === false,
      backend: options.backend,
    });
    if (text) options.violated(sandboxId, text);
  };
}
