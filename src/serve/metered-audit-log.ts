import {
  AuditRecordError,
  type AuditEvent,
  type AuditIntent,
  type AuditLog,
  type AuditOutcomeReport,
} from '../audit/audit-record.js';
import type { AuditMetrics, MetricUpdate } from './audit-metrics.js';

/**
 * The audit log as serve's sessions and HTTP endpoint write it: every record goes to the log
 * first, and what was recorded is counted ({@link AuditMetrics}). An intent the log refused is
 * not counted (the call is refused as well); an outcome the log keeps to write later is (the
 * call has ended).
 */
export class MeteredAuditLog implements AuditLog {
  constructor(
    private readonly log: AuditLog & { recordEvent(event: AuditEvent): void },
    private readonly metrics: AuditMetrics,
    private readonly apply: (updates: readonly MetricUpdate[]) => void,
    private readonly now: () => number,
  ) {}

  async recordIntent(intent: AuditIntent): Promise<string> {
    const startMs = this.now();
    const id = await this.log.recordIntent(intent);
    this.apply(this.metrics.intent(id, intent, startMs));
    return id;
  }

  async recordOutcome(id: string, report: AuditOutcomeReport): Promise<void> {
    const endMs = this.now();
    try {
      await this.log.recordOutcome(id, report);
    } catch (error) {
      if (!(error instanceof AuditRecordError)) this.apply(this.metrics.outcome(id, report, endMs));
      throw error;
    }
    this.apply(this.metrics.outcome(id, report, endMs));
  }

  recordEvent(event: AuditEvent): void {
    this.log.recordEvent(event);
    this.apply(this.metrics.event(event));
  }

  /** Counts an event not written down (a refusal over its budget: `denial-recorder.ts`). */
  countEvent(event: AuditEvent): void {
    this.apply(this.metrics.event(event));
  }
}
