import type { AuditEvent, AuditIntent, AuditOutcomeReport } from '../audit/audit-record.js';

/**
 * The metrics of `hintbox serve`, derived from the audit trail: what the call guard and the
 * sessions record (intents, outcomes, events) is what is counted, so a metric never says
 * something the audit log does not. Pure: this module turns records into {@link MetricUpdate}s;
 * `serve-metrics.ts` applies them to prom-client's registry.
 *
 * Label values are bounded, whatever servers and clients send: `server` is a profile's name (the
 * operator's); `tool` is a tool's name only when the profile's lock file pins it or it is among
 * the first {@link MAX_UNPINNED_TOOL_LABELS} other names recorded for that server (a call is
 * only recorded for a tool the session lists), else `other`; the rest are closed sets.
 */

/** The metrics derived from the audit trail, by the name `serve-metrics.ts` registers. */
export const AUDIT_METRICS = {
  /** Counter: calls that ended, by `server`, `tool`, `outcome` (`not-run`: denied or blocked). */
  calls: 'hintbox_calls_total',
  /** Histogram (seconds): from the intent to the outcome of a call that was forwarded, by `server`, `tool`. */
  callSeconds: 'hintbox_call_duration_seconds',
  /** Counter: calls refused, by `server`, `tool`, `decision` (denied, blocked), `decided_by`. */
  refusals: 'hintbox_calls_refused_total',
  /** Counter: confirmations answered, by `server`, `tool`, `answer` (approved, declined, timeout). */
  confirmations: 'hintbox_confirmations_total',
  /** Counter: requests refused before any session saw them, by `server` (or `/metrics`), `status`. */
  authDenials: 'hintbox_auth_denials_total',
  /** Counter: hints a sandbox was seen to break, by `server`, `hint`. */
  violations: 'hintbox_hint_violations_total',
  /** Gauge: sandboxes whose server runs (`sandbox.start` less `sandbox.stop`; not those held at their gate), by `server`. */
  sandboxes: 'hintbox_sandboxes',
  /** Counter: requests of servers to clients, by `server`, `method`, `decision`. */
  serverRequests: 'hintbox_server_requests_total',
} as const;

export type AuditMetric = keyof typeof AUDIT_METRICS;

/** The label names of each metric, in order. */
export const AUDIT_METRIC_LABELS: Readonly<Record<AuditMetric, readonly string[]>> = {
  calls: ['server', 'tool', 'outcome'],
  callSeconds: ['server', 'tool'],
  refusals: ['server', 'tool', 'decision', 'decided_by'],
  confirmations: ['server', 'tool', 'answer'],
  authDenials: ['server', 'status'],
  violations: ['server', 'hint'],
  sandboxes: ['server'],
  serverRequests: ['server', 'method', 'decision'],
};

/**
 * One change to one metric: a counter goes up by `value`, a gauge by `value` (down when
 * negative), a histogram observes `value`.
 */
export interface MetricUpdate {
  metric: AuditMetric;
  labels: Record<string, string>;
  value: number;
}

/** Distinct tool names per server labelled as they are besides the pinned ones; the rest are `other`. */
export const MAX_UNPINNED_TOOL_LABELS = 100;

export const OTHER = 'other';

/** The hints a violation can name (its text starts `<hint>:`); anything else is `other`. */
const HINTS = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'];

/** What a server may ask of a client; any other method is `other`. */
const SERVER_METHODS = ['sampling/createMessage', 'elicitation/create', 'roots/list'];

interface OpenCall {
  server: string;
  tool: string;
  startMs: number;
}

export interface AuditMetricsOptions {
  /** Monotonic milliseconds (durations). */
  now: () => number;
  /** Default {@link MAX_UNPINNED_TOOL_LABELS}. */
  maxUnpinnedTools?: number;
}

/** Derives metric updates from audit records, one record at a time. */
export class AuditMetrics {
  private readonly open = new Map<string, OpenCall>();
  private readonly pinned = new Map<string, Set<string>>();
  private readonly unpinned = new Map<string, Set<string>>();

  constructor(private readonly options: AuditMetricsOptions) {}

  /** Tools of `server` that are always labelled by name (the profile's lock file pins them). */
  pin(server: string, tools: Iterable<string>): void {
    const set = this.pinned.get(server) ?? new Set<string>();
    for (const tool of tools) set.add(tool);
    this.pinned.set(server, set);
  }

  /** A call's intent was recorded with `id`, at `startMs` (monotonic). */
  intent(id: string, intent: AuditIntent, startMs = this.options.now()): MetricUpdate[] {
    const tool = this.toolLabel(intent.server, intent.tool);
    this.open.set(id, { server: intent.server, tool, startMs });
    if (intent.decision === 'allowed') return [];
    const labels = { server: intent.server, tool, decision: intent.decision, decided_by: intent.decidedBy };
    return [{ metric: 'refusals', labels, value: 1 }];
  }

  /** The call `id` ended as `report` says, at `endMs` (monotonic). */
  outcome(id: string, report: AuditOutcomeReport, endMs = this.options.now()): MetricUpdate[] {
    const call = this.open.get(id);
    if (!call) return [];
    this.open.delete(id);
    const { server, tool } = call;
    const updates: MetricUpdate[] = [{ metric: 'calls', labels: { server, tool, outcome: report.outcome }, value: 1 }];
    if (report.outcome !== 'not-run') {
      const seconds = Math.max(0, endMs - call.startMs) / 1000;
      updates.push({ metric: 'callSeconds', labels: { server, tool }, value: seconds });
    }
    return updates;
  }

  event(event: AuditEvent): MetricUpdate[] {
    // A count of refusals left out of the log: each was counted when it happened.
    if (event.type === 'denials.skipped') return [];
    const { server } = event;
    switch (event.type) {
      case 'approval.answered':
        return [
          {
            metric: 'confirmations',
            labels: { server, tool: this.toolLabel(server, event.tool), answer: event.answer },
            value: 1,
          },
        ];
      case 'auth.denied':
        return [{ metric: 'authDenials', labels: { server, status: String(event.status) }, value: 1 }];
      case 'hint.violation': {
        const hint = HINTS.find((h) => event.violation.startsWith(`${h}:`)) ?? OTHER;
        return [{ metric: 'violations', labels: { server, hint }, value: 1 }];
      }
      case 'sandbox.start':
      case 'sandbox.stop':
        return [{ metric: 'sandboxes', labels: { server }, value: event.type === 'sandbox.start' ? 1 : -1 }];
      case 'server.request': {
        const method = SERVER_METHODS.includes(event.method) ? event.method : OTHER;
        return [{ metric: 'serverRequests', labels: { server, method, decision: event.decision }, value: 1 }];
      }
      default:
        return [];
    }
  }

  private toolLabel(server: string, tool: string): string {
    if (this.pinned.get(server)?.has(tool)) return tool;
    let seen = this.unpinned.get(server);
    if (!seen) this.unpinned.set(server, (seen = new Set()));
    if (seen.has(tool)) return tool;
    if (seen.size >= (this.options.maxUnpinnedTools ?? MAX_UNPINNED_TOOL_LABELS)) return OTHER;
    seen.add(tool);
    return tool;
  }
}
