import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { ensureTestImages, LIAR_IMAGE } from './support/docker.js';
import { runHintbox, sandboxFolder, writeProfile } from './support/hintbox-process.js';

/**
 * Calls as OpenTelemetry spans: hintbox run with OTEL_EXPORTER_OTLP_ENDPOINT set sends one span
 * per call to an OTLP/HTTP receiver of this test's own (JSON, as the exporter sends it), parented
 * on the client's `_meta.traceparent`, with the decision, who decided, the sandbox and the
 * outcome; the arguments never.
 */

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: { key: string; value: Record<string, unknown> }[];
}

/** An OTLP/HTTP traces receiver on loopback: every span posted to /v1/traces. */
async function otlpReceiver(): Promise<{ url: string; spans: OtlpSpan[]; bodies: string[]; server: Server }> {
  const spans: OtlpSpan[] = [];
  const bodies: string[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    request.on('end', () => {
      bodies.push(body);
      if (request.url === '/v1/traces' && request.headers['content-type']?.includes('json')) {
        const parsed = JSON.parse(body) as {
          resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[];
        };
        for (const r of parsed.resourceSpans) for (const s of r.scopeSpans) spans.push(...s.spans);
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, bodies, server };
}

const attribute = (span: OtlpSpan, key: string): unknown => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value && Object.values(value)[0];
};

integrationSuite('calls as OpenTelemetry spans (OTLP/HTTP)', { timeout: 240_000, images: [ensureTestImages] }, () => {
  // proves: CALL-TRACES
  it('sends one span per call to the OTLP collector, a child of the client traceparent, with the decision and outcome but not the arguments', async () => {
    const receiver = await otlpReceiver();
    try {
      const workspace = sandboxFolder();
      const file = writeProfile({
        name: `liar-traces-${process.pid}`,
        server: { image: LIAR_IMAGE },
        trust: 'trusted',
        mounts: [{ source: workspace, target: '/data' }],
        tools: { unannotated_write: { approval: 'allow' }, write_root: { approval: 'deny' } },
      });
      const hintbox = await runHintbox(file, {
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '200' },
      });
      const parents = ['0af7651916cd43dd8448eb211c80319c', '4bf92f3577b34da6a3ce929d0e0e4736'];
      for (const [i, traceId] of parents.entries()) {
        await hintbox.client.callTool({
          name: 'unannotated_write',
          arguments: { path: `/data/secret-${i}.txt`, content: 'SECRET-ARGUMENT' },
          _meta: { traceparent: `00-${traceId}-b7ad6b716920333${i}-01` },
        });
      }
      await hintbox.client.callTool({ name: 'unannotated_write', arguments: { path: '/data/x.txt', content: 'x' } });
      await hintbox.client.callTool({
        name: 'write_root',
        arguments: {},
        _meta: { traceparent: `00-${parents[0]}-00f067aa0ba902b7-01` },
      });
      await hintbox[Symbol.asyncDispose](); // hintbox exits, sending its last batch
      const calls = receiver.spans.filter((s) => s.name.startsWith('tools/call '));
      assert.equal(calls.length, 4, `one span per call: ${receiver.spans.map((s) => s.name).join(', ')}`);
      const byParent = (spanId: string): OtlpSpan | undefined => calls.find((s) => s.parentSpanId === spanId);
      for (const [i, traceId] of parents.entries()) {
        const span = byParent(`b7ad6b716920333${i}`);
        assert.ok(span, `the call with traceparent ${i} has its span as a child of the client's`);
        assert.equal(span.traceId, traceId);
        assert.equal(attribute(span, 'hintbox.decision'), 'allowed');
        assert.equal(attribute(span, 'hintbox.decided_by'), 'rule');
        assert.equal(attribute(span, 'hintbox.outcome'), 'ok');
        assert.match(String(attribute(span, 'hintbox.sandbox')), /\S/);
        assert.ok(Number(attribute(span, 'hintbox.duration_ms')) >= 0, 'the duration');
      }
      const refused = byParent('00f067aa0ba902b7');
      assert.ok(refused, 'the denied call has its span too');
      assert.equal(attribute(refused, 'hintbox.decision'), 'denied');
      assert.equal(attribute(refused, 'hintbox.outcome'), 'not-run');
      const rootless = calls.filter((s) => !s.parentSpanId);
      assert.equal(rootless.length, 1, 'the call without a traceparent starts a trace of its own');
      assert.ok(!receiver.bodies.join('').includes('SECRET-ARGUMENT'), 'no argument reaches the collector');
    } finally {
      receiver.server.close();
    }
  });
});
