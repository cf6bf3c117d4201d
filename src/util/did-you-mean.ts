/**
 * "Did you mean": the name an operator most likely meant by a misspelt one (a profile key, a
 * flag, a client). Pure.
 */

/** " (did you mean NAME?)" for the closest of `candidates`, or '' when none is close. */
export function didYouMean(given: string, candidates: readonly string[]): string {
  const match = closest(given, candidates);
  return match === undefined ? '' : ` (did you mean ${match}?)`;
}

/** The closest of `candidates` to `given` (edit distance at most a third of its length, and 3), for "did you mean". */
export function closest(given: string, candidates: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of candidates) {
    const distance = editDistance(given.toLowerCase(), name.toLowerCase());
    if (distance <= Math.min(3, Math.max(1, Math.floor(name.length / 3))) && (!best || distance < best.distance)) {
      best = { name, distance };
    }
  }
  return best?.name;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (row[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = row;
  }
  return previous[b.length] ?? 0;
}
