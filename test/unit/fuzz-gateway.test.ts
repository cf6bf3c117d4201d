import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { isDeepStrictEqual } from 'node:util';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { JSONRPCMessageSchema, JSONRPCRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Gateway, SharedSandboxes, type RoutedTool } from '../../src/gateway/gateway.js';
import { LineReader, NdjsonTransport } from '../../src/mcp/ndjson-transport.js';
import type { Logger } from '../../src/util/logger.js';
import { factory, type FakeUpstream } from './support/fake-upstream.js';
import {
  anyId,
  anyJson,
  anyJsonObject,
  fuzzParameters,
  hostileText,
  isRequestId,
  nestingDepth,
} from './support/fuzz.js';

/**
 * Hostile input on both sides of the gateway, fuzzed: a client and the servers in two sandboxes
 * write what they like — malformed JSON-RPC, garbage bytes, huge and deeply nested messages,
 * unknown methods, reused ids and ids of the wrong type, notifications with ids, answers under
 * guessed ids — interleaved, over NDJSON byte streams as under `hintbox run` (a real Gateway,
 * fake upstreams: `support/fake-upstream.ts`). After each sequence every held call is let go,
 * and what crossed the gateway either way is checked:
 *
 * 1. everything the client reads is one JSON-RPC message per line, of the protocol's own shapes;
 * 2. an answer reaches the client only under the id of a request the client made, at most once per
 *    request, and only from the sandbox that request was sent to, for that very request;
 * 3. every well-formed request the client did not cancel is answered (no hang);
 * 4. the client is sent no request and no notification a server did not send as one (one with an
 *    id is dropped), progress only under a token the client used, updates only of what it subscribed to;
 * 5. a sandbox receives only what hintbox sends of its own: the calls and reads the client made
 *    (well-formed, routed there, under hintbox's ids, params as the client wrote them),
 *    cancellations of those, the logging level, answers to its own requests;
 * 6. nothing throws where nobody catches it (no unhandled rejection, no error logged by
 *    hintbox, no TypeError inside a handler), and the gateway still serves a call at the end.
 */

const MARK = 'test/marker';
/** Where raw text of a server carries its notification's marker (filled in when it is sent). */
const MARK_SLOT = '"@mark@":0';
const TOOLS = ['a', 'b'] as const;
const SANDBOX_OF: Record<string, string> = { a: 'sa', b: 'sb' };
const SANDBOXES = ['sa', 'sb'] as const;
const READ_SANDBOX = 'sa';
const READS = ['resources/read', 'resources/subscribe', 'resources/unsubscribe', 'prompts/get', 'completion/complete'];
const OFFERS = {
  prompts: [{ name: 'p' }],
  resources: [{ uri: 'note://1', name: 'one' }],
  resourceTemplates: [{ uriTemplate: 'note://{id}', name: 'notes' }],
};

/** A value nested `depth` deep, as JSON text (JSON.stringify cannot write what is deep). */
function deepText(depth: number): string {
  return '{"d":'.repeat(depth) + '0' + '}'.repeat(depth);
}

// ---------------------------------------------------------------------------------------------
// What the client does

type ClientAction =
  | { kind: 'call'; id: unknown; name: string; args: Args; token?: unknown; extra?: Record<string, unknown> }
  | { kind: 'read'; id: unknown; method: string; target: 'shown' | 'hidden' | 'missing' | 'odd'; token?: unknown }
  | { kind: 'setLevel'; id: unknown; level: unknown }
  | { kind: 'cancel'; requestId: unknown; id?: unknown; reason?: unknown }
  | { kind: 'other'; id?: unknown; method: unknown; params?: unknown }
  | { kind: 'answer'; id: unknown; body: unknown }
  | { kind: 'object'; value: Record<string, unknown> }
  | { kind: 'bytes'; text: string };

type Args = 'absent' | 'object' | 'string' | 'array' | { deep: number } | { huge: number };

const argsArb: fc.Arbitrary<Args> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom<Args>('object', 'absent') },
  { weight: 2, arbitrary: fc.constantFrom<Args>('string', 'array') },
  { weight: 1, arbitrary: nestingDepth.map((deep) => ({ deep })) },
  { weight: 1, arbitrary: fc.constantFrom(100_000, 2_000_000).map((huge) => ({ huge })) },
);

const token = fc.option(anyId, { nil: undefined });

