import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { DenialSink } from '../audit/denial-recorder.js';
import { monotonicMs } from '../util/clock.js';
import type { Logger } from '../util/logger.js';
import type { SiteRefusal } from '../util/request-site.js';
import {
  AUDIT_METRIC_LABELS,
  AUDIT_METRICS,
  AuditMetrics,
  type AuditMetric,
  type MetricUpdate,
} from './audit-metrics.js';
import type { Authenticator, Denial } from './authenticator.js';
import { BearerTokens } from './bearer-tokens.js';
import { MeteredAuditLog } from './metered-audit-log.js';
import { isLoopbackHost } from './serve-address.js';
import type { ServedProfile } from './profile-folder.js';
import { callerFields, callerText } from '../util/caller-identity.js';

/**
 * `GET /metrics` of `hintbox serve`, in Prometheus's text format (prom-client, a registry of
 * its own): the metrics derived from the audit trail (`audit-metrics.ts`), a few read when
 * scraped (client sessions, how far the audit trail is behind), and Node's process metrics.
 *
 * Who may read them: metrics name servers, tools and callers' outcomes, so with bearer tokens a
 * scrape needs a token the tokens file allows (`metrics: true`); a refusal is audited
 * (`auth.denied`, server `/metrics`) as any other. Without tokens serve listens on loopback only,
 * and so are they.
 */

/** Who may read `/metrics`: a request, checked. */
export type MetricsAccess = (req: IncomingMessage) => { allowed: true } | ({ allowed: false } & Denial);

/**
 * Without an authenticator, anyone (serve listens on loopback then); with bearer tokens, a
 * token with `metrics` (true or only); under another authenticator (OAuth: no scope gives
 * metrics yet), a client on this machine only, and not through a proxy on it: a request that
 * says it was forwarded (`Forwarded`, `X-Forwarded-For`, `X-Real-IP`) came from elsewhere.
 */
export function metricsAccess(auth: Authenticator | undefined): MetricsAccess {
  if (auth === undefined) return () => ({ allowed: true });
  if (auth instanceof BearerTokens) return (req) => auth.checkMetrics(req.headers.authorization);
  const refused = (why: string) => ({ allowed: false as const, status: 403 as const, reason: why, caller: null });
  return (req) => {
    if (!isLoopbackAddress(req.socket.remoteAddress)) {
      return refused(`/metrics only from this machine under ${auth.description}`);
    }
    const forwarded = ['forwarded', 'x-forwarded-for', 'x-real-ip'].some((name) => req.headers[name] !== undefined);
    return forwarded ? refused('/metrics not through a proxy (the request says it was forwarded)') : { allowed: true };
  };
}

/** A peer's address on this machine (IPv4-mapped IPv6 included). */
function isLoopbackAddress(address: string | undefined): boolean {
  return address !== undefined && isLoopbackHost(address.replace(/^::ffff:/, ''));
}

/** How far the audit trail is behind, read when scraped. */
export interface AuditLag {
  /** Outcomes of ended calls the log could not write yet (kept, and retried). */
  unwrittenOutcomes(): number;
  /** Seconds since the Postgres sink last caught up with the log; undefined without a sink. */
  sinkLagSeconds(): number | undefined;
}

export interface ServeMetricsOptions {
  /** The servers (profile names): each has a sandboxes gauge from the start. */
  servers: readonly string[];
  /** Client sessions open (the HTTP endpoint's), read when scraped. */
  sessions(): number;
  lag: AuditLag;
  log: Logger;
  /** Monotonic milliseconds. Default: the process's. */
  now?: () => number;
}

/** The call latencies a histogram tells apart, in seconds: from a fast read to a long build. */
const CALL_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
/** How often the event loop's delay is sampled for nodejs_eventloop_lag_* (ms). */
const EVENT_LOOP_SAMPLE_MS = 100;

type AnyMetric = Counter | Gauge | Histogram;

export class ServeMetrics {
  readonly derive: AuditMetrics;
  private readonly now: () => number;

  private constructor(
    private readonly registry: Registry,
    private readonly metrics: Record<AuditMetric, AnyMetric>,
    /** Requests refused for their `Host` or `Origin`: not audited (a page may send them by the thousand), counted here. */
    private readonly siteRefusals: Counter,
    private readonly options: ServeMetricsOptions,
  ) {
    this.now = options.now ?? monotonicMs;
    this.derive = new AuditMetrics({ now: this.now });
  }

