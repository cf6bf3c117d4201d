import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LineSplitter } from '../../src/audit/line-splitter.js';

function split(chunks: Buffer[]): { lines: string[]; bytes: number[]; rest: string } {
  const splitter = new LineSplitter();
  const lines: string[] = [];
  const bytes: number[] = [];
  for (const chunk of chunks) {
    for (const line of splitter.push(chunk)) {
      lines.push(line.line.toString('utf8'));
      bytes.push(line.bytes);
    }
  }
  return { lines, bytes, rest: splitter.rest().toString('utf8') };
}

describe('LineSplitter', () => {
  it('splits at \\n only, across chunks, counting each line with its newline; the tail is the rest', () => {
    const text = 'ab\ncd\r\n\n€uro\nno newline';
    const whole = Buffer.from(text);
    const expected = { lines: ['ab', 'cd\r', '', '€uro'], bytes: [3, 4, 1, 7], rest: 'no newline' };
    assert.deepEqual(split([whole]), expected);
    // Every byte its own chunk, in one buffer reused for each (as a reader does with its chunk).
    const reused = Buffer.alloc(1);
    const splitter = new LineSplitter();
    const lines: string[] = [];
    for (const byte of whole) {
      reused[0] = byte;
      for (const { line } of splitter.push(reused)) lines.push(line.toString('utf8'));
    }
    assert.deepEqual(lines, expected.lines);
    assert.equal(splitter.rest().toString('utf8'), 'no newline');
  });

  it('takes linear time for a line of many chunks (no concatenation per chunk)', () => {
    // 16 MiB in 4 KiB chunks: joining at every chunk would copy ~32 GiB.
    const chunk = Buffer.alloc(4096, 0x61);
    const started = performance.now();
    const splitter = new LineSplitter();
    for (let i = 0; i < 4096; i++) assert.equal(splitter.push(chunk).next().done, true, 'no newline yet');
    const [line] = [...splitter.push(Buffer.from('\n'))];
    const ms = performance.now() - started;
    assert.equal(line?.line.length, 16 * 1024 * 1024);
    assert.equal(line?.bytes, 16 * 1024 * 1024 + 1);
    assert.ok(ms < 2000, `${ms.toFixed(0)} ms`);
  });
});
