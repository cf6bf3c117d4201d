import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  MAX_SERVER_TAGS,
  TagFilterError,
  formatTags,
  matchesTagFilter,
  parseTagFilter,
  serverClaimedTags,
  toolTags,
  type ToolTag,
} from '../../src/policy/tool-tags.js';

describe('toolTags', () => {
  it("merges the profile's server and tool tags with the server's claims, each marked, without duplicates", () => {
    const tags = toolTags({
      serverTags: ['k8s', 'Infra '],
      toolTags: ['helm', 'k8s'],
      meta: { tags: ['helm', 'deploy', 'K8S'] },
    });
    assert.deepEqual(tags, [
      { name: 'k8s', source: 'profile' },
      { name: 'infra', source: 'profile' },
      { name: 'helm', source: 'profile' },
      { name: 'deploy', source: 'server' },
    ]);
  });

  it('has no tags when neither the profile nor the server names any', () => {
    assert.deepEqual(toolTags({}), []);
    assert.deepEqual(toolTags({ serverTags: [], toolTags: [' '], meta: {} }), []);
  });
});

describe('serverClaimedTags', () => {
  it("reads _meta.tags and FastMCP's _meta.fastmcp.tags and _meta._fastmcp.tags", () => {
    assert.deepEqual(serverClaimedTags({ tags: ['a'] }), ['a']);
    assert.deepEqual(serverClaimedTags({ fastmcp: { tags: ['b'] } }), ['b']);
    assert.deepEqual(serverClaimedTags({ _fastmcp: { tags: ['c', 'a'] }, tags: ['a'] }), ['a', 'c']);
  });

  it('ignores bad values instead of failing', () => {
    const bad: unknown[] = [
      undefined,
      null,
      'tags',
      42,
      [],
      ['tags'],
      { tags: 'k8s' },
      { tags: { 0: 'k8s', length: 1 } },
      { tags: null },
      { fastmcp: ['tags'] },
      { fastmcp: { tags: 'k8s' } },
      { tags: [null, 1, {}, ['k8s'], true] },
    ];
    for (const meta of bad) assert.deepEqual(serverClaimedTags(meta), [], `no tags from ${JSON.stringify(meta)}`);
    assert.deepEqual(serverClaimedTags({ tags: [1, 'ok', null] }), ['ok'], 'the good entries are kept');
  });

  it('drops tags that could smuggle text into a confirmation', () => {
    const meta = {
      tags: [
        'fine',
        'two words',
        'line\nbreak',
        '\u001b[31mred',
        'approved ✔',
        '-leading-dash',
        'x'.repeat(64),
        'y'.repeat(63),
        'ns:k8s/helm_v3.1',
      ],
    };
    assert.deepEqual(serverClaimedTags(meta), ['fine', 'y'.repeat(63), 'ns:k8s/helm_v3.1']);
  });

  it(`keeps at most ${MAX_SERVER_TAGS} claimed tags`, () => {
    const many = Array.from({ length: 100 }, (_, i) => `t${i}`);
    const tags = serverClaimedTags({ tags: many, fastmcp: { tags: ['late'] } });
    assert.equal(tags.length, MAX_SERVER_TAGS);
    assert.deepEqual(tags, many.slice(0, MAX_SERVER_TAGS));
  });

  it('does not read inherited properties', () => {
    const meta = Object.create({ tags: ['inherited'] }) as object;
    assert.deepEqual(serverClaimedTags(meta), []);
  });
});

describe('the --tags filter', () => {
  const tags: ToolTag[] = [
    { name: 'k8s', source: 'profile' },
    { name: 'deploy', source: 'server' },
  ];

  it('parses a comma list, trimmed, lower-cased, without duplicates and empty names', () => {
    assert.deepEqual(parseTagFilter('k8s, Helm,,helm ,'), ['k8s', 'helm']);
  });

  it('refuses a filter that names no tag', () => {
    for (const text of ['', ',', ' , ']) {
      assert.throws(() => parseTagFilter(text), TagFilterError, `'${text}' names no tag`);
    }
  });

  it('passes a tool with any of the wanted tags, case-insensitively', () => {
    const opts = { countServerClaims: true };
    assert.equal(matchesTagFilter(tags, ['k8s'], opts), true);
    assert.equal(matchesTagFilter(tags, ['helm', 'K8S'], opts), true);
    assert.equal(matchesTagFilter(tags, ['helm'], opts), false);
    assert.equal(matchesTagFilter([], ['helm'], opts), false);
    assert.equal(matchesTagFilter([], [], opts), true, 'an empty filter passes every tool');
  });

  it("counts the server's claimed tags only when told to (a trusted server)", () => {
    assert.equal(matchesTagFilter(tags, ['deploy'], { countServerClaims: true }), true);
    assert.equal(matchesTagFilter(tags, ['deploy'], { countServerClaims: false }), false);
    assert.equal(matchesTagFilter(tags, ['deploy', 'k8s'], { countServerClaims: false }), true);
  });

  it("formats tags with the server's claims marked", () => {
    assert.equal(formatTags(tags), "k8s, deploy (server's claim)");
    assert.equal(formatTags([]), '');
  });
});
