/**
 * The serve bench's transport baseline: an MCP server with one trivial tool over the SDK's
 * streamable HTTP transport, as a process of its own (no hintbox, no sandbox, no file read).
 * Prints `listening on <url>` on stderr. Run: node --import tsx bench/http-echo-server.ts
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';

const sessions = new Map<string, StreamableHTTPServerTransport>();
const http = createServer((req, res) => {
  void (async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const body: unknown = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
    const id = req.headers['mcp-session-id'];
    let transport = typeof id === 'string' ? sessions.get(id) : undefined;
    if (!transport) {
      if (!isInitializeRequest(body)) return void res.writeHead(400).end();
      const fresh = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => void sessions.set(sid, fresh),
      });
      const server = new McpServer({ name: 'echo', version: '1.0.0' });
      server.registerTool('read_text_file', {}, () => ({ content: [{ type: 'text', text: 'benchmark\n' }] }));
      await server.connect(fresh);
      transport = fresh;
    }
    await transport.handleRequest(req, res, body);
  })();
});
http.listen(0, '127.0.0.1', () => {
  process.stderr.write(`listening on http://127.0.0.1:${(http.address() as AddressInfo).port}\n`);
});
