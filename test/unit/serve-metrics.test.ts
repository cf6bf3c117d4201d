import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { AuditEvent, AuditIntent, AuditLog, AuditOutcomeReport } from '../../src/audit/audit-record.js';
import type { Authenticator } from '../../src/serve/authenticator.js';
import { BearerTokens, hashToken } from '../../src/serve/bearer-tokens.js';
import { metricsAccess, ServeMetrics } from '../../src/serve/serve-metrics.js';
import { silentLogger } from '../../src/util/logger.js';
import { parseSamples, sampleOf, type Samples } from '../support/prometheus-text.js';

/** An audit log in memory that can be told to refuse intents. */
class MemoryAuditLog implements AuditLog {
  readonly lines: unknown[] = [];
  refuse = false;
  private next = 0;
  recordIntent(intent: AuditIntent): Promise<string> {
    if (this.refuse) return Promise.reject(new Error('disk full'));
    this.lines.push(intent);
    return Promise.resolve(`call-${++this.next}`);
  }
  recordOutcome(id: string, report: AuditOutcomeReport): Promise<void> {
    this.lines.push({ id, ...report });
    return Promise.resolve();
  }
  recordEvent(event: AuditEvent): void {
    this.lines.push(event);
  }
}

const INTENT: AuditIntent = {
  session: 's1',
  server: 'fs',
  tool: 'read_file',
  tags: [],
  claimedHints: {},
  effectiveHints: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  sandbox: 'ro',
  decision: 'allowed',
  decidedBy: 'auto',
  pinHash: null,
};

describe('/metrics of hintbox serve', () => {
  let clock = 0;
  let sinkLag: number | undefined;
  const log = new MemoryAuditLog();
  let metrics: ServeMetrics;
  let http: Server;
  let base: string;

  before(async () => {
    const access = metricsAccess(
      BearerTokens.parse(
        JSON.stringify([
          { name: 'alice', sha256: hashToken('a-token') },
          { name: 'prometheus', sha256: hashToken('p-token'), metrics: 'only' },
        ]),
        'tokens.json',
      ),
    );
    metrics = await ServeMetrics.create({
      servers: ['fs', 'db'],
      sessions: () => 3,
      lag: { unwrittenOutcomes: () => 2, sinkLagSeconds: () => sinkLag },
      log: silentLogger,
      now: () => clock,
    });
    const audit = metrics.meter(log);
    http = createServer(
      (req, res) =>
        void metrics.handle(req, res, access, { deny: (denied) => denied.event && audit.recordEvent(denied.event) }),
    );
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(http.address() as AddressInfo).port}/metrics`;

    // Two calls that ran, one refused, one whose intent the log could not write.
    for (const [ms, outcome] of [
      [40, 'ok'],
      [3000, 'error'],
    ] as const) {
      const id = await audit.recordIntent(INTENT);
      clock += ms;
      await audit.recordOutcome(id, { outcome });
    }
    const refused = await audit.recordIntent({
      ...INTENT,
      tool: 'write_file',
      decision: 'denied',
      decidedBy: 'person',
    });
    await audit.recordOutcome(refused, { outcome: 'not-run' });
    log.refuse = true;
    await assert.rejects(audit.recordIntent(INTENT), /disk full/);
    audit.recordEvent({ type: 'sandbox.start', session: 's1', server: 'fs', sandbox: 'ro', container: 'c1' });
    audit.recordEvent({ type: 'sandbox.start', session: 's1', server: 'fs', sandbox: 'rw', container: 'c2' });
    audit.recordEvent({ type: 'sandbox.stop', session: 's1', server: 'fs', sandbox: 'rw', container: 'c2' });
  });
  after(() => new Promise((resolve) => http.close(resolve)));

  const scrape = async (token = 'p-token'): Promise<Samples> => {
    const response = await fetch(base, { headers: { Authorization: `Bearer ${token}` } });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    return parseSamples(await response.text());
  };

  it('counts exactly the calls recorded, by outcome, and their durations in the histogram', async () => {
    const samples = await scrape();
    const calls = (labels: Record<string, string>): number => sampleOf(samples, 'hintbox_calls_total', labels);
    assert.equal(calls({}), 3, 'the intent the log refused is not a call');
    assert.equal(calls({ server: 'fs', tool: 'read_file', outcome: 'ok' }), 1);
    assert.equal(calls({ server: 'fs', tool: 'read_file', outcome: 'error' }), 1);
    assert.equal(calls({ server: 'fs', tool: 'write_file', outcome: 'not-run' }), 1);
    const read = { server: 'fs', tool: 'read_file' };
    assert.equal(sampleOf(samples, 'hintbox_call_duration_seconds_count', read), 2);
    assert.equal(sampleOf(samples, 'hintbox_call_duration_seconds_sum', read), 3.04);
    assert.equal(sampleOf(samples, 'hintbox_call_duration_seconds_bucket', { ...read, le: '0.05' }), 1);
    assert.equal(sampleOf(samples, 'hintbox_call_duration_seconds_bucket', { ...read, le: '2.5' }), 1);
    assert.equal(sampleOf(samples, 'hintbox_call_duration_seconds_bucket', { ...read, le: '5' }), 2);
    assert.equal(sampleOf(samples, 'hintbox_call_duration_seconds_count', { tool: 'write_file' }), 0);
    assert.equal(
      sampleOf(samples, 'hintbox_calls_refused_total', {
        tool: 'write_file',
        decision: 'denied',
        decided_by: 'person',
      }),
      1,
    );
  });

  it('shows running sandboxes per server (0 for one without), client sessions and the audit lag', async () => {
    const samples = await scrape();
    assert.equal(sampleOf(samples, 'hintbox_sandboxes', { server: 'fs' }), 1);
    assert.ok(samples.some((s) => s.name === 'hintbox_sandboxes' && s.labels.server === 'db' && s.value === 0));
    assert.equal(sampleOf(samples, 'hintbox_client_sessions'), 3);
    assert.equal(sampleOf(samples, 'hintbox_audit_unwritten_outcomes'), 2);
    assert.ok(
      samples.some((s) => s.name === 'process_resident_memory_bytes' || s.name === 'nodejs_heap_size_used_bytes'),
    );
  });

  // proves: METRICS-ACCESS
  it('lets only a metrics token read them; each refusal is audited and counted', async () => {
    const before = log.lines.length;
    assert.equal((await fetch(base)).status, 401);
    assert.equal((await fetch(base, { headers: { Authorization: 'Bearer a-token' } })).status, 403);
    const denials = log.lines.slice(before) as AuditEvent[];
    assert.deepEqual(
      denials.map((e) => e.type === 'auth.denied' && [e.server, e.status, e.caller]),
      [
        ['/metrics', 401, null],
        ['/metrics', 403, 'alice'],
      ],
    );
    const samples = await scrape();
    assert.equal(sampleOf(samples, 'hintbox_auth_denials_total', { server: '/metrics', status: '401' }), 1);
    assert.equal(sampleOf(samples, 'hintbox_auth_denials_total', { server: '/metrics', status: '403' }), 1);
    assert.equal((await fetch(base, { method: 'POST', headers: { Authorization: 'Bearer p-token' } })).status, 405);
  });
});

describe('/metrics without tokens', () => {
  it('is open, and says how far the audit sink is behind when there is one', async () => {
    const metrics = await ServeMetrics.create({
      servers: ['fs'],
      sessions: () => 0,
      lag: { unwrittenOutcomes: () => 0, sinkLagSeconds: () => 1.5 },
      log: silentLogger,
    });
    const http = createServer(
      (req, res) => void metrics.handle(req, res, metricsAccess(undefined), { deny: () => assert.fail('no denial') }),
    );
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    try {
      const response = await fetch(`http://127.0.0.1:${(http.address() as AddressInfo).port}/metrics`);
      assert.equal(response.status, 200);
      const samples = parseSamples(await response.text());
      assert.equal(sampleOf(samples, 'hintbox_audit_sink_lag_seconds'), 1.5);
    } finally {
      await new Promise((resolve) => http.close(resolve));
    }
  });
});

