/**
 * Digest-pinned image references (`repo@sha256:…`): which digest a reference pins, and whether
 * the engine's RepoDigests of an image show that digest for that repository. Pure: the
 * ImageBuilder inspects the image and asks these.
 */

/** The `sha256:…` an image reference pins (`repo@sha256:…`, `repo:tag@sha256:…`), if any. Pure. */
export function imageDigest(reference: string): string | undefined {
  return /@(sha256:[0-9a-f]{64})$/.exec(reference)?.[1];
}

/** `docker.io/library/postgres:16` → `postgres`: a repository as the engine lists it in RepoDigests. Pure. */
function familiarRepository(reference: string): string {
  const name = reference.replace(/@sha256:[0-9a-f]{64}$/, '').replace(/:[^/:]+$/, '');
  return name.replace(/^(docker\.io|index\.docker\.io|registry-1\.docker\.io)\//, '').replace(/^library\//, '');
}

/**
 * Why a digest-pinned reference must not run with an image whose RepoDigests are these, or
 * undefined when one of them is that repository at that digest. Pure.
 */
export function digestProblem(reference: string, repoDigests: readonly string[]): string | undefined {
  const digest = imageDigest(reference);
  if (!digest) return undefined;
  const repository = familiarRepository(reference);
  const shown = repoDigests.some((d) => familiarRepository(d) === repository && imageDigest(d) === digest);
  if (shown) return undefined;
  return (
    `image ${reference}: the engine shows no such digest for it (${repoDigests.length > 0 ? `it shows ${repoDigests.join(', ')}` : 'it shows none: built or loaded here'}); ` +
    'refused rather than run unverified'
  );
}
