import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { digestProblem, imageDigest } from '../../src/engine/docker/image-digest.js';

const D = `sha256:${'a'.repeat(64)}`;
const OTHER = `sha256:${'b'.repeat(64)}`;

describe('a digest-pinned image runs only with the digest the engine shows for it', () => {
  it('reads the digest of a reference', () => {
    assert.equal(imageDigest(`mcp/x@${D}`), D);
    assert.equal(imageDigest(`ghcr.io/o/r:v1@${D}`), D);
    assert.equal(imageDigest('mcp/x:1.0'), undefined);
  });

  it('accepts the repository at that digest, Docker Hub names in any spelling', () => {
    assert.equal(digestProblem(`mcp/x@${D}`, [`mcp/x@${D}`]), undefined);
    assert.equal(digestProblem(`docker.io/mcp/x:1.0@${D}`, [`mcp/x@${D}`]), undefined);
    assert.equal(digestProblem(`docker.io/library/postgres@${D}`, [`postgres@${D}`]), undefined);
    assert.equal(digestProblem(`ghcr.io/o/r@${D}`, [`ghcr.io/o/r@${D}`]), undefined);
    assert.equal(digestProblem('mcp/x:1.0', []), undefined, 'no digest, nothing to check');
  });

  // proves: IMAGE-DIGEST
  it('refuses an image built or loaded here (no digest), another digest, or that digest of another repository', () => {
    assert.match(
      digestProblem(`mcp/x@${D}`, []) ?? '',
      /shows none: built or loaded here.*refused rather than run unverified/,
    );
    assert.match(digestProblem(`mcp/x@${D}`, [`mcp/x@${OTHER}`]) ?? '', /it shows mcp\/x@sha256:b/);
    assert.ok(digestProblem(`mcp/x@${D}`, [`evil/x@${D}`]));
    assert.ok(digestProblem(`ghcr.io/mcp/x@${D}`, [`mcp/x@${D}`]), 'ghcr.io is not Docker Hub');
  });
});
