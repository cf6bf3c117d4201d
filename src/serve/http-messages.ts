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
  for (let i = req.rawHeaders.length - 2; i >= 0; i -= 2) {
    if (req.rawHeaders[i]?.toLowerCase() === 'authorization') req.rawHeaders.splice(i, 2);
  }
}

/** Answers with a JSON body. */
export function reply(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers }).end(JSON.stringify(body));
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

/** A request's JSON body, at most {@link MAX_BODY_BYTES}; else the status and why. */
export async function readJson(req: IncomingMessage): Promise<{ json: unknown } | { status: number; message: string }> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) return { status: 413, message: `the request is larger than ${MAX_BODY_BYTES} bytes` };
      chunks.push(chunk);
    }
  } catch (error) {
    // A client that sends part of a body and closes is the client's affair: answered (if it
    // still listens), never a log line per request, which any client could cause at will.
    return { status: 400, message: `the request's body did not arrive whole (${(error as Error).message})` };
  }
  try {
    return { json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown };
  } catch {
    return { status: 400, message: 'the request is not JSON' };
  }
}