describe('who may read /metrics', () => {
  const from = (remoteAddress: string, authorization?: string): IncomingMessage =>
    ({ socket: { remoteAddress }, headers: authorization ? { authorization } : {} }) as unknown as IncomingMessage;

  // proves: METRICS-ACCESS
  it('under an authenticator without a grant for metrics (OAuth): a client on this machine only', () => {
    const oauth: Authenticator = {
      description: 'OAuth (issuer https://auth.example.com)',
      authenticate: () => Promise.resolve({ allowed: true, caller: { subject: 'x' } }),
      challenge: () => undefined,
    };
    const access = metricsAccess(oauth);
    for (const address of ['127.0.0.1', '::1', '::ffff:127.0.0.1']) assert.equal(access(from(address)).allowed, true);
    for (const address of ['10.0.0.5', '::ffff:10.0.0.5', '2001:db8::1']) {
      assert.deepEqual(access(from(address, 'Bearer a-valid-jwt')), {
        allowed: false,
        status: 403,
        reason: '/metrics only from this machine under OAuth (issuer https://auth.example.com)',
        caller: null,
      });
    }
    // A proxy on this machine connects from loopback for anyone: a forwarded request is refused.
    for (const header of ['x-forwarded-for', 'forwarded', 'x-real-ip']) {
      const proxied = { socket: { remoteAddress: '127.0.0.1' }, headers: { [header]: '203.0.113.7' } };
      assert.deepEqual(access(proxied as unknown as IncomingMessage), {
        allowed: false,
        status: 403,
        reason: '/metrics not through a proxy (the request says it was forwarded)',
        caller: null,
      });
    }
  });

  it('with bearer tokens: the token decides, wherever the client is', () => {
    const access = metricsAccess(
      BearerTokens.parse(JSON.stringify([{ name: 'p', sha256: hashToken('p'), metrics: true }]), 't.json'),
    );
    assert.equal(access(from('10.0.0.5', 'Bearer p')).allowed, true);
    assert.equal(access(from('127.0.0.1')).allowed, false);
  });
});