const clientAction: fc.Arbitrary<ClientAction> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record(
      {
        kind: fc.constant('call' as const),
        id: anyId,
        name: fc.oneof(
          fc.constantFrom(...TOOLS),
          fc.constantFrom('unknown', '__proto__', 'constructor'),
          hostileText(),
        ),
        args: argsArb,
        token,
        extra: fc.dictionary(fc.constantFrom('extra', 'result', 'error', 'jsonrpc'), anyJson, { maxKeys: 1 }),
      },
      { requiredKeys: ['kind', 'id', 'name', 'args'] },
    ),
  },
  {
    weight: 3,
    arbitrary: fc.record(
      {
        kind: fc.constant('read' as const),
        id: anyId,
        method: fc.constantFrom(...READS),
        target: fc.constantFrom('shown', 'hidden', 'missing', 'odd'),
        token,
      },
      { requiredKeys: ['kind', 'id', 'method', 'target'] },
    ),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('setLevel' as const),
      id: anyId,
      level: fc.oneof(fc.constantFrom('debug', 'info', 'error', 'emergency'), anyJson),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record(
      { kind: fc.constant('cancel' as const), requestId: anyId, id: anyId, reason: fc.oneof(hostileText(), anyJson) },
      { requiredKeys: ['kind', 'requestId'] },
    ),
  },
  {
    weight: 2,
    arbitrary: fc.record(
      {
        kind: fc.constant('other' as const),
        id: anyId,
        method: fc.oneof(
          fc.constantFrom('tools/list', 'prompts/list', 'resources/list', 'ping', 'initialize'),
          fc.constantFrom('x/unknown', 'notifications/progress', 'notifications/initialized', 'sampling/createMessage'),
          hostileText(),
          anyJson,
        ),
        params: fc.oneof(anyJsonObject, anyJson, fc.record({ cursor: anyJson })),
      },
      { requiredKeys: ['kind', 'method'] },
    ),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('answer' as const),
      id: anyId,
      body: fc.oneof(
        fc.record({ result: anyJson }),
        fc.record({ error: anyJson }),
        fc.constant({}),
        fc.record({ result: anyJsonObject, error: anyJsonObject }),
      ),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('object' as const), value: anyJsonObject }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('bytes' as const),
      text: fc.oneof(
        hostileText(40),
        fc.constantFrom('null\n', '[]\n', '{"jsonrpc":"1.0"}\n', '{"jsonrpc":"2.0"\n', '\r\n\n', '{"jsonrpc":"2.0",'),
        nestingDepth.map((depth) => `{"jsonrpc":"2.0","method":"ping","id":"deep","params":${deepText(depth)}}\n`),
      ),
    }),
  },
);

// ---------------------------------------------------------------------------------------------
// What the servers in the sandboxes do

type ServerAction =
  | { kind: 'release'; pick: number }
  | { kind: 'answer'; pick: number; shape: AnswerShape }
  | { kind: 'forge'; sandbox: number; pick: number; id?: unknown }
  | { kind: 'notify'; sandbox: number; method: string; id?: unknown; params: unknown; pick: number }
  | { kind: 'ask'; sandbox: number; method: string; id: unknown; params: unknown }
  | { kind: 'raw'; sandbox: number; text: string }
  | { kind: 'die'; sandbox: number }
  | { kind: 'tick' };

type AnswerShape =
  | { result: unknown }
  | { error: unknown }
  | { neither: true }
  | { both: true }
  | { deep: number }
  | { huge: number }
  | { method: unknown };

const sandboxIndex = fc.integer({ min: 0, max: SANDBOXES.length - 1 });
const pick = fc.nat(20);

const answerShape: fc.Arbitrary<AnswerShape> = fc.oneof(
  fc.record({ result: fc.oneof(anyJsonObject, anyJson) }),
  fc.record({
    error: fc.oneof(
      fc.record({ code: fc.oneof(fc.integer(), anyJson), message: fc.oneof(hostileText(), anyJson) }),
      anyJson,
    ),
  }),
  fc.constant({ neither: true as const }),
  fc.constant({ both: true as const }),
  nestingDepth.map((deep) => ({ deep })),
  fc.constantFrom(100_000, 2_000_000).map((huge) => ({ huge })),
  fc.record({ method: fc.oneof(fc.constant(null), hostileText(), anyJson) }),
);

const serverAction: fc.Arbitrary<ServerAction> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('release' as const), pick }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('answer' as const), pick, shape: answerShape }) },
  {
    weight: 3,
    arbitrary: fc.record(
      { kind: fc.constant('forge' as const), sandbox: sandboxIndex, pick, id: anyId },
      { requiredKeys: ['kind', 'sandbox', 'pick'] },
    ),
  },
  {
    weight: 3,
    arbitrary: fc.record(
      {
        kind: fc.constant('notify' as const),
        sandbox: sandboxIndex,
        method: fc.constantFrom(
          'notifications/progress',
          'notifications/message',
          'notifications/resources/updated',
          'notifications/cancelled',
          'notifications/tools/list_changed',
          'notifications/unknown',
          'x/y',
        ),
        id: anyId,
        params: fc.oneof(
          fc.record({ level: fc.constantFrom('info', 'debug', 'bogus'), data: anyJson }),
          fc.record({ uri: fc.constantFrom('note://1', 'note://2') }),
          fc.record({ progress: fc.integer(), progressToken: anyId }),
          fc.record({ requestId: anyId }),
          anyJson,
        ),
        pick,
      },
      { requiredKeys: ['kind', 'sandbox', 'method', 'params', 'pick'] },
    ),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('ask' as const),
      sandbox: sandboxIndex,
      method: fc.constantFrom('sampling/createMessage', 'elicitation/create', 'roots/list', 'ping', 'x/unknown'),
      id: anyId,
      params: fc.oneof(anyJsonObject, anyJson, fc.constant({ message: 'hi', requestedSchema: { properties: {} } })),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('raw' as const),
      sandbox: sandboxIndex,
      text: fc.oneof(
        hostileText(40),
        fc.constantFrom('null\n', '{"jsonrpc":"2.0"}\n', '{"jsonrpc":"2.0","id":"hintbox:g1:1"\n', '[1]\n'),
        nestingDepth.map(
          (depth) =>
            `{"jsonrpc":"2.0","method":"notifications/message","params":{${MARK_SLOT},"d":${deepText(depth)}}}\n`,
        ),
      ),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('die' as const), sandbox: sandboxIndex }) },
  { weight: 3, arbitrary: fc.constant({ kind: 'tick' as const }) },
);

