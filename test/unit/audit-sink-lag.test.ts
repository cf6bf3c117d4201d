import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PostgresAuditSink } from '../../src/audit/postgres-sink.js';
import { silentLogger } from '../../src/util/logger.js';
import { scratchFolder } from '../support/scratch-folder.js';

describe("the audit sink's lag (hintbox_audit_sink_lag_seconds)", () => {
  it('grows from the start while no pass succeeds (a database that is down)', async () => {
    // Port 1 on loopback: refused at once, so every pass fails.
    const sink = new PostgresAuditSink({
      url: 'postgres://hintbox@127.0.0.1:1/audit',
      dir: scratchFolder('hintbox-sink-lag-'),
      log: silentLogger,
      chain: 'c1',
      timeoutMs: 1000,
    });
    assert.equal(sink.lagSeconds(), 0, 'not started: nothing is behind yet');
    sink.start(20);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const lag = sink.lagSeconds();
    await sink.stop(200);
    assert.ok(lag >= 0.25 && lag < 5, String(lag));
  });
});
