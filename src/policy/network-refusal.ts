/**
 * Whether a tool's answer reads as a network failure, for a tool that claims an open world and
 * runs in a sandbox without a network (the profile gave it none): the sandbox refused what the
 * tool set out to do, and a server that answers "fetch failed" without `isError` must not be
 * audited as a call that went well. Pure.
 *
 * Read narrowly, so that ordinary text is not taken for a refusal: only the text items of an
 * answer not marked `isError`, only their first {@link HEAD_CHARS} characters (where an error
 * message is; a page that quotes one further down is not one), and only the words Node, undici,
 * glibc and Python use for a name that does not resolve or a network that cannot be reached.
 * A refused connection (`ECONNREFUSED`) is not among them: loopback answers it in any sandbox.
 */

/** How much of each text item is read. */
export const HEAD_CHARS = 1024;

const NETWORK_FAILURE =
  /\bfetch failed\b|\b(?:ENOTFOUND|EAI_AGAIN|ENETUNREACH|EHOSTUNREACH)\b|Temporary failure in name resolution|Name or service not known|Network is unreachable|No address associated with hostname/;

/** The failure's words when the answer reads as one (e.g. `fetch failed`), else undefined. */
export function networkFailureIn(answer: unknown): string | undefined {
  if (answer === null || typeof answer !== 'object') return undefined;
  const { isError, content } = answer as { isError?: unknown; content?: unknown };
  if (isError === true || !Array.isArray(content)) return undefined;
  for (const item of content as unknown[]) {
    const { type, text } = (item ?? {}) as { type?: unknown; text?: unknown };
    if (type !== 'text' || typeof text !== 'string') continue;
    const found = NETWORK_FAILURE.exec(text.slice(0, HEAD_CHARS));
    if (found) return found[0];
  }
  return undefined;
}

/**
 * The audit detail of a call refused so: a tool that claims an open world (or does not say), in
 * a sandbox without a network, whose answer reads as a network failure; else undefined.
 */
export function networkRefusal(
  tool: { networked: boolean; claimed: { openWorldHint?: boolean } } | undefined,
  answer: unknown,
): string | undefined {
  if (!tool || tool.networked || tool.claimed.openWorldHint === false) return undefined;
  const failure = networkFailureIn(answer);
  if (failure === undefined) return undefined;
  return `network: the tool claims an open world but its sandbox has no network (the profile's network), and its answer reads as a network failure ("${failure}"), though the server did not mark it isError`;
}