const action: fc.Arbitrary<ClientAction | ServerAction> = fc.oneof(
  { weight: 3, arbitrary: clientAction },
  { weight: 2, arbitrary: serverAction },
);

// ---------------------------------------------------------------------------------------------
// The gateway under fire, and what it is seen to do

/** A request a fake server holds until the fuzz lets it go (or answers it its own way). */
interface Held {
  upstream: FakeUpstream;
  id: string | number;
  method: string;
  resolve: (result: Record<string, unknown>) => void;
  /** Answered, by the fuzz's own message or by letting it go. */
  answered: boolean;
  /** Let go: the server's handler returned (after an answer of the fuzz's own, a late second one). */
  released: boolean;
}

/** Where an answer of a fake server says it comes from: which upstream, for which of its requests. */
interface Marker {
  upstream: number;
  id: unknown;
}

/** What a notification of a fake server carries, to know it again at the client. */
interface NotificationMarker {
  upstream: number;
  seq: number;
}

/** Type-exact key of an id (`1` and `"1"` differ). */
const keyOf = (id: unknown): string => `${typeof id}:${safeJson(id)}`;

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? 'undefined';
  } catch {
    return '(too deep)';
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

class GatewayUnderFire {
  readonly upstreams = factory(
    Object.fromEntries(
      SANDBOXES.map((sandbox) => [
        sandbox,
        (request, extra, upstream) => this.hold(upstream, 'tools/call', extra.requestId),
      ]),
    ),
    { wire: 'ndjson', capabilities: { tools: {}, logging: {} } },
  );
  readonly gateway: Gateway;
  readonly shared: SharedSandboxes;
  /** Messages the client sent, as the gateway parsed them. */
  readonly sent: Record<string, unknown>[] = [];
  /** Messages the client read. */
  readonly read: unknown[] = [];
  readonly notJson: string[] = [];
  readonly held: Held[] = [];
  /** Notifications the fake servers sent, by seq: whether each carried an id. */
  readonly notified = new Map<number, { withId: boolean; upstream: number }>();
  /** Ids of the requests each fake server made (its own), by upstream. */
  readonly asked = new Map<FakeUpstream, Set<string>>();
  readonly failures: string[] = [];
  private readonly toGateway = new PassThrough();
  private readonly fromGateway = new PassThrough();
  private readonly mirror = new LineReader();
  private readonly outReader = new LineReader();
  private nonce = 0;
  private seq = 0;

  constructor() {
    const log: Logger = {
      debug: () => {},
      info: () => {},
      warn: () => {},
      error: (message) => void this.failures.push(`hintbox logged an error: ${message}`),
      child: () => log,
    };
    const tools = new Map<string, RoutedTool>(
      TOOLS.map((name) => [
        name,
        { definition: { name, inputSchema: { type: 'object' } }, sandbox: SANDBOX_OF[name]! },
      ]),
    );
    // The sandboxes, as the session makes them (the gateway only joins them).
    this.shared = new SharedSandboxes({
      upstreams: async (sandbox) => {
        const upstream = await this.upstreams(sandbox);
        upstream.server.fallbackRequestHandler = (request, extra) =>
          this.hold(upstream, request.method, extra.requestId);
        upstream.client.onerror = (error) => this.sdkError('the upstream client', error);
        return upstream;
      },
      log,
    });
    this.gateway = new Gateway({
      serverName: 'fuzzed',
      tools,
      shared: this.shared,
      log,
      callTimeoutMs: 60_000,
      readSandbox: READ_SANDBOX,
      promptsAndResources: OFFERS,
    });
    this.gateway.server.onerror = (error) => this.sdkError("the gateway's server", error);
    this.fromGateway.on('data', (chunk: Buffer) => {
      const { messages, errors } = this.outReader.push(chunk);
      this.read.push(...messages);
      this.notJson.push(...errors.map((e) => e.message));
    });
  }

  async start(): Promise<void> {
    await this.gateway.connect(new NdjsonTransport(this.toGateway, this.fromGateway));
    this.sendClient({
      jsonrpc: '2.0',
      id: 'init',
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'fuzz', version: '1' } },
    });
    await this.until(() => this.answersTo('init').length === 1, 'the handshake');
    this.sendClient({ jsonrpc: '2.0', method: 'notifications/initialized' });
  }

  // -- the client's side

  sendClient(message: unknown): void {
    this.writeClient(JSON.stringify(message) + '\n');
  }

  writeClient(text: string): void {
    const bytes = Buffer.from(text);
    // What the gateway will parse, known exactly: the same framing over the same bytes.
    for (const m of this.mirror.push(bytes).messages) this.sent.push(m);
    this.toGateway.write(bytes);
  }

  doClient(a: ClientAction): void {
    const nonce = `n${++this.nonce}`;
    const meta = (t: unknown) => (t === undefined ? {} : { _meta: { progressToken: t } });
    switch (a.kind) {
      case 'call': {
        const head = `{"jsonrpc":"2.0","id":${safeJson(a.id)},"method":"tools/call",`;
        const params = { name: a.name, nonce, ...meta(a.token) };
        if (typeof a.args === 'object' && 'deep' in a.args) {
          const text = JSON.stringify(params).slice(0, -1) + `,"arguments":${deepText(a.args.deep)}}`;
          return this.writeClient(`${head}"params":${text}}\n`);
        }
        const args =
          a.args === 'absent'
            ? {}
            : a.args === 'object'
              ? { arguments: { nonce } }
              : a.args === 'string'
                ? { arguments: 'x' }
                : a.args === 'array'
                  ? { arguments: [nonce] }
                  : { arguments: { big: 'x'.repeat(a.args.huge) } };
        return this.sendClient({
          ...a.extra,
          jsonrpc: '2.0',
          id: a.id,
          method: 'tools/call',
          params: { ...params, ...args },
        });
      }
      case 'read': {
        const target = {
          shown: {
            uri: 'note://1',
            name: 'p',
            ref: { type: 'ref/prompt', name: 'p' },
            argument: { name: 'x', value: '' },
          },
          hidden: { uri: 'note://hidden', name: 'hidden', ref: { type: 'ref/resource', uri: 'note://other/{id}' } },
          missing: {},
          odd: { uri: 7, name: ['p'], ref: { type: 'ref/other', name: 'p' } },
        }[a.target];
        return this.sendClient({
          jsonrpc: '2.0',
          id: a.id,
          method: a.method,
          params: { ...target, nonce, ...meta(a.token) },
        });
      }
      case 'setLevel':
        return this.sendClient({ jsonrpc: '2.0', id: a.id, method: 'logging/setLevel', params: { level: a.level } });
      case 'cancel':
        return this.sendClient({
          jsonrpc: '2.0',
          ...(a.id === undefined ? {} : { id: a.id }),
          method: 'notifications/cancelled',
          params: { requestId: a.requestId, ...(a.reason === undefined ? {} : { reason: a.reason }) },
        });
      case 'other':
        return this.sendClient({
          jsonrpc: '2.0',
          ...(a.id === undefined ? {} : { id: a.id }),
          method: a.method,
          ...(a.params === undefined ? {} : { params: isObject(a.params) ? { ...a.params, nonce } : a.params }),
        });
      case 'answer':
        return this.sendClient({ jsonrpc: '2.0', id: a.id, ...(a.body as object) });
      case 'object':
        return this.sendClient({ ...a.value, jsonrpc: '2.0' });
      case 'bytes':
        return this.writeClient(a.text);
    }
  }

  // -- the servers' side

  /** The current upstream of a sandbox, if it runs. */
  private running(index: number): FakeUpstream | undefined {
    const sandbox = SANDBOXES[index];
    return this.upstreams.started.findLast((u) => u.id === sandbox && u.forwarded.connected);
  }

  private hold(upstream: FakeUpstream, method: string, id: string | number): Promise<CallToolResult> {
    return new Promise((resolve) => {
      this.held.push({
        upstream,
        id,
        method,
        resolve: (r) => resolve(r as CallToolResult),
        answered: false,
        released: false,
      });
    });
  }

  private markerOf(upstream: FakeUpstream, id: unknown): Marker {
    return { upstream: this.upstreams.started.indexOf(upstream), id };
  }

  private writeServer(upstream: FakeUpstream, text: string): void {
    upstream.writeRaw!(text);
  }

  private sendServer(upstream: FakeUpstream, message: unknown): void {
    this.writeServer(upstream, JSON.stringify(message) + '\n');
  }

  open(): Held[] {
    return this.held.filter((h) => !h.answered && h.upstream.forwarded.connected);
  }

  doServer(a: ServerAction): void {
    switch (a.kind) {
      case 'release': {
        const h = this.open()[a.pick % Math.max(1, this.open().length)];
        if (h) this.release(h);
        return;
      }
      case 'answer': {
        const h = this.open()[a.pick % Math.max(1, this.open().length)];
        if (!h) return;
        h.answered = true;
        const mark = { [MARK]: this.markerOf(h.upstream, h.id) };
        const head = `{"jsonrpc":"2.0","id":${JSON.stringify(h.id)}`;
        const s = a.shape;
        if ('deep' in s)
          return this.writeServer(
            h.upstream,
            `${head},"result":{"_meta":${JSON.stringify(mark)},"d":${deepText(s.deep)}}}\n`,
          );
        const body =
          'result' in s
            ? { result: isObject(s.result) ? { ...s.result, _meta: mark } : s.result }
            : 'error' in s
              ? { error: isObject(s.error) ? { ...s.error, data: mark } : s.error }
              : 'neither' in s
                ? {}
                : 'both' in s
                  ? { result: { _meta: mark }, error: { code: -1, message: 'both', data: mark } }
                  : 'huge' in s
                    ? { result: { _meta: mark, content: [{ type: 'text', text: 'x'.repeat(s.huge) }] } }
                    : { method: s.method, result: { _meta: mark } };
        return this.sendServer(h.upstream, { jsonrpc: '2.0', id: h.id, ...body });
      }
      case 'forge': {
        const upstream = this.running(a.sandbox);
        if (!upstream) return;
        // A guess: any id, the id of a request pending in the other sandbox, or pending anywhere.
        const choice = a.pick % 3;
        const pending = this.open().filter((h) => choice !== 1 || h.upstream !== upstream);
        const index = Math.floor(a.pick / 3) % Math.max(1, pending.length);
        const id = a.id !== undefined && choice === 0 ? a.id : pending[index]?.id;
        const mark = { [MARK]: this.markerOf(upstream, id) };
        return this.sendServer(upstream, { jsonrpc: '2.0', id, result: { _meta: mark } });
      }
      case 'notify': {
        const upstream = this.running(a.sandbox);
        if (!upstream) return;
        const seq = ++this.seq;
        const withId = a.id !== undefined && a.pick % 2 === 0;
        this.notified.set(seq, { withId, upstream: this.upstreams.started.indexOf(upstream) });
        if (withId) this.ownRequest(upstream, a.id); // with an id it is a request (and may be answered)
        const marker: NotificationMarker = { upstream: this.upstreams.started.indexOf(upstream), seq };
        let params = a.params;
        // Progress under the token hintbox sent with a request pending there (its own id), often.
        const pending = this.open().filter((h) => h.upstream === upstream);
        if (a.method === 'notifications/progress' && isObject(params) && pending.length > 0 && a.pick % 3 !== 0) {
          params = { ...params, progressToken: pending[a.pick % pending.length]!.id };
        }
        params = isObject(params) ? { ...params, [MARK]: marker } : params;
        return this.sendServer(upstream, {
          jsonrpc: '2.0',
          ...(withId ? { id: a.id } : {}),
          method: a.method,
          ...(params === undefined ? {} : { params }),
        });
      }
      case 'ask': {
        const upstream = this.running(a.sandbox);
        if (!upstream) return;
        this.ownRequest(upstream, a.id);
        return this.sendServer(upstream, { jsonrpc: '2.0', id: a.id, method: a.method, params: a.params });
      }
      case 'raw': {
        const upstream = this.running(a.sandbox);
        if (!upstream) return;
        // Ended as a line: else it would be glued to the server's next message (its answer), and
        // that call answered by its deadline only (the client side fuzzes glued lines).
        let text = a.text.endsWith('\n') ? a.text : `${a.text}\n`;
        if (text.includes(MARK_SLOT)) {
          const marker: NotificationMarker = { upstream: this.upstreams.started.indexOf(upstream), seq: ++this.seq };
          this.notified.set(marker.seq, { withId: false, upstream: marker.upstream });
          text = text.replace(MARK_SLOT, `${JSON.stringify(MARK)}:${JSON.stringify(marker)}`);
        }
        return this.writeServer(upstream, text);
      }
      case 'die': {
        const upstream = this.running(a.sandbox);
        if (upstream) void upstream.serverTransport.close();
        return;
      }
      case 'tick':
        return;
    }
  }

  private ownRequest(upstream: FakeUpstream, id: unknown): void {
    const own = this.asked.get(upstream) ?? new Set();
    this.asked.set(upstream, own.add(keyOf(id)));
  }

  private release(h: Held): void {
    h.answered = true;
    h.released = true;
    const mark = { [MARK]: this.markerOf(h.upstream, h.id) };
    h.resolve({ content: [{ type: 'text', text: 'ok' }], _meta: mark });
  }

  private sdkError(where: string, error: Error): void {
    // A programming error inside a handler; the SDK's own reports (unknown ids, bad shapes) are fine.
    if (error instanceof TypeError || error instanceof ReferenceError) {
      this.failures.push(`${where} reported ${error.name}: ${error.message.slice(0, 300)}\n${error.stack}`);
    }
  }

  // -- settling

  /**
   * Lets every held request go until no more come: each sandbox answers in the end (one the fuzz
   * answered already answers again, late).
   */
  async drain(): Promise<void> {
    for (let round = 0; round < 50; round++) {
      await this.settle();
      const held = this.held.filter((h) => !h.released && h.upstream.forwarded.connected);
      if (held.length === 0 && this.unanswered().length === 0) return;
      for (const h of held) this.release(h);
      if (round >= 10) await pause(20);
    }
  }

  /** Waits until nothing moves any more: every message sent so far has been read and acted on. */
  async settle(): Promise<void> {
    const moves = () =>
      this.read.length +
      this.held.length +
      this.upstreams.started.reduce((n, u) => n + u.received.length + (u.forwarded.connected ? 0 : 1), 0);
    let still = 0;
    for (let last = -1, i = 0; still < 3 && i < 500; i++) {
      await flush(2);
      const now = moves();
      still = now === last ? still + 1 : 0;
      last = now;
    }
  }

  answersTo(id: unknown): Record<string, unknown>[] {
    return this.responses().filter((r) => keyOf(r.id) === keyOf(id));
  }

  responses(): Record<string, unknown>[] {
    return this.read.filter((m): m is Record<string, unknown> => isObject(m) && !('method' in m));
  }

  /** Well-formed requests of the client, not cancelled by it, that have no answer yet. */
  unanswered(): Record<string, unknown>[] {
    const cancelled = new Set(
      this.sent
        .filter((m) => m.method === 'notifications/cancelled' && !('id' in m) && isObject(m.params))
        .map((m) => keyOf((m.params as Record<string, unknown>).requestId)),
    );
    const answered = new Map<string, number>();
    for (const r of this.responses()) answered.set(keyOf(r.id), (answered.get(keyOf(r.id)) ?? 0) + 1);
    const missing: Record<string, unknown>[] = [];
    for (const m of this.sent) {
      if (!JSONRPCRequestSchema.safeParse(m).success || cancelled.has(keyOf(m.id))) continue;
      const left = answered.get(keyOf(m.id)) ?? 0;
      if (left > 0) answered.set(keyOf(m.id), left - 1);
      else missing.push(m);
    }
    return missing;
  }

  async until(done: () => boolean, what: string, ms = 3_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await pause(1);
    }
  }

  async close(): Promise<void> {
    this.toGateway.end();
    await this.gateway.close();
    await this.shared.close();
    for (const u of this.upstreams.started) await u.close().catch(() => undefined);
  }
}

