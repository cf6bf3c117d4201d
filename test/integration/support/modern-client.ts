import type { PassThrough } from 'node:stream';
import { Client, type CallToolResult, type ElicitRequest, type ElicitResult } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { ownHintboxProcess } from './docker.js';
import { HINTBOX_BIN, hintboxTestEnv } from './hintbox-process.js';

/** The 2026 revision, as the SDK 2.x client pins it. */
export const MODERN = '2026-07-28';

/** What one `tools/call` came back as: the `input_required` payload, or a complete result. */
export type CallAnswer =
  | { kind: 'input_required'; inputRequests: Record<string, unknown>; requestState?: string }
  | { kind: 'complete'; result: CallToolResult };

export interface ModernHintbox extends AsyncDisposable {
  client: Client;
  /** Every confirmation the client was asked (auto-fulfilled rounds only). */
  asked: ElicitRequest['params'][];
  stderr(): string;
  /** One `tools/call` leg, by hand: what the client sends, what it gets (never auto-fulfilled). */
  callOnce(params: Record<string, unknown>): Promise<CallAnswer>;
}

/**
 * `hintbox run <profile>` driven by the SDK 2.x client pinned to MCP 2026-07-28: stateless
 * requests with the `_meta` envelope, `server/discover` first, confirmations as
 * `input_required`. `onElicit` answers the rounds `callTool` fulfils itself (default: approve).
 */
export async function runHintboxModern(
  profile: string,
  options: {
    onElicit?: (params: ElicitRequest['params']) => ElicitResult;
    elicitation?: boolean;
    /** `auto`: the SDK probes with `server/discover` first, on a sibling process it starts and ends. Default: pinned. */
    negotiation?: 'auto' | 'legacy';
    /** More environment for hintbox (a profile's variables). */
    env?: Record<string, string>;
  } = {},
): Promise<ModernHintbox> {
  const transport = new StdioClientTransport({
    command: HINTBOX_BIN,
    args: ['run', profile],
    env: { ...hintboxTestEnv(), ...options.env },
    stderr: 'pipe',
  });
  let stderr = '';
  (transport.stderr as PassThrough | null)?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
    if (process.env.HINTBOX_TEST_VERBOSE) process.stderr.write(chunk);
  });
  const asked: ElicitRequest['params'][] = [];
  const client = new Client(
    { name: 'hintbox-test-2026', version: '1.0.0' },
    {
      capabilities: options.elicitation === false ? {} : { elicitation: {} },
      versionNegotiation: { mode: options.negotiation ?? { pin: MODERN } },
    },
  );
  if (options.elicitation !== false) {
    client.setRequestHandler('elicitation/create', (request) => {
      asked.push(request.params);
      return options.onElicit?.(request.params) ?? { action: 'accept', content: { approve: true } };
    });
  }
  try {
    await client.connect(transport);
  } catch (error) {
    throw new Error(`hintbox run (2026 client) failed to start: ${(error as Error).message}\n${stderr}`);
  }
  if (transport.pid !== null) ownHintboxProcess(transport.pid);
  return {
    client,
    asked,
    stderr: () => stderr,
    callOnce: async (params) => {
      const result: unknown = await client.request({ method: 'tools/call', params }, { allowInputRequired: true });
      const r = result as { resultType?: unknown; inputRequests?: Record<string, unknown>; requestState?: unknown };
      if (r.resultType === 'input_required') {
        return {
          kind: 'input_required',
          inputRequests: r.inputRequests ?? {},
          ...(typeof r.requestState === 'string' ? { requestState: r.requestState } : {}),
        };
      }
      return { kind: 'complete', result: result as CallToolResult };
    },
    [Symbol.asyncDispose]: async () => {
      await client.close().catch(() => undefined);
    },
  };
}