  /**
   * prom-client is loaded only by serve (`hintbox run` never evaluates it). Its CommonJS exports
   * are taken from `default`: in a chunk of the split bundle, that is all an import() of it has.
   */
  static async create(options: ServeMetricsOptions): Promise<ServeMetrics> {
    const { default: prom } = await import('prom-client');
    const registry = new prom.Registry();
    const help: Record<AuditMetric, string> = {
      calls: 'Calls that ended, by outcome (not-run: denied or blocked), as the audit log records them',
      callSeconds: 'Seconds from the intent to the outcome of calls that were forwarded to a sandbox',
      refusals: 'Calls hintbox refused (denied by a rule, a person, a timeout; blocked by a pin)',
      confirmations: 'Confirmations a person answered (or that timed out), by answer',
      authDenials: 'Requests refused before any session saw them (401, 403); server /metrics for a scrape',
      violations: 'Hints a sandbox was seen to break, by hint',
      sandboxes: 'Sandboxes whose server runs (released from their gate, not yet stopped)',
      serverRequests: 'Requests of servers to clients (sampling, elicitation, roots), by decision',
    };
    const make = (key: AuditMetric): AnyMetric => {
      const config = {
        name: AUDIT_METRICS[key],
        help: help[key],
        labelNames: AUDIT_METRIC_LABELS[key],
        registers: [registry],
      };
      if (key === 'callSeconds') return new prom.Histogram({ ...config, buckets: CALL_SECONDS_BUCKETS });
      if (key === 'sandboxes') return new prom.Gauge(config);
      return new prom.Counter(config);
    };
    const metrics = Object.fromEntries(
      (Object.keys(AUDIT_METRICS) as AuditMetric[]).map((key) => [key, make(key)]),
    ) as Record<AuditMetric, AnyMetric>;
    for (const server of options.servers) (metrics.sandboxes as Gauge).set({ server }, 0);

    new prom.Gauge({
      name: 'hintbox_client_sessions',
      help: 'MCP sessions of clients open',
      registers: [registry],
      collect() {
        this.set(options.sessions());
      },
    });
    new prom.Gauge({
      name: 'hintbox_audit_unwritten_outcomes',
      help: 'Outcomes of ended calls the audit log could not write yet (kept and retried)',
      registers: [registry],
      collect() {
        this.set(options.lag.unwrittenOutcomes());
      },
    });
    if (options.lag.sinkLagSeconds() !== undefined) {
      new prom.Gauge({
        name: 'hintbox_audit_sink_lag_seconds',
        help: 'Seconds since the Postgres sink last caught up with the audit log: every older record is in Postgres',
        registers: [registry],
        collect() {
          this.set(options.lag.sinkLagSeconds() ?? 0);
        },
      });
    }
    const siteRefusals = new prom.Counter({
      name: 'hintbox_http_refused_total',
      help: 'Requests refused before anything was read: another Host (421, DNS rebinding) or a page of another site (403)',
      labelNames: ['reason'],
      registers: [registry],
    });
    for (const reason of ['host', 'origin'] satisfies SiteRefusal['kind'][]) siteRefusals.inc({ reason }, 0);
    // The event loop's delay sampled every 100 ms, not prom-client's 10: its timer woke serve
    // 100 times a second, idle or not, for a figure a scrape reads every few seconds.
    prom.collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    return new ServeMetrics(registry, metrics, siteRefusals, options);
  }

  /** Labels by name the tools the profiles' lock files approve (as loaded: at start and on each reload). */
  pinApproved(served: ReadonlyMap<string, ServedProfile>): void {
    for (const [name, entry] of served) this.derive.pin(name, Object.keys(entry.approvals.locked?.tools ?? {}));
  }

  /** The audit log `log` with every record also counted here. */
  meter(log: ConstructorParameters<typeof MeteredAuditLog>[0]): MeteredAuditLog {
    return new MeteredAuditLog(log, this.derive, (updates) => this.apply(updates), this.now);
  }

  /** Counts a request refused for its `Host` or `Origin`. */
  refusedRequest(refusal: SiteRefusal): void {
    this.siteRefusals.inc({ reason: refusal.kind });
  }

  apply(updates: readonly MetricUpdate[]): void {
    for (const { metric, labels, value } of updates) {
      const target = this.metrics[metric];
      if ('observe' in target) target.observe(labels, value);
      else target.inc(labels, value);
    }
  }

  /**
   * Answers `GET /metrics`; a refused request goes to `denials` (written down within its budget,
   * counted in any case) as `auth.denied` with server `/metrics`.
   */
  async handle(req: IncomingMessage, res: ServerResponse, access: MetricsAccess, denials: DenialSink): Promise<void> {
    const check = access(req);
    if (!check.allowed) {
      const remoteAddress = req.socket.remoteAddress ?? null;
      const { status, reason, caller } = check;
      const who = { caller: null, ...callerFields(caller) };
      denials.deny({
        remoteAddress,
        event: { type: 'auth.denied', session: null, server: '/metrics', status, reason, ...who, remoteAddress },
        message: `serve: /metrics: ${status} for ${remoteAddress ?? 'an unknown address'}: ${reason}`,
        fields: { path: '/metrics', status, remoteAddress, caller: caller ? callerText(caller) : null },
      });
      const headers: Record<string, string> = status === 401 ? { 'WWW-Authenticate': 'Bearer realm="hintbox"' } : {};
      res
        .writeHead(status, { 'Content-Type': 'text/plain', ...headers })
        .end(status === 401 ? 'unauthorized\n' : 'forbidden\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain' }).end('method not allowed\n');
      return;
    }
    const text = await this.registry.metrics();
    res.writeHead(200, { 'Content-Type': this.registry.contentType }).end(req.method === 'HEAD' ? undefined : text);
  }
}
