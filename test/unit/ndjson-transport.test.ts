import assert from 'node:assert/strict';
import { PassThrough, Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { LineReader, MAX_LINE_BYTES, NdjsonTransport } from '../../src/mcp/ndjson-transport.js';

const messages = [
  { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'read', arguments: { path: '/å/ü 😀' } } },
  { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p', progress: 1 } },
  { jsonrpc: '2.0', id: 'hintbox:7', result: { content: [{ type: 'text', text: 'line\nbreak' }] } },
];
const wire = Buffer.from(messages.map((m) => JSON.stringify(m) + '\n').join(''));

describe('LineReader', () => {
  it('frames messages however the bytes are split, multi-byte characters included', () => {
    for (let cut = 0; cut <= wire.length; cut++) {
      const reader = new LineReader();
      const a = reader.push(wire.subarray(0, cut));
      const b = reader.push(wire.subarray(cut));
      assert.deepEqual([...a.messages, ...b.messages], messages, `split at byte ${cut}`);
      assert.deepEqual([...a.errors, ...b.errors], [], `no errors when split at byte ${cut}`);
    }
  });

  it('frames byte by byte', () => {
    const reader = new LineReader();
    const out = [];
    for (const byte of wire) out.push(...reader.push(Buffer.from([byte])).messages);
    assert.deepEqual(out, messages);
  });

  it('reports a line that is not JSON-RPC and goes on with the next', () => {
    const reader = new LineReader();
    const { messages: got, errors } = reader.push(
      Buffer.from('garbage\n{"jsonrpc":"1.0"}\r\n\n' + JSON.stringify(messages[0]) + '\r\n'),
    );
    assert.deepEqual(got, [messages[0]]);
    assert.equal(errors.length, 2);
    assert.match(errors[0]?.message ?? '', /not JSON: garbage/);
    assert.match(errors[1]?.message ?? '', /not a JSON-RPC 2.0 message/);
  });

  it('drops a line that grows past the limit instead of buffering it', () => {
    const reader = new LineReader();
    const big = Buffer.alloc(MAX_LINE_BYTES + 1, 0x61);
    const { errors } = reader.push(big);
    assert.equal(errors.length, 1);
    assert.match(errors[0]?.message ?? '', /longer than/);
    const next = reader.push(Buffer.from(JSON.stringify(messages[1]) + '\n'));
    assert.deepEqual(next.messages.length, 1, 'the reader recovers at the next line');
  });
});

describe('NdjsonTransport', () => {
  it('sends one line per message and reads the other side, and closes once', async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    const transport = new NdjsonTransport(input, output);
    const received: unknown[] = [];
    let closes = 0;
    transport.onmessage = (m) => received.push(m);
    transport.onclose = () => closes++;
    await transport.start();
    await transport.send(messages[0] as never);
    assert.equal(output.read()?.toString(), JSON.stringify(messages[0]) + '\n');
    input.write(wire);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(received, messages);
    input.end();
    await new Promise((r) => setImmediate(r));
    await transport.close();
    assert.equal(closes, 1);
    await assert.rejects(transport.send(messages[0] as never), /closed/);
  });

  it('writes what one turn sends in one write, and refuses to buffer without end for a side that never reads', async () => {
    const writes: string[] = [];
    // A server that takes the first write and then never reads again.
    const stuck = new Writable({
      highWaterMark: 16,
      write(chunk: Buffer, _encoding, callback) {
        writes.push(chunk.toString());
        if (writes.length === 1) callback();
      },
    });
    const transport = new NdjsonTransport(new PassThrough(), stuck, true, 4096);
    await transport.start();
    const call = (id: number) => ({
      jsonrpc: '2.0' as const,
      id,
      method: 'tools/call',
      params: { pad: 'x'.repeat(100) },
    });
    await Promise.all([transport.send(call(1)), transport.send(call(2)), transport.send(call(3))]);
    assert.equal(writes.length, 1, 'three messages of one turn, one write');
    assert.equal(writes[0]?.split('\n').length, 4);

    // Sends pile up behind the stuck write until the limit; then a send fails at once.
    let refused: Error | undefined;
    let sent = 0;
    for (let id = 4; id < 1000 && !refused; id++) {
      transport.send(call(id)).catch((error: Error) => (refused ??= error));
      await new Promise((r) => setImmediate(r));
      if (!refused) sent++;
    }
    assert.match(refused?.message ?? '', /the other side is not reading: \d+ bytes are still waiting/);
    assert.ok(stuck.writableLength <= 4096 + 200, `at most the limit waits (${stuck.writableLength} bytes)`);
    assert.ok(sent > 0, 'sends went through until the limit');
  });
});
