import type { IncomingMessage, ServerResponse } from 'node:http';

/** The plain HTTP of `hintbox serve`'s MCP endpoint: reading a request's body, answering, credentials dropped. */

/** The largest request body read (the SDK's own limit for a message). */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

/**
 * The credentials stop at the authenticator: no handler, nor a server behind it, may see or pass
 * them on (MCP's authorization spec forbids token passthrough). The SDK's transport builds its
 * request from the raw headers, so they go too.
 */
export function dropCredentials(req: IncomingMessage): void {
  delete req.headers.authorization;
  const raw = req.rawHeaders;
  for (let i = raw.length - 2; i >= 0; i -= 2) {
    const name = raw[i] as string;
    // The length first: no lower-cased copy of every other header's name.
    if (name.length === 13 && name.toLowerCase() === 'authorization') raw.splice(i, 2);
  }
}

/** Answers with a JSON body (with its length: no chunked framing). */
export function reply(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const bytes = Buffer.from(JSON.stringify(body), 'utf8');
  res
    .writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': String(bytes.length), ...headers })
    .end(bytes);
}

/** A JSON-RPC error without an id (the request's own could not be read or is refused as a whole). */
export function jsonRpcError(message: string): unknown {
  return { jsonrpc: '2.0', error: { code: -32000, message }, id: null };
}

/** The ids of the requests in a POST body (answers and notifications have none). */
export function requestIds(body: unknown): (string | number)[] {
  const messages = Array.isArray(body) ? (body as unknown[]) : [body];
  return messages.flatMap((m) => {
    if (typeof m !== 'object' || m === null || !('method' in m)) return [];
    const id = (m as { id?: unknown }).id;
    return typeof id === 'string' || typeof id === 'number' ? [id] : [];
  });
}

/**
 * A request's JSON body, at most {@link MAX_BODY_BYTES}; else the status and why. Read from the
 * stream's events (no async iterator: one promise per request, not one per chunk and more).
 */
export function readJson(req: IncomingMessage): Promise<{ json: unknown } | { status: number; message: string }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (result: { json: unknown } | { status: number; message: string }): void => {
      req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        // Nothing more of it is read or kept: the 413 is the caller's, and says Connection: close,
        // so the connection ends with it (the rest of the body is never read).
        req.pause();
        done({ status: 413, message: `the request is larger than ${MAX_BODY_BYTES} bytes` });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      const text =
        chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8');
      try {
        done({ json: JSON.parse(text) as unknown });
      } catch {
        done({ status: 400, message: 'the request is not JSON' });
      }
    };
    // A client that sends part of a body and closes is the client's affair: answered (if it
    // still listens), never a log line per request, which any client could cause at will.
    const onError = (error: Error): void =>
      done({ status: 400, message: `the request's body did not arrive whole (${error.message})` });
    const onClose = (): void => {
      if (!req.complete) done({ status: 400, message: "the request's body did not arrive whole (aborted)" });
    };
    if (req.destroyed) return done({ status: 400, message: "the request's body did not arrive whole (closed)" });
    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}
