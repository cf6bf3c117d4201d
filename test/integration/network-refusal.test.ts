import assert from 'node:assert/strict';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { EGRESS_IMAGE, ensureEgressImage } from './support/docker.js';
import { auditOf, runHintbox, writeProfile } from './support/hintbox-process.js';

interface AuditRow {
  tool: string;
  arguments: { name?: string };
  outcome: string | null;
  detail: string | null;
}

/**
 * An open-world tool the profile gives no network: the egress test server's `resolve` (it claims
 * an open world) under `network: none`. Its lookup fails in the sandbox, and the server answers
 * the failure in words without marking it isError: the audit must not record that as a call that
 * went well. The name is resolved inside the network-less sandbox only (nothing outside is asked).
 */
integrationSuite('a network refusal is audited as such', { timeout: 300_000, images: [ensureEgressImage] }, () => {
  // proves: NETWORK-REFUSAL-AUDITED
  it('an open-world tool under network: none whose answer reads as a network failure, not marked isError, is audited as a tool-error by the network', async () => {
    const name = `offline-${process.pid}`;
    const file = writeProfile({ name, server: { image: EGRESS_IMAGE }, trust: 'trusted', network: 'none' });
    await using hintbox = await runHintbox(file);
    const failed = await hintbox.client.callTool({ name: 'resolve', arguments: { name: 'offline-canary.invalid' } });
    const text = (failed.content as { text: string }[])[0]?.text ?? '';
    // What the server answers: a failure in words, not marked isError.
    assert.notEqual(failed.isError, true, text);
    assert.match(text, /"ok":false,"error":"(EAI_AGAIN|ENOTFOUND)"/, text);
    // Ordinary answers of the same tool stay ok.
    const local = await hintbox.client.callTool({ name: 'resolve', arguments: { name: '127.0.0.1' } });
    assert.match((local.content as { text: string }[])[0]?.text ?? '', /"ok":true/);

    const rows = await auditOf<AuditRow>(name);
    const refused = rows.find((r) => r.arguments.name === 'offline-canary.invalid');
    assert.equal(refused?.outcome, 'tool-error', JSON.stringify(rows));
    assert.match(
      refused?.detail ?? '',
      /^network: the tool claims an open world but its sandbox has no network .*\("(EAI_AGAIN|ENOTFOUND)"\)/,
    );
    assert.equal(rows.find((r) => r.arguments.name === '127.0.0.1')?.outcome, 'ok');
  });
});
