import type { AuditIntent, AuditOutcomeReport } from './audit-record.js';

/** What call tracing (`call-tracing.ts`) asks of the OpenTelemetry side (`otlp-call-spans.ts`). */

/** One call's span, as the SDK side gives it. */
export interface CallSpan {
  end(report: AuditOutcomeReport): void;
}

/** Starts call spans and flushes them (`otlp-call-spans.ts`). */
export interface CallSpans {
  start(id: string, intent: AuditIntent, startMs: number): CallSpan;
  /** Sends what is still batched and stops. */
  shutdown(): Promise<void>;
}
