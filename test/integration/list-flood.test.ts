import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ensureFloodImage, FLOOD_IMAGE } from './support/docker.js';
import { hintboxCommand, runHintbox, writeProfile } from './support/hintbox-process.js';
import { integrationSuite } from './support/suite.js';

/** The cap of every list hintbox reads from a server (tools, prompts, resources, templates). */
const CAP = 10_000;

/**
 * A server whose lists hold a million items, made page by page (test/fixtures/flood). The rule,
 * one for all four kinds: hintbox reads at most 10,000 items (and 100 pages) of a list; a server
 * that lists more fails the start with an error naming the list, as a listing that fails does.
 * Before the cap covered tools, `hintbox plan` read all 100 pages (1,000,000 tools, 1.2 GB
 * resident, 78 s) and then died of "Maximum call stack size exceeded".
 */
integrationSuite('a server that lists a million items', { timeout: 300_000, images: [ensureFloodImage] }, () => {
  const profile = (lists: string): string =>
    writeProfile({
      name: `flood-${process.pid}-${lists.replace(/\W/g, '')}`,
      server: { image: FLOOD_IMAGE },
      trust: 'trusted',
      env: { FLOOD_LISTS: lists },
      timeouts: { start: 60 },
    });

  // proves: CATALOG-LIST-CAP
  it('lists no more than 10,000 of its tools: the start fails naming tools/list, after two pages', async () => {
    const started = Date.now();
    const { code, stderr } = await hintboxCommand(['plan', profile('tools')]);
    const seconds = (Date.now() - started) / 1000;
    assert.notEqual(code, 0, stderr);
    assert.match(stderr, new RegExp(`tools/list listed more than ${CAP} items`), stderr);
    // Pages of 10,000: the second one passes the cap, and no third is asked for.
    assert.match(stderr, /flood: tools\/list page 2 /);
    assert.doesNotMatch(stderr, /flood: tools\/list page 3 /);
    assert.doesNotMatch(stderr, /Maximum call stack/);
    assert.ok(seconds < 60, `took ${seconds} s`);
  });

  // proves: CATALOG-LIST-CAP
  it('lists no more than 10,000 resource templates either: one rule for every kind', async () => {
    await assert.rejects(
      runHintbox(profile('templates')),
      new RegExp(`resources/templates/list listed more than ${CAP} items`),
    );
  });
});
