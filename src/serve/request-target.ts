/** A request target's path and query as WHATWG URL parsing reads them (`new URL(target, base)`). */
export interface RequestTarget {
  readonly pathname: string;
  /** The query with its `?`, or '' (URL's `search`). */
  readonly search: string;
}

/** How many distinct targets are kept parsed before the table starts again. */
export const KEPT = 64;
/** The longest target kept: a longer one (no client of ours sends one) is parsed each time. */
export const LONGEST_KEPT = 256;
const parsed = new Map<string, RequestTarget | null>();

/**
 * `target`'s path and query, or undefined when it is no URL path. Parsed by `URL` once per
 * distinct target and kept: `new URL` took ~40 µs of each of serve's calls (a CPU profile,
 * session 24), and a client sends the same target on every call. Parsing is a function of the
 * text alone, so a kept answer is the answer; a client that sends ever new targets only keeps
 * the table starting again (at most {@link KEPT} entries of at most {@link LONGEST_KEPT} characters).
 */
export function requestTarget(target: string | undefined): RequestTarget | undefined {
  const text = target ?? '/';
  const known = parsed.get(text);
  if (known !== undefined) return known ?? undefined;
  let answer: RequestTarget | null = null;
  try {
    const url = new URL(text, 'http://hintbox');
    answer = Object.freeze({ pathname: url.pathname, search: url.search });
  } catch {
    // not a target: kept as such
  }
  // Bounded in bytes too: a request sent before its token is checked cannot pin a 16 KB target
  // (and its ~3× longer percent-encoded path) in memory.
  if (text.length <= LONGEST_KEPT) {
    if (parsed.size >= KEPT) parsed.clear();
    parsed.set(text, answer);
  }
  return answer ?? undefined;
}

/** How many targets are kept now (for tests). */
export function keptTargets(): number {
  return parsed.size;
}