async function flush(rounds = 8): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// The checks

/** Everything the client read: JSON-RPC of the protocol's shapes; answers only to its requests, once each, from the right sandbox. */
function checkWhatTheClientRead(g: GatewayUnderFire): void {
  assert.deepEqual(g.notJson, [], 'every line the client reads is a JSON-RPC message');
  const requests = new Map<string, Record<string, unknown>[]>();
  for (const m of g.sent) {
    if (!('method' in m) || !('id' in m)) continue;
    requests.set(keyOf(m.id), [...(requests.get(keyOf(m.id)) ?? []), m]);
  }
  const answers = new Map<string, number>();
  for (const m of g.read) {
    const shape = JSONRPCMessageSchema.safeParse(m);
    assert.ok(shape.success, `not a JSON-RPC message of MCP's shapes: ${safeJson(m).slice(0, 500)}`);
    const message = m as Record<string, unknown>;
    if ('method' in message) {
      assert.ok(!('id' in message), `the gateway sent the client a request: ${safeJson(message).slice(0, 500)}`);
      checkNotification(g, message);
      continue;
    }
    if (!('id' in message)) continue; // an error of no request (JSON-RPC allows it)
    const key = keyOf(message.id);
    const made = requests.get(key) ?? [];
    const count = (answers.get(key) ?? 0) + 1;
    answers.set(key, count);
    assert.ok(count <= made.length, `answer ${count} to id ${key}, which the client used in ${made.length} request(s)`);
    checkAnswerSource(g, message, made);
  }
}

