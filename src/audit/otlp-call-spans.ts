import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { VERSION } from '../version.js';
import type { AuditIntent } from './audit-record.js';
import type { CallSpans } from './call-spans.js';

/**
 * The OpenTelemetry side of call tracing, loaded only when it is on: a tracer provider with a
 * batching OTLP/HTTP exporter (JSON), which reads its endpoint, headers and timeouts from the
 * standard `OTEL_EXPORTER_OTLP_*` variables. A call's span is a child of the client's
 * `traceparent` when it sent one; its attributes say what hintbox decided, who decided, the
 * sandbox and the outcome, never the call's arguments.
 */
export function otlpCallSpans(): CallSpans {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: 'hintbox', [ATTR_SERVICE_VERSION]: VERSION }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  const tracer = provider.getTracer('hintbox', VERSION);
  return {
    start(id, intent, startMs) {
      const span = tracer.startSpan(
        `tools/call ${intent.tool}`,
        {
          kind: SpanKind.SERVER,
          startTime: startMs,
          attributes: {
            'mcp.method.name': 'tools/call',
            'gen_ai.operation.name': 'execute_tool',
            'gen_ai.tool.name': intent.tool,
            'hintbox.server': intent.server,
            'hintbox.session': intent.session,
            'hintbox.sandbox': intent.sandbox ?? '',
            'hintbox.decision': intent.decision,
            'hintbox.decided_by': intent.decidedBy,
            'hintbox.audit_id': id,
          },
        },
        parentOf(intent),
      );
      return {
        end(report) {
          span.setAttributes({
            'hintbox.outcome': report.outcome,
            'hintbox.attempts': report.attempts ?? 1,
            'hintbox.duration_ms': Date.now() - startMs,
            ...(report.hintViolation ? { 'hintbox.hint_violation': report.hintViolation } : {}),
          });
          const failed = report.outcome === 'error' || report.outcome === 'sandbox-died';
          span.setStatus({ code: failed ? SpanStatusCode.ERROR : SpanStatusCode.OK });
          span.end();
        },
      };
    },
    shutdown: () => provider.shutdown(),
  };
}

/** The client's span, from its `traceparent` (checked by the gateway), as a remote parent. */
function parentOf(intent: AuditIntent): Context {
  const parts = intent.traceparent?.split('-');
  if (!parts || parts.length !== 4) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: parts[1]!,
    spanId: parts[2]!,
    traceFlags: parseInt(parts[3]!, 16) & 1,
    isRemote: true,
  });
}
