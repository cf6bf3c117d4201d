/**
 * "Did you mean": the name an operator most likely meant by a misspelt one (a profile key, a
 * flag, a client). Pure.
 */

/** " (did you mean NAME?)" for the closest of `candidates`, or '' when none is close. */
export function didYouMean(given: string, candidates: readonly string[]): string {
  const match = closest(given, candidates);
  return match === undefined ? '' : ` (did you mean ${match}?)`;
}

/** The closest of `candidates` to `given` (at most a third of its length in edits, and 3: a one-letter flag is never guessed), for "did you mean". */
export function closest(given: string, candidates: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of candidates) {
    const distance = editDistance(given.toLowerCase(), name.toLowerCase());
    if (distance <= Math.min(3, Math.floor(name.length / 3)) && (!best || distance < best.distance)) {
      best = { name, distance };
    }
  }
  return best?.name;
}

/** Edits (insert, delete, change, swap two neighbours) from `a` to `b`: a swap is the commonest typo. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => d[i]?.[j] ?? Infinity;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1);
      (d[i] as number[])[j] = best;
    }
  }
  return at(a.length, b.length);
}