/** The sandbox request a marker names, and the client request it was made for. */
function sourceOf(
  g: GatewayUnderFire,
  marker: unknown,
): { client?: Record<string, unknown>; forwarded?: Record<string, unknown> } {
  if (!isObject(marker) || typeof marker.upstream !== 'number') return {};
  const upstream = g.upstreams.started[marker.upstream];
  const forwarded = upstream?.received.find((m) => 'method' in m && 'id' in m && keyOf(m.id) === keyOf(marker.id)) as
    Record<string, unknown> | undefined;
  const nonce = isObject(forwarded?.params) ? forwarded.params.nonce : undefined;
  const client = nonce === undefined ? undefined : g.sent.find((m) => isObject(m.params) && m.params.nonce === nonce);
  return { ...(client ? { client } : {}), ...(forwarded ? { forwarded } : {}) };
}

function checkAnswerSource(
  g: GatewayUnderFire,
  answer: Record<string, unknown>,
  made: Record<string, unknown>[],
): void {
  const result = isObject(answer.result) ? answer.result : undefined;
  const error = isObject(answer.error) ? answer.error : undefined;
  const marker =
    (isObject(result?._meta) ? result._meta[MARK] : undefined) ??
    (isObject(error?.data) ? error.data[MARK] : undefined);
  if (marker === undefined) {
    // Not a sandbox's answer: hintbox's own (an error, an error result, a list, an empty result).
    // (An unsubscribe that other clients' subscriptions keep is answered by hintbox.)
    const forwardedOnly = made.every(
      (m) => m.method === 'tools/call' || (READS.includes(m.method as string) && m.method !== 'resources/unsubscribe'),
    );
    if (forwardedOnly && result && result.isError !== true) {
      assert.fail(`a success answer to ${keyOf(answer.id)} that no sandbox gave: ${safeJson(answer).slice(0, 300)}`);
    }
    return;
  }
  const { client, forwarded } = sourceOf(g, marker);
  assert.ok(forwarded, `an answer the sandbox gave to a request it was never sent: ${safeJson(marker)}`);
  assert.ok(client, `an answer to a request the client never made: ${safeJson(forwarded).slice(0, 300)}`);
  assert.equal(
    keyOf(client.id),
    keyOf(answer.id),
    'the answer reaches the client under the id of the request it answers',
  );
}

