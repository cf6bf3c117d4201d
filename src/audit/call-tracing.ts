import type { Logger } from '../util/logger.js';
import type { AuditEvent, AuditIntent, AuditLog, AuditOutcomeReport } from './audit-record.js';
import type { CallSpan, CallSpans } from './call-spans.js';

/**
 * Each call as an OpenTelemetry span, for the platform's observability (the audit log stays the
 * record): an {@link AuditLog} that passes every record on and, beside it, starts a span at the
 * call's intent and ends it at its outcome. The OpenTelemetry SDK is imported only when tracing
 * is on (`otlp-call-spans.ts`), so a hintbox without it starts as fast as before.
 */

/** The spans exported over OTLP/HTTP, configured by the standard `OTEL_EXPORTER_OTLP_*` variables. */
export async function loadOtlpCallSpans(): Promise<CallSpans> {
  const { otlpCallSpans } = await import('./otlp-call-spans.js');
  return otlpCallSpans();
}

export class TracedAuditLog implements AuditLog {
  private readonly spans = new Map<string, CallSpan>();

  /** `spans`: loading (the first calls wait for it only after their intent is written). */
  constructor(
    private readonly inner: AuditLog,
    private readonly tracer: Promise<CallSpans | undefined>,
    private readonly log: Logger,
  ) {
    tracer.catch((error: Error) => log.error(`tracing is off: the OpenTelemetry SDK did not start: ${error.message}`));
  }

  async recordIntent(intent: AuditIntent): Promise<string> {
    const startMs = Date.now();
    const id = await this.inner.recordIntent(intent);
    // Chained on the same promise as the outcome's: a span is always started before it ends.
    void this.tracer.then(
      (tracer) => tracer && this.spans.set(id, tracer.start(id, intent, startMs)),
      () => undefined,
    );
    return id;
  }

  recordOutcome(id: string, report: AuditOutcomeReport): Promise<void> {
    void this.tracer.then(
      () => {
        this.spans.get(id)?.end(report);
        this.spans.delete(id);
      },
      () => undefined,
    );
    return this.inner.recordOutcome(id, report);
  }

  recordEvent(event: AuditEvent): void {
    this.inner.recordEvent?.(event);
  }

  /** Ends the spans of calls still in flight (hintbox stops) and sends what is batched. */
  async shutdown(): Promise<void> {
    const tracer = await this.tracer.catch(() => undefined);
    for (const span of this.spans.values()) span.end({ outcome: 'cancelled', detail: 'hintbox stopped' });
    this.spans.clear();
    await tracer?.shutdown().catch((error: Error) => this.log.warn(`could not send the last spans: ${error.message}`));
  }
}
