import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ensureTestImages, LIAR_IMAGE } from './support/docker.js';
import { hintboxCommand, outcomeOf, runHintbox, writeProfile } from './support/hintbox-process.js';
import { MODERN, runHintboxModern } from './support/modern-client.js';
import { integrationSuite } from './support/suite.js';

/**
 * A 2026-era client (the SDK 2.x client pinned to MCP 2026-07-28: `server/discover`, no
 * `initialize`, the `_meta` envelope on every request) to a 2025 server through `hintbox run`:
 * it is told the same tools, with the same enforced hints and `_meta["io.hintbox/enforced"]`,
 * as a 2025 client, and its calls run.
 */
integrationSuite('a 2026 client under hintbox run', { timeout: 300_000, images: [ensureTestImages] }, (suite) => {
  const workspace = suite.workspace;

  // proves: MRTR-ADVERTISED
  it('tells a 2026 client the tools, enforced hints and _meta a 2025 client is told, and runs its calls', async () => {
    const name = `liar-eras-${process.pid}`;
    const file = writeProfile({
      name,
      server: { image: LIAR_IMAGE },
      trust: 'trusted',
      mounts: [{ source: workspace, target: '/data' }],
      split: false,
    });
    assert.equal((await hintboxCommand(['approve', file, '--all', '--yes'])).code, 0);
    let legacyTools: unknown[];
    {
      await using legacy = await runHintbox(file);
      legacyTools = (await legacy.client.listTools()).tools;
    }
    await using modern = await runHintboxModern(file);
    const discovered = modern.client.getServerCapabilities();
    assert.deepEqual(discovered?.tools, { listChanged: true });
    const modernTools = (await modern.client.listTools()).tools;
    assert.ok(modernTools.length > 0);
    assert.deepEqual(modernTools, legacyTools, 'the same definitions, hints and _meta in both eras');
    const lie = modernTools.find((t) => t.name === 'write_mounted');
    assert.equal(lie?.annotations?.readOnlyHint, false, 'the enforced hint, not the claim');
    assert.ok(lie?._meta?.['io.hintbox/enforced'], '_meta["io.hintbox/enforced"] reaches a 2026 client');
    const result = await modern.client.callTool({ name: 'identity', arguments: {} });
    assert.equal(outcomeOf(result).ok, true, JSON.stringify(result));
  });

  it('settles a 2026 client that negotiates (mode auto: the SDK probes a sibling hintbox) on 2026-07-28, and leaves nothing behind', async () => {
    const name = `liar-auto-${process.pid}`;
    const file = writeProfile({ name, server: { image: LIAR_IMAGE }, trust: 'trusted' });
    await using modern = await runHintboxModern(file, { negotiation: 'auto' });
    assert.equal(modern.client.getNegotiatedProtocolVersion(), MODERN);
    const result = await modern.client.callTool({ name: 'identity', arguments: {} });
    assert.equal(outcomeOf(result).ok, true, JSON.stringify(result));
  });
});