function checkNotification(g: GatewayUnderFire, n: Record<string, unknown>): void {
  const params = isObject(n.params) ? n.params : {};
  const marker = params[MARK];
  assert.ok(
    ['notifications/progress', 'notifications/message', 'notifications/resources/updated'].includes(n.method as string),
    `a notification no sandbox may pass to the client: ${safeJson(n).slice(0, 300)}`,
  );
  assert.ok(
    isObject(marker) && typeof marker.seq === 'number',
    `a notification no sandbox sent: ${safeJson(n).slice(0, 300)}`,
  );
  const origin = g.notified.get(marker.seq);
  assert.ok(origin && !origin.withId, `a "notification" with an id was passed on: ${safeJson(n).slice(0, 300)}`);
  if (n.method === 'notifications/progress') {
    const tokens = g.sent.flatMap((m) => {
      const meta = isObject(m.params) && isObject(m.params._meta) ? m.params._meta : {};
      return 'progressToken' in meta ? [keyOf(meta.progressToken)] : [];
    });
    assert.ok(
      tokens.includes(keyOf(params.progressToken)),
      `progress under a token the client never used: ${safeJson(n)}`,
    );
  }
  if (n.method === 'notifications/resources/updated') {
    const subscribed = g.sent.some(
      (m) => m.method === 'resources/subscribe' && isObject(m.params) && m.params.uri === params.uri,
    );
    assert.ok(subscribed, `an update of a resource the client never subscribed to: ${safeJson(n)}`);
  }
}

const UPSTREAM_ID = /^hintbox(-read)?:g\d+:\d+$/;

/** What each sandbox received: only what hintbox sends of its own, and the client's requests as it made them. */
function checkWhatTheSandboxesGot(g: GatewayUnderFire): void {
  const nonces = new Set<unknown>();
  g.upstreams.started.forEach((upstream) => {
    const sentIds = new Set<string>();
    for (const m of upstream.received as Record<string, unknown>[]) {
      const show = () => `sandbox ${upstream.id} got ${safeJson(m).slice(0, 300)}`;
      const method = m.method;
      if (method === undefined) {
        assert.ok(g.asked.get(upstream)?.has(keyOf(m.id)), `an answer to a request it never made: ${show()}`);
        continue;
      }
      if (method === 'initialize' || method === 'notifications/initialized') continue;
      if (method === 'logging/setLevel') {
        assert.match(String(m.id), /^hintbox-level:\d+$/, show());
        continue;
      }
      if (method === 'notifications/cancelled') {
        const of = isObject(m.params) ? m.params.requestId : undefined;
        assert.ok(sentIds.has(keyOf(of)), `a cancellation of a request it was never sent: ${show()}`);
        continue;
      }
      assert.ok(method === 'tools/call' || READS.includes(method as string), `not a call or a read: ${show()}`);
      assert.ok(typeof m.id === 'string' && UPSTREAM_ID.test(m.id), `not under hintbox's own id: ${show()}`);
      sentIds.add(keyOf(m.id));
      const params = isObject(m.params) ? m.params : {};
      assert.ok(params.nonce !== undefined && !nonces.has(params.nonce), `sent twice, or made by nobody: ${show()}`);
      nonces.add(params.nonce);
      const client = g.sent.find((c) => isObject(c.params) && c.params.nonce === params.nonce)!;
      assert.ok(isRequestId(client.id), `a request whose id is no JSON-RPC id was forwarded: ${show()}`);
      assert.equal(client.method, method, show());
      assert.ok(sameParams(client.params, params), `params changed on the way: ${show()}`);
      if (method === 'tools/call') {
        assert.equal(SANDBOX_OF[params.name as string], upstream.id, `a call routed to the wrong sandbox: ${show()}`);
        assert.ok(
          params.arguments === undefined || isObject(params.arguments),
          `malformed arguments forwarded: ${show()}`,
        );
      } else {
        assert.equal(upstream.id, READ_SANDBOX, `a read outside the read sandbox: ${show()}`);
      }
    }
  });
}

/** Params as forwarded: the client's, but for the progress token (hintbox's own upstream). */
function sameParams(client: unknown, forwarded: Record<string, unknown>): boolean {
  const strip = (p: unknown): unknown => {
    if (!isObject(p) || !isObject(p._meta)) return p;
    const meta = { ...p._meta };
    delete meta.progressToken;
    return { ...p, _meta: meta };
  };
  try {
    return isDeepStrictEqual(strip(client), strip(forwarded));
  } catch {
    return true; // too deep to compare here: the nonce matched
  }
}

// ---------------------------------------------------------------------------------------------

const SERVER_KINDS: ReadonlySet<string> = new Set([
  'release',
  'answer',
  'forge',
  'notify',
  'ask',
  'raw',
  'die',
  'tick',
]);
const isServerAction = (a: ClientAction | ServerAction): a is ServerAction => SERVER_KINDS.has(a.kind);

/** A request the gateway forwards, well-formed: a call of a routed tool, or a read of what is shown. */
const forwardedRequest: fc.Arbitrary<ClientAction> = fc.oneof(
  fc.record(
    {
      kind: fc.constant('call' as const),
      id: fc.oneof(fc.nat(3), fc.constantFrom('a', '1')),
      name: fc.constantFrom(...TOOLS),
      args: fc.constantFrom<Args>('object', 'absent'),
      token: fc.oneof(fc.nat(2), fc.constant('t')),
    },
    { requiredKeys: ['kind', 'id', 'name', 'args'] },
  ),
  fc.record(
    {
      kind: fc.constant('read' as const),
      id: fc.oneof(fc.nat(3), fc.constantFrom('a', '1')),
      method: fc.constantFrom(...READS),
      target: fc.constant('shown' as const),
      token: fc.nat(2),
    },
    { requiredKeys: ['kind', 'id', 'method', 'target'] },
  ),
);

describe('fuzz: hostile input on both sides of the gateway', () => {
  const uncaught: unknown[] = [];
  const onUnhandled = (reason: unknown) => void uncaught.push(reason);
  before(() => process.on('unhandledRejection', onUnhandled));
  after(() => process.off('unhandledRejection', onUnhandled));

  /** Plays the actions, lets every held request go, and checks everything (see the header). */
  async function run(actions: (ClientAction | ServerAction)[]): Promise<GatewayUnderFire> {
    uncaught.length = 0;
    const g = new GatewayUnderFire();
    try {
      await g.start();
      for (const a of actions) {
        if (isServerAction(a)) {
          await g.settle(); // what the client sent so far has reached the sandboxes
          g.doServer(a);
        } else g.doClient(a);
      }
      await g.drain();
      // Still serving: a well-formed call gets its sandbox's answer (after the end of any line begun).
      g.writeClient('\n');
      g.doClient({ kind: 'call', id: 'probe', name: 'a', args: 'object' });
      await g.drain();
      await g.until(() => g.unanswered().length === 0, 'an answer to every request').catch(() => undefined);
      assert.deepEqual(
        g.unanswered().map((m) => safeJson(m).slice(0, 200)),
        [],
        'every well-formed request the client did not cancel is answered',
      );
      assert.equal(g.answersTo('probe').length, 1, 'the probe call is answered');
      checkWhatTheClientRead(g);
      checkWhatTheSandboxesGot(g);
      assert.deepEqual(g.failures, []);
      assert.deepEqual(uncaught.map(String), [], 'no unhandled rejection');
      return g;
    } finally {
      await g.close();
    }
  }

  it('passes a sandbox answer of any shape to its request only, once, and answers every request', async () => {
    const exchange = fc.array(fc.tuple(forwardedRequest, answerShape, fc.boolean(), fc.nat(5)), {
      minLength: 1,
      maxLength: 4,
    });
    await fc.assert(
      fc.asyncProperty(exchange, async (pairs) => {
        // The requests; each sandbox answers under the id of a request pending in the other (a
        // guess); then each held request is answered in its way (or let go), as they arrived.
        const forged = pairs.map((_, i): ServerAction => ({ kind: 'forge', sandbox: i % 2, pick: 1 }));
        const answers = pairs.map(([, shape, honest, pick]): ServerAction =>
          honest ? { kind: 'release', pick } : { kind: 'answer', pick, shape },
        );
        await run([...pairs.map(([request]) => request), ...forged, ...answers]);
      }),
      fuzzParameters(100, 15_000),
    );
  });

  // proves: STDIO
  it('keeps every answer to its call, forwards nothing it should not, and never hangs, whatever both sides send', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(action, { maxLength: 24 }), async (actions) => void (await run(actions))),
      fuzzParameters(120, 15_000),
    );
  });
});

describe('counterexamples the fuzzing found, kept', () => {
  const run = async (actions: (ClientAction | ServerAction)[]) => {
    const g = new GatewayUnderFire();
    try {
      await g.start();
      for (const a of actions) {
        if (isServerAction(a)) {
          await g.settle();
          g.doServer(a);
        } else g.doClient(a);
      }
      await g.drain();
      return g;
    } finally {
      await g.close();
    }
  };

  it('forwards no tools/call (nor read) whose id is no JSON-RPC id, and answers nothing under it', async () => {
    for (const id of [null, 1.5, 1e300, {}, [1], true]) {
      const g = await run([
        { kind: 'call', id, name: 'a', args: 'object' },
        { kind: 'read', id, method: 'resources/read', target: 'shown' },
        { kind: 'setLevel', id, level: 'debug' },
      ]);
      const forwarded = g.upstreams.started.flatMap((u) => u.received).filter((m) => 'id' in m && 'method' in m);
      assert.deepEqual(
        forwarded.filter((m) => m.method !== 'initialize'),
        [],
        `nothing forwarded for id ${safeJson(id)}`,
      );
      assert.deepEqual(
        g.responses().filter((r) => r.id !== 'init'),
        [],
        `nothing answered under id ${safeJson(id)}`,
      );
    }
  });

  it('a "cancellation" with an id cancels nothing: it is a request, answered, and the call is answered too', async () => {
    const g = await run([
      { kind: 'call', id: '1', name: 'a', args: 'object' },
      { kind: 'cancel', requestId: '1', id: 0 },
    ]);
    const [answer] = g.answersTo('1');
    assert.ok(isObject(answer?.result) && isObject(answer.result._meta), `the call's answer: ${safeJson(answer)}`);
    assert.equal((g.answersTo(0)[0]?.error as { code?: number } | undefined)?.code, -32601, 'no such method');
    const cancelled = g.upstreams.started[0]!.received.filter(
      (m) => 'method' in m && m.method === 'notifications/cancelled',
    );
    assert.deepEqual(cancelled, [], 'nothing cancelled upstream');
  });

  it("replaces an error code that is no safe integer (the client's schema refuses it, and its request hangs)", async () => {
    const g = await run([
      { kind: 'read', id: 'a', method: 'resources/read', target: 'shown' },
      { kind: 'answer', pick: 0, shape: { error: { code: 2 ** 53, message: '' } } },
    ]);
    const [answer] = g.answersTo('a');
    assert.equal((answer?.error as { code?: unknown } | undefined)?.code, -32603);
  });

  it('answers a call whose arguments are too deep to send with an error, and does not call the sandbox dead', async () => {
    const g = await run([{ kind: 'call', id: 'deep', name: 'a', args: { deep: 10_000 } }]);
    const answers = g.answersTo('deep');
    assert.equal(answers.length, 1);
    const text = safeJson(answers[0]);
    assert.doesNotMatch(text, /died/, text);
    if (isObject(answers[0]?.result)) assert.match(text, /could not send a to its sandbox/);
  });

  it('answers a read whose answer is nested too deep to pass on with an error, instead of never', async () => {
    const g = await run([
      { kind: 'read', id: 5, method: 'resources/read', target: 'shown' },
      { kind: 'answer', pick: 0, shape: { deep: 10_000 } },
    ]);
    const answers = g.answersTo(5);
    assert.equal(answers.length, 1);
    assert.match(String((answers[0]!.error as { message?: unknown }).message), /could not be passed on/);
  });
});
